// Argument checks of the attention kernels, made once by their dispatchers (dispatch.cpp) for
// both device twins (src/attention/cpu/, src/attention/cuda/), so the CPU and the GPU reject the
// same inputs with the same messages.
#include "attention/backend.h"

namespace saobp {

namespace {

// q, k, v (B,NH,T,HS) of one dtype, contiguous; key_mask undefined or (B,T) u8 contiguous.
AttnDims check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& key_mask) {
  require_same_device(op, q, {&k, &v, &key_mask});
  if (q.dim() != 4) fail(op, "q must be (B,NH,T,HS), got {}", q.str());
  const AttnDims d = attn_dims(q);
  for (const Tensor* t : {&q, &k, &v}) {
    check_shape(*t, q.shape(), op, "q, k and v");
    check_dtype(*t, q.dtype(), op, "q, k and v");
    require_contiguous(op, *t, "q, k and v");
  }
  if (key_mask.defined()) {
    check_shape(key_mask, {d.B, d.T}, op, "key_mask");
    check_dtype(key_mask, DType::u8, op, "key_mask");
    require_contiguous(op, key_mask, "key_mask");
  }
  return d;
}

}  // namespace

AttnDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                         const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                         const Tensor& aux) {
  const char* op = "attention";
  require_same_device(op, q, {&lambda, &probs, &saved, &aux});
  const AttnDims d = check_qkv(op, q, k, v, key_mask);
  // The maps' dtype is the one the kernels compute in: q's, or f32 under bf16 q, k and v (the
  // GEMMs' operands in bf16, kernels.inc).
  const DType maps = q.dtype() == DType::bf16 ? DType::f32 : q.dtype();
  check_dtype(probs, maps, op, "probs");
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&saved, "saved"}, {&aux, "aux"}})
    if (t->defined()) check_dtype(*t, maps, op, name);
  check_shape(probs, {d.B, d.NH, d.T, d.T}, op, "probs");
  require_contiguous(op, probs, "probs");
  require_contiguous(op, saved, "saved");
  require_contiguous(op, aux, "aux");
  if (uses_lambda(p.variant)) {
    if (p.steps < 1) fail(op, "BP steps must be >= 1, got {}", p.steps);
    check_shape(lambda, {d.NH}, op, "lambda");
    check_shape(saved, {p.steps, d.B, d.NH, d.T, d.T}, op, "saved beliefs");
  }
  if (p.variant == AttnVariant::bp_elemmul) {
    check_shape(saved, {1, d.B, d.NH, d.T, d.T}, op, "saved attention");
    check_shape(aux, {d.B, d.NH, d.T}, op, "row sums");
  }
  return d;
}

AttnDims check_attention_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                               const Tensor& lambda, const AttnParams& p, const Tensor& lse,
                               const Tensor& colsum) {
  const char* op = "attention_tiled";
  if (p.variant == AttnVariant::bp_elemmul)
    fail(op, "bp_elemmul needs A Aᵀ, a T×T product: it has no tiled form (use the materialized kernel)");
  if (q.dtype() == DType::bf16)
    fail(op, "the tiled kernels compute their products inside, in f32 or f64: q is {}", q.str());
  require_same_device(op, q, {&lambda, &lse, &colsum});
  const AttnDims d = check_qkv(op, q, k, v, key_mask);
  const int64_t S = uses_lambda(p.variant) ? p.steps : 0;
  if (uses_lambda(p.variant)) {
    if (p.steps < 1) fail(op, "BP steps must be >= 1, got {}", p.steps);
    check_shape(lambda, {d.NH}, op, "lambda");
  }
  check_shape(lse, {S + 1, d.B, d.NH, d.T}, op, "lse");
  check_dtype(lse, q.dtype(), op, "lse");
  if (S > 0) {
    check_shape(colsum, {S, d.B, d.NH, d.T}, op, "colsum");
    check_dtype(colsum, q.dtype(), op, "colsum");
  }
  require_contiguous(op, {{lse, "lse"}, {colsum, "colsum"}});
  return d;
}

void check_sink_gate(const Tensor& probs, const Tensor& key_mask, const Tensor& keep) {
  const char* op = "sink_gate";
  require_same_device(op, keep, {&probs, &key_mask});
  if (probs.dim() != 4 || probs.size(2) != probs.size(3))
    fail(op, "probs must be (B,NH,T,T), got {}", probs.str());
  if (probs.dtype() != DType::f32 && probs.dtype() != DType::f64)
    fail(op, "probs must be f32 or f64, got {}", probs.str());
  check_shape(keep, {probs.size(0), probs.size(1)}, op, "keep");
  check_dtype(keep, probs.dtype(), op, "keep");
  if (key_mask.defined()) {
    check_shape(key_mask, {probs.size(0), probs.size(2)}, op, "key_mask");
    check_dtype(key_mask, DType::u8, op, "key_mask");
  }
  require_contiguous(op, probs, "probs");
  require_contiguous(op, key_mask, "key_mask");
  require_contiguous(op, keep, "keep");
}

}  // namespace saobp
