// `saobp gradcheck`: the float64 finite-difference check through a whole attention block
//   x -> linear (QKV) -> split heads -> attention (variant) -> merge heads -> linear (out)
// printing analytic and numeric gradients side by side and the worst error (gradcheck.h).
#include <cmath>

#include "attention/attention.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "cli/commands.h"
#include "tensor/kernels.h"

namespace saobp::cli {

namespace {

struct GradcheckOptions {
  std::string variant = "bp_high";
  int T = 6, heads = 2, hs = 3, batch = 2, steps = 1, pad = 0, seed = 42, show = 6;
  double lambda = 0.2;
  bool causal = false, learnable = false, reference = false;
};

int run_gradcheck(const GradcheckOptions& o) {
  AttentionConfig cfg{parse_variant(o.variant), o.causal, o.steps};
  if (o.pad >= o.T) fail("gradcheck", "--pad {} must be smaller than --T {}", o.pad, o.T);
  const int64_t B = o.batch, T = o.T, NH = o.heads, C = o.heads * o.hs;
  auto rnd = [&](const Shape& s, uint64_t stream, double sd) {
    Tensor t = Tensor::empty(s, DType::f64);
    kern::fill_random(t, RandomKind::normal, 0.0, sd, RngKey{static_cast<uint64_t>(o.seed), stream, 0});
    return t;
  };
  // The last `pad` positions of the second sequence are padding.
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t t = T - o.pad; t < T; ++t) km[static_cast<size_t>((B - 1) * T + t)] = 0;
  const Tensor key_mask = o.pad > 0 ? Tensor::from_vector(km, {B, T}) : Tensor();

  std::vector<Tensor> inputs = {rnd({B, T, C}, 1, 1.0), rnd({3 * C, C}, 2, 0.5), rnd({C, C}, 3, 0.5)};
  std::vector<std::string> names = {"x", "W_qkv", "W_out"};
  const bool has_lambda = uses_lambda(cfg.variant);
  if (has_lambda) {
    std::vector<double> lam(static_cast<size_t>(NH));
    for (int64_t h = 0; h < NH; ++h)
      lam[static_cast<size_t>(h)] = o.lambda * (1.0 + 0.5 * static_cast<double>(h));
    if (o.learnable)
      for (double& l : lam) l = lambda_to_rho(l);
    inputs.push_back(Tensor::from_vector(lam, {NH}));
    names.push_back(o.learnable ? "rho (λ = softplus(rho))" : "lambda");
  }
  auto block = [&](const std::vector<Var>& in) {
    std::vector<Var> qkv = split(linear(in[0], in[1]), 2, C);
    Var lam = has_lambda ? (o.learnable ? lambda_learnable(in[3]) : in[3]) : Var();
    Var q = split_heads(qkv[0], NH), k = split_heads(qkv[1], NH), v = split_heads(qkv[2], NH);
    Var a = o.reference ? attention_reference(q, k, v, key_mask, lam, cfg)
                        : attention(q, k, v, key_mask, lam, cfg);
    return linear(merge_heads(a), in[2]);
  };
  fmt::print("gradcheck: {} attention ({}), {}, B={} T={} NH={} HS={} steps={}{}, λ={}{}, f64, h=1e-6\n",
             o.variant, o.reference ? "composite reference" : "fused kernel",
             o.causal ? "causal decoder" : "encoder", B, T, NH, o.hs, o.steps,
             o.pad ? fmt::format(", {} padded positions", o.pad) : "", o.lambda,
             o.learnable ? " (learnable)" : "");
  const GradcheckResult r = gradcheck(block, inputs, static_cast<uint64_t>(o.seed));
  for (size_t i = 0; i < inputs.size(); ++i) {
    double worst = 0;
    for (size_t j = 0; j < r.numeric[i].size(); ++j)
      worst = std::max(
          worst, std::abs(r.analytic[i][j] - r.numeric[i][j]) / std::max(1.0, std::abs(r.numeric[i][j])));
    fmt::print("\n{} {}: worst error {:.3e}\n  {:>5} {:>22} {:>22}\n", names[i], shape_str(inputs[i].shape()),
               worst, "index", "analytic", "numeric");
    for (size_t j = 0; j < r.numeric[i].size() && static_cast<int>(j) < o.show; ++j)
      fmt::print("  {:>5} {:>22.15e} {:>22.15e}\n", j, r.analytic[i][j], r.numeric[i][j]);
  }
  const bool ok = r.max_error < 1e-6;
  fmt::print("\nworst error over {} elements: {:.3e} ({}) -> {}\n", r.checked, r.max_error, r.worst,
             ok ? "PASS (< 1e-6)" : "FAIL (>= 1e-6)");
  return ok ? 0 : 1;
}

}  // namespace

void register_gradcheck(CLI::App& app) {
  static GradcheckOptions o;
  CLI::App* sub =
      app.add_subcommand("gradcheck", "f64 finite-difference gradient check of an attention block");
  sub->add_option("--variant", o.variant, "original, bp_high, bp_low or bp_elemmul");
  sub->add_option("--T", o.T, "sequence length")->check(at_least(1));
  sub->add_option("--heads", o.heads, "attention heads")->check(at_least(1));
  sub->add_option("--head-size", o.hs, "head size")->check(at_least(1));
  sub->add_option("--batch", o.batch, "sequences")->check(at_least(1));
  sub->add_option("--lambda", o.lambda, "λ of the first head (head h uses λ (1 + h/2))")->check(at_least(0));
  sub->add_option("--steps", o.steps, "BP steps")->check(at_least(1));
  sub->add_option("--pad", o.pad, "padded positions at the end of the last sequence")->check(at_least(0));
  sub->add_option("--seed", o.seed, "random seed");
  sub->add_option("--show", o.show, "gradient entries printed per input");
  sub->add_flag("--causal", o.causal, "causal decoder attention");
  sub->add_flag("--learnable", o.learnable, "λ = softplus(rho) with rho checked");
  sub->add_flag("--reference", o.reference, "check the composite reference instead of the fused kernel");
  add_command(sub, [] { return run_gradcheck(o); });
}

}  // namespace saobp::cli
