// `saobp explain`: one head of SAOBP on a small random example, every intermediate printed in
// the notation of docs/saobp-gradients.md (§6 is a worked example made with this command).
// The arithmetic here is plain f64 loops, written for reading; the final B is compared with
// the fused kernel's.
#include <cmath>

#include "attention/attention.h"
#include "cli/commands.h"
#include "tensor/kernels.h"

namespace saobp::cli {

namespace {

struct ExplainOptions {
  int T = 4, hs = 2, seed = 42;
  double lambda = 0.5;
  bool causal = false;
  std::string variant = "bp_high";
};

using Mat = std::vector<std::vector<double>>;

void print_matrix(const char* title, const Mat& m, const std::vector<std::vector<bool>>* allowed = nullptr) {
  fmt::print("\n{}\n", title);
  for (size_t j = 0; j < m.size(); ++j) {
    fmt::print("  row {}:", j);
    for (size_t k = 0; k < m[j].size(); ++k) {
      if (allowed && !(*allowed)[j][k])
        fmt::print(" {:>10}", "·");
      else
        fmt::print(" {:>10.6f}", m[j][k]);
    }
    fmt::print("\n");
  }
}

int run_explain(const ExplainOptions& o) {
  const AttnVariant v = parse_variant(o.variant);
  if (!uses_lambda(v)) fail("explain", "explain shows the Potts message passing: use bp_high or bp_low");
  const int64_t T = o.T, HS = o.hs;
  Tensor q = Tensor::empty({1, 1, T, HS}, DType::f64), k = q.empty_like(), val = q.empty_like();
  kern::fill_random(q, RandomKind::normal, 0, 1, RngKey{static_cast<uint64_t>(o.seed), 1, 0});
  kern::fill_random(k, RandomKind::normal, 0, 1, RngKey{static_cast<uint64_t>(o.seed), 2, 0});
  kern::fill_random(val, RandomKind::normal, 0, 1, RngKey{static_cast<uint64_t>(o.seed), 3, 0});
  const std::vector<double> Q = q.to_vector<double>(), K = k.to_vector<double>();
  const auto n = static_cast<size_t>(T);

  std::vector<std::vector<bool>> allowed(n, std::vector<bool>(n, true));
  for (size_t j = 0; j < n; ++j)
    for (size_t kk = 0; kk < n; ++kk) allowed[j][kk] = !o.causal || kk <= j;
  const double w = v == AttnVariant::bp_high ? std::exp(o.lambda) : std::exp(-o.lambda);
  const double c = 1 - 1 / w;
  fmt::print("SAOBP explained: {} {}, T = {}, HS = {}, λ = {}, seed {}\n", o.variant,
             o.causal ? "(causal decoder)" : "(encoder)", T, HS, o.lambda, o.seed);
  fmt::print("w = {} = {:.6f},  c = 1 - 1/w = {:.6f}\n", v == AttnVariant::bp_high ? "e^λ" : "e^-λ", w, c);

  Mat s(n, std::vector<double>(n)), A = s, f = s, F = s, G = s, L = s, B = s;
  for (size_t j = 0; j < n; ++j)
    for (size_t kk = 0; kk < n; ++kk) {
      double d = 0;
      for (size_t h = 0; h < static_cast<size_t>(HS); ++h) d += Q[j * HS + h] * K[kk * HS + h];
      s[j][kk] = d / std::sqrt(static_cast<double>(HS));
    }
  auto softmax_rows = [&](const Mat& x, Mat& y) {
    for (size_t j = 0; j < n; ++j) {
      double mx = -INFINITY, z = 0;
      for (size_t kk = 0; kk < n; ++kk)
        if (allowed[j][kk]) mx = std::max(mx, x[j][kk]);
      for (size_t kk = 0; kk < n; ++kk) z += allowed[j][kk] ? std::exp(x[j][kk] - mx) : 0;
      for (size_t kk = 0; kk < n; ++kk) y[j][kk] = allowed[j][kk] ? std::exp(x[j][kk] - mx) / z : 0;
    }
  };
  print_matrix("1. scores s = Q Kᵀ / sqrt(HS)  (· = not allowed)", s, &allowed);
  softmax_rows(s, A);
  print_matrix("2. A = softmax of s over the allowed keys of each row", A, &allowed);
  for (size_t i = 0; i < n; ++i)
    for (size_t kk = 0; kk < n; ++kk) {
      f[i][kk] = 1 - c * A[i][kk];
      F[i][kk] = std::log(f[i][kk]);
    }
  print_matrix(
      "3. message factors f_ik = 1 - c A_ik  (the message M_ik = w S_i + (1-w) A_ik divided by w S_i, S_i = "
      "1)",
      f);
  print_matrix("4. log-factors F_ik = log f_ik  (0 where A is 0)", F);
  std::vector<double> colsum(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t kk = 0; kk < n; ++kk) colsum[kk] += F[i][kk];
  if (!o.causal) {
    fmt::print("\n5. column sums Σ_i F_ik:");
    for (double x : colsum) fmt::print(" {:.6f}", x);
    fmt::print("\n");
    for (size_t j = 0; j < n; ++j)
      for (size_t kk = 0; kk < n; ++kk) G[j][kk] = colsum[kk] - F[j][kk];
    print_matrix("6. G_jk = Σ_{i≠j} F_ik = column sum minus row j's own term", G);
  } else {
    std::vector<double> acc(n, 0.0);
    for (size_t j = 0; j < n; ++j) {
      G[j] = acc;
      for (size_t kk = 0; kk < n; ++kk) acc[kk] += F[j][kk];
    }
    print_matrix("5-6. G_jk = Σ_{i<j} F_ik: exclusive prefix sums down the rows (row 0 hears nobody)", G);
  }
  for (size_t j = 0; j < n; ++j)
    for (size_t kk = 0; kk < n; ++kk) L[j][kk] = s[j][kk] + G[j][kk];
  print_matrix("7. refined logits L = s + G", L, &allowed);
  softmax_rows(L, B);
  print_matrix("8. B = softmax of L over the allowed keys  (what multiplies V)", B, &allowed);

  AttentionMaps maps;
  attention(Var(q), Var(k), Var(val), Tensor(), lambda_constant(o.lambda, 1, DType::f64),
            AttentionConfig{v, o.causal, 1}, &maps);
  const std::vector<double> fused = maps.probs.to_vector<double>();
  double diff = 0;
  for (size_t j = 0; j < n; ++j)
    for (size_t kk = 0; kk < n; ++kk) diff = std::max(diff, std::abs(fused[j * n + kk] - B[j][kk]));
  fmt::print("\nThe fused kernel's B differs from step 8 by at most {:.2e}.\n", diff);
  return diff < 1e-12 ? 0 : 1;
}

}  // namespace

void register_explain(CLI::App& app) {
  static ExplainOptions o;
  CLI::App* sub = app.add_subcommand("explain", "Print every step of SAOBP on a small random example");
  sub->add_option("--T", o.T, "sequence length")->check(in_range(1, 12));
  sub->add_option("--head-size", o.hs, "head size")->check(at_least(1));
  sub->add_option("--lambda", o.lambda, "λ")->check(at_least(0));
  sub->add_option("--variant", o.variant, "bp_high or bp_low");
  sub->add_option("--seed", o.seed, "random seed");
  sub->add_flag("--causal", o.causal, "causal decoder");
  add_command(sub, [] { return run_explain(o); });
}

}  // namespace saobp::cli
