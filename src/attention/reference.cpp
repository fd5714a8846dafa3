// Two independent routes to the attention output, for tests and `saobp gradcheck`:
// - attention_reference: the same math as the fused kernel, composed from autograd primitives
//   (so its backward is the engine's, not the hand derivation);
// - literal_bp_probs: eq. 11 multiplied out over the senders, in f64 (our reading of Algorithm 1
//   as printed; docs/saobp-gradients.md §1).
#include <cmath>

#include "attention/attention.h"
#include "autograd/ops.h"

namespace saobp {

namespace {

struct MaskHost {
  int64_t B, T;
  std::vector<uint8_t> key;  // (B,T) or empty
  bool causal, leak;  // leak: a causal mask whose messages come from every other row (AttentionConfig::leak)
  bool token(int64_t b, int64_t i) const { return key.empty() || key[static_cast<size_t>(b * T + i)]; }
  bool allowed(int64_t b, int64_t j, int64_t k) const { return token(b, k) && (!causal || k <= j); }
  bool sends_to(int64_t b, int64_t i, int64_t j) const {
    return token(b, i) && (causal && !leak ? i < j : i != j);
  }
};

MaskHost host_mask(const Tensor& key_mask, int64_t B, int64_t T, const AttentionConfig& cfg) {
  MaskHost m{B, T, {}, cfg.causal, cfg.causal && cfg.leak};
  if (key_mask.defined()) m.key = key_mask.to_vector<uint8_t>();
  return m;
}

}  // namespace

Var attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& key_mask, const Var& lambda,
                        const AttentionConfig& cfg) {
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  const MaskHost mh = host_mask(key_mask, B, T, cfg);
  std::vector<uint8_t> allowed(static_cast<size_t>(B * T * T));
  std::vector<double> senders(static_cast<size_t>(B * NH * T * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t i = 0; i < T; ++i) {
        allowed[static_cast<size_t>((b * T + j) * T + i)] = mh.allowed(b, j, i);
        for (int64_t h = 0; h < NH; ++h)
          senders[static_cast<size_t>(((b * NH + h) * T + j) * T + i)] = mh.sends_to(b, i, j);
      }
  const Tensor M = Tensor::from_vector(allowed, {B, 1, T, T}, q.device());
  const DType dt = q.dtype();

  Var s = scale(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(static_cast<double>(HS)));
  Var A = softmax(s, M);
  Var P = A;
  if (uses_lambda(cfg.variant)) {
    // c = 1 - 1/w: 1 - e^-λ (BP-High) or 1 - e^λ (BP-Low); the factor is log(1 - c P).
    const double sign = cfg.variant == AttnVariant::bp_high ? -1.0 : 1.0;
    Var c = add_scalar(scale(exp(scale(lambda, sign)), -1.0), 1.0);
    Var negc = reshape(scale(c, -1.0), {1, NH, 1, 1});
    // N[j,i] = 1 when row i sends to row j: G = N F sums the log-factors of the senders.
    Var N(Tensor::from_vector(senders, {B, NH, T, T}).to(dt).to(q.device()));
    for (int t = 0; t < cfg.steps; ++t) {
      Var F = log1p(mul(P, negc));
      P = softmax(add(s, matmul(N, F)), M);
    }
  } else if (cfg.variant == AttnVariant::bp_elemmul) {
    Var Mf(M.to(dt));
    Var PP = mul(matmul(A, transpose(A, -1, -2)), Mf);
    P = div(PP, sum(PP, -1, true));
  }
  return matmul(P, v);
}

Tensor literal_bp_probs(const Tensor& q, const Tensor& k, const Tensor& key_mask,
                        const std::vector<double>& lambda, const AttentionConfig& cfg) {
  if (!uses_lambda(cfg.variant)) fail("literal_bp_probs", "only bp_high and bp_low have a Potts message");
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  if (static_cast<int64_t>(lambda.size()) != NH)
    fail("literal_bp_probs", "{} λ values for {} heads", lambda.size(), NH);
  const MaskHost mh = host_mask(key_mask, B, T, cfg);
  const std::vector<double> Q = q.to(DType::f64).to_vector<double>(),
                            K = k.to(DType::f64).to_vector<double>();
  std::vector<double> out(static_cast<size_t>(B * NH * T * T), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      const size_t base = static_cast<size_t>((b * NH + h) * T);
      // A = softmax over the allowed keys of the scaled scores.
      std::vector<double> A(static_cast<size_t>(T * T), 0.0);
      for (int64_t j = 0; j < T; ++j) {
        double mx = -INFINITY, z = 0;
        std::vector<double> s(static_cast<size_t>(T));
        for (int64_t kk = 0; kk < T; ++kk) {
          double dot = 0;
          for (int64_t d = 0; d < HS; ++d)
            dot += Q[(base + static_cast<size_t>(j)) * HS + d] * K[(base + static_cast<size_t>(kk)) * HS + d];
          s[static_cast<size_t>(kk)] = dot / std::sqrt(static_cast<double>(HS));
          if (mh.allowed(b, j, kk)) mx = std::max(mx, s[static_cast<size_t>(kk)]);
        }
        for (int64_t kk = 0; kk < T; ++kk)
          if (mh.allowed(b, j, kk)) z += std::exp(s[static_cast<size_t>(kk)] - mx);
        for (int64_t kk = 0; kk < T; ++kk)
          if (mh.allowed(b, j, kk))
            A[static_cast<size_t>(j * T + kk)] = std::exp(s[static_cast<size_t>(kk)] - mx) / z;
      }
      // Messages M_ik = w S_i + (1 - w) A_ik (eq. 9), beliefs b_jk ∝ A_jk Π_{i∈N(j)} M_ik (eq. 11).
      const double w = cfg.variant == AttnVariant::bp_high ? std::exp(lambda[static_cast<size_t>(h)])
                                                           : std::exp(-lambda[static_cast<size_t>(h)]);
      for (int64_t j = 0; j < T; ++j) {
        std::vector<double> bel(static_cast<size_t>(T), 0.0);
        double z = 0;
        for (int64_t kk = 0; kk < T; ++kk) {
          if (!mh.allowed(b, j, kk)) continue;
          double prod = A[static_cast<size_t>(j * T + kk)];
          for (int64_t i = 0; i < T; ++i) {
            if (!mh.sends_to(b, i, j)) continue;
            double Si = 0;
            for (int64_t l = 0; l < T; ++l) Si += A[static_cast<size_t>(i * T + l)];
            prod *= w * Si + (1 - w) * A[static_cast<size_t>(i * T + kk)];
          }
          bel[static_cast<size_t>(kk)] = prod;
          z += prod;
        }
        for (int64_t kk = 0; kk < T; ++kk)
          out[base * T + static_cast<size_t>(j * T + kk)] = z > 0 ? bel[static_cast<size_t>(kk)] / z : 0.0;
      }
    }
  return Tensor::from_vector(out, {B, NH, T, T});
}

}  // namespace saobp
