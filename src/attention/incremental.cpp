// Incremental causal attention (incremental.h): the cached form of attention() for generation,
// composed from the tensor ops (matmul, masked softmax, log1p, sums), so it runs on every device
// those run on. It is the composite twin of the fused forward restricted to new rows; the test
// "generation equals the full forward" (tests/model/test_generate.cpp) holds them together.
#include "attention/incremental.h"

#include <cmath>
#include <vector>

#include "attention/formulas.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace saobp {

AttentionCache attention_cache(const AttentionConfig& cfg, int64_t B, int64_t NH, int64_t HS,
                               int64_t capacity, const Var& lambda, DType dtype, Device device) {
  if (!cfg.causal)
    fail(
        "generate",
        "incremental attention needs a causal decoder (model.family = \"gpt2\"): an encoder's rows attend to "
        "later positions");
  if (cfg.skip_sinky)
    fail("generate",
         "model.skip_sinky_heads: the head skip decides from the peaked rows of the whole sequence, later "
         "positions included, so a full forward's output at a position depends on the tokens after it and no "
         "causal generation can reproduce it; generate with a model trained without it");
  if (cfg.leak)
    fail("generate",
         "model.leaky_bp: the SAOBP messages come from later rows too, so a position's output depends on the "
         "tokens after it (the leaking ablation); no causal generation can reproduce it");
  if (B < 1 || NH < 1 || HS < 1 || capacity < 1)
    fail("generate", "cache sizes must be positive: batch {}, heads {}, head size {}, capacity {}", B, NH, HS,
         capacity);
  AttentionCache c;
  c.cfg = cfg;
  c.capacity = capacity;
  c.k = Tensor::zeros({B, NH, capacity, HS}, dtype, device);
  c.v = Tensor::zeros({B, NH, capacity, HS}, dtype, device);
  if (uses_lambda(cfg.variant)) {
    if (!lambda.defined() || lambda.numel() != NH)
      fail("generate", "variant {} needs λ for each of the {} heads", variant_name(cfg.variant), NH);
    // -c per head, in double as the fused kernel's potts_c, then rounded to the dtype once.
    std::vector<double> neg_c;
    for (double l : lambda.data().to(DType::f64).to_vector<double>())
      neg_c.push_back(-attn::potts_c(cfg.variant == AttnVariant::bp_high, l));
    c.neg_c = Tensor::from_vector(neg_c, {1, NH, 1, 1}, device).to(dtype);
    c.messages = Tensor::zeros({cfg.steps, B, NH, 1, capacity}, dtype, device);
  }
  if (cfg.variant == AttnVariant::bp_elemmul)
    c.attention = Tensor::zeros({B, NH, capacity, capacity}, dtype, device);
  return c;
}

Tensor attention_extend(const Tensor& q, const Tensor& k, const Tensor& v, AttentionCache& cache) {
  NoGradGuard no_grad;
  if (!cache.k.defined()) fail("generate", "the attention cache was not made (attention_cache)");
  const int64_t B = cache.k.size(0), NH = cache.k.size(1), HS = cache.k.size(3);
  if (q.dim() != 4 || q.size(0) != B || q.size(1) != NH || q.size(3) != HS || q.size(2) < 1)
    fail("generate", "q {} does not fit the cache's (B,NH,·,HS) {}", q.str(), cache.k.str());
  if (k.shape() != q.shape() || v.shape() != q.shape())
    fail("generate", "q {}, k {}, v {} must have one shape", q.str(), k.str(), v.str());
  const int64_t P = cache.len, n = q.size(2), L = P + n;
  if (L > cache.capacity)
    fail("generate", "{} new positions after {} exceed the cache's {} positions", n, P, cache.capacity);
  const Device dev = cache.k.device();
  const DType dt = cache.k.dtype();

  // The new keys and values join the cache; the scores of the new rows against every key so far.
  Tensor k_new = cache.k.slice(2, P, L), v_new = cache.v.slice(2, P, L);
  kern::copy(k, k_new, false);
  kern::copy(v, v_new, false);
  const Var K(cache.k.slice(2, 0, L).contiguous()), V(cache.v.slice(2, 0, L).contiguous());
  const Var s =
      scale(matmul(Var(q), transpose(K, 2, 3)), 1.0 / std::sqrt(static_cast<double>(HS)));  // (B,NH,n,L)

  // Row j of the chunk sits at position P + j and sees keys k <= P + j. One new row sees all keys.
  Tensor mask, maskf, below;
  if (n > 1) {
    std::vector<uint8_t> m(static_cast<size_t>(n * L));
    std::vector<double> strict(static_cast<size_t>(n * n), 0.0);  // 1 where i < j (row j hears chunk row i)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t kk = 0; kk < L; ++kk) m[static_cast<size_t>(j * L + kk)] = kk <= P + j;
      for (int64_t i = 0; i < j; ++i) strict[static_cast<size_t>(j * n + i)] = 1.0;
    }
    mask = Tensor::from_vector(m, {1, 1, n, L}, dev);
    below = Tensor::from_vector(strict, {1, 1, n, n}, dev).to(dt).expand({B, NH, n, n}).contiguous();
  }
  const Var A = softmax(s, mask);
  Var probs = A;

  if (uses_lambda(cache.cfg.variant)) {
    // Step t: F = log(1 - c b^{t-1}) of the new rows; G = the cache's column sums M^t plus the
    // chunk rows above; b^t = softmax(s + G); then M^t += the column sums of F.
    const Var neg_c(cache.neg_c);
    for (int t = 0; t < cache.cfg.steps; ++t) {
      const Var F = log1p(mul(probs, neg_c));
      Tensor M = cache.messages.slice(0, t, t + 1).squeeze(0).slice(3, 0, L);  // (B,NH,1,L) view
      Var G(M);
      if (n > 1) G = add(G, matmul(Var(below), F));
      Tensor col = Tensor::empty({B, NH, 1, L}, dt, dev);
      kern::reduce_sum_to(F.data(), col, 1.0, false);
      probs = softmax(add(s, G), mask);
      kern::copy(col, M, true);
    }
  } else if (cache.cfg.variant == AttnVariant::bp_elemmul) {
    // B_jk = Σ_m A_jm A_km / r_j over the allowed k: the new rows of A join the cached rows first.
    Tensor rows = cache.attention.slice(2, P, L).slice(3, 0, L);
    kern::copy(A.data(), rows, false);
    const Var all(cache.attention.slice(2, 0, L).slice(3, 0, L).contiguous());
    Var Pm = matmul(A, transpose(all, 2, 3));  // (B,NH,n,L)
    if (n > 1) Pm = mul(Pm, Var(mask.to(dt)));
    probs = div(Pm, sum(Pm, 3, true));
  }
  cache.len = L;
  return matmul(probs, V).data();
}

}  // namespace saobp
