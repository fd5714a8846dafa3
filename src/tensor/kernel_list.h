// The device-agnostic kernel API, written once. Each entry is
//   X(name, device_arg, (parameters), (arguments))
// and expands into the declarations of saobp::cpu::name and saobp::cuda::name (same signature,
// one per backend), the dispatcher saobp::kern::name (src/tensor/dispatch.cpp, a switch on
// device_arg's device) and, in a CPU-only build, the stubs of src/tensor/no_cuda/.
//
// Conventions shared by every backend:
// - Shapes use B, T, C, NH, HS, V, N (rows). "rows" means all leading dims flattened.
// - Outputs are written whole unless the entry says "accumulates": then out += result. The
//   backward kernels accumulate, so fan-out in the graph adds up; those with an `accumulate`
//   flag can also overwrite, for a gradient's first writer (no zero fill, GradSlots::slot).
// - Inputs are contiguous unless the entry says "strided". Masks are u8 (1 = allowed).
// - Floating kernels run in f32 or f64 (the dtype of their inputs); ids and targets are i32.
// - Results never depend on the thread count (fixed work partition, no atomics in reductions).
#pragma once

// clang-format off
#define SAOBP_KERNELS(X)                                                                      \
  /* out[...] = value. out: strided.                                                       */ \
  X(fill, out, (Tensor & out, double value), (out, value))                                   \
  /* dst (+)= src, elementwise; same shape, src may be a broadcast view. Both strided.     */ \
  X(copy, dst, (const Tensor& src, Tensor& dst, bool accumulate), (src, dst, accumulate))    \
  /* dst = src converted to dst's dtype. Same numel, both contiguous.                      */ \
  X(cast, dst, (const Tensor& src, Tensor& dst), (src, dst))                                 \
  /* out[i] = U[a,b) or N(a, b^2) from Philox(key.seed, key.stream, key.offset + i).       */ \
  X(fill_random, out, (Tensor & out, RandomKind kind, double a, double b, const RngKey& key), \
    (out, kind, a, b, key))                                                                   \
  /* c = alpha op(a) op(b) + beta c. a: (Ba,M,K) or (Ba,K,M) if ta, b: (Bb,K,N) or (Bb,N,K) */ \
  /* if tb, c: (Bc,M,N); Ba, Bb are Bc or 1 (leading dims flattened). All contiguous.      */ \
  X(gemm, c, (const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha,    \
              double beta), (a, ta, b, tb, c, alpha, beta))                                   \
  /* c = op(a) op(b) + bias: a linear layer. As gemm with one batch item (Bc = 1); bias:   */ \
  /* (N) contiguous, added to every row (the bits of filling c with it, then beta = 1).    */ \
  X(gemm_bias, c, (const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias,   \
                   Tensor& c), (a, ta, b, tb, bias, c))                                       \
  /* c = op(a) op(b) + beta c as gemm with one batch item, and sums (M) (+)= the row sums  */ \
  /* of op(a): a linear layer's weight and bias gradients from one pass over the output    */ \
  /* gradient. The sums are those of reduce_sum_to over op(a)'s columns, bit for bit.      */ \
  X(gemm_rowsum, c, (const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c,          \
                     double beta, Tensor& sums, bool accumulate),                            \
    (a, ta, b, tb, c, beta, sums, accumulate))                                               \
  /* out = a op b with broadcasting; a, b strided (broadcast views), out contiguous.       */ \
  X(binary, out, (BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out), (op, a, b, out))\
  /* dst (+)= alpha * sum of src over the dims where dst has size 1 (dst.dim() == src.dim()). */ \
  X(reduce_sum_to, dst, (const Tensor& src, Tensor& dst, double alpha, bool accumulate),     \
    (src, dst, alpha, accumulate))                                                            \
  /* y = alpha x + beta y (beta = 0 ignores y's old contents, NaN included).               */ \
  X(axpby, y, (const Tensor& x, double alpha, Tensor& y, double beta), (x, alpha, y, beta))  \
  /* y = GELU(x), exact erf form or the tanh approximation.                                */ \
  X(gelu_forward, y, (const Tensor& x, Tensor& y, bool tanh_approx), (x, y, tanh_approx))    \
  /* gx += gy * GELU'(x): accumulates, or with accumulate = false gx = gy * GELU'(x).      */ \
  X(gelu_backward, gx, (const Tensor& x, const Tensor& gy, Tensor& gx, bool tanh_approx,     \
                        bool accumulate), (x, gy, gx, tanh_approx, accumulate))               \
  /* x: (N,C) w,b: (C) -> y: (N,C) mean,rstd: (N).                                          */ \
  X(layernorm_forward, y, (const Tensor& x, const Tensor& w, const Tensor& b, double eps,    \
                           Tensor& y, Tensor& mean, Tensor& rstd),                           \
    (x, w, b, eps, y, mean, rstd))                                                            \
  /* accumulates gx (N,C), gw (C), gb (C); an undefined gx/gw/gb is skipped.               */ \
  X(layernorm_backward, gy, (const Tensor& x, const Tensor& w, const Tensor& mean,            \
                             const Tensor& rstd, const Tensor& gy, Tensor& gx, Tensor& gw,    \
                             Tensor& gb), (x, w, mean, rstd, gy, gx, gw, gb))                 \
  /* softmax (or log-softmax) over the last dim of x: (rows,C). mask: undefined or u8 view  */ \
  /* of x's shape (strided, broadcast allowed). Masked entries give 0; a row with no       */ \
  /* allowed entry gives all zeros.                                                         */ \
  X(softmax_forward, y, (const Tensor& x, const Tensor& mask, Tensor& y, bool log),          \
    (x, mask, y, log))                                                                        \
  /* gx += dL/dx from y = softmax_forward(x, mask). accumulates; 0 at masked entries.      */ \
  X(softmax_backward, gx, (const Tensor& y, const Tensor& gy, const Tensor& mask, Tensor& gx, \
                           bool log), (y, gy, mask, gx, log))                                 \
  /* weight: (V,C) ids: (N) i32 -> out: (N,C). Throws on an id outside [0,V).              */ \
  X(embedding_forward, out, (const Tensor& weight, const Tensor& ids, Tensor& out),          \
    (weight, ids, out))                                                                       \
  /* gweight[ids[n]] += gout[n]; deterministic (no atomics). accumulates.                  */ \
  X(embedding_backward, gweight, (const Tensor& ids, const Tensor& gout, Tensor& gweight),   \
    (ids, gout, gweight))                                                                     \
  /* mask[i] = U_i >= p (Philox, as fill_random), y = x * mask / (1 - p).                  */ \
  X(dropout_forward, y, (const Tensor& x, double p, const RngKey& key, Tensor& y,            \
                         Tensor& mask), (x, p, key, y, mask))                                 \
  /* gx += gy * mask / (1 - p): accumulates, or with accumulate = false overwrites gx.     */ \
  X(dropout_backward, gx, (const Tensor& gy, const Tensor& mask, double p, Tensor& gx,       \
                           bool accumulate), (gy, mask, p, gx, accumulate))                   \
  /* logits: (N,V) targets: (N) i32 -> losses: (N) (0 where ignored), lse: (N) logsumexp.  */ \
  /* Throws on a target outside [0,V) that is not ignore_index.                             */ \
  X(cross_entropy_forward, losses, (const Tensor& logits, const Tensor& targets,             \
                                    int64_t ignore_index, Tensor& losses, Tensor& lse),       \
    (logits, targets, ignore_index, losses, lse))                                             \
  /* glogits[n] += gloss[n] * (softmax(logits[n]) - onehot(targets[n])); ignored rows get 0. */ \
  /* accumulate = false overwrites glogits (ignored rows become 0).                        */ \
  X(cross_entropy_backward, glogits, (const Tensor& logits, const Tensor& targets,           \
                                      const Tensor& lse, const Tensor& gloss,                 \
                                      int64_t ignore_index, Tensor& glogits, bool accumulate), \
    (logits, targets, lse, gloss, ignore_index, glogits, accumulate))                         \
  /* One AdamW update of p (decoupled weight decay, PyTorch's form): m, v moments.        */ \
  /*   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;  p *= 1 - lr wd;                          */ \
  /*   p -= lr/bc1 · m / (sqrt(v / bc2) + eps)  with bc_i = 1 - b_i^step. All contiguous.    */ \
  X(adamw_step, p, (Tensor & p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h), \
    (p, g, m, v, h))                                                                          \
  /* y = f(x) elementwise, f in UnaryOp (exp, log, log1p, softplus). x, y contiguous.       */ \
  X(unary, y, (UnaryOp op, const Tensor& x, Tensor& y), (op, x, y))                          \
  /* gx += gy * f'(x) (y = f(x) given). accumulates.                                        */ \
  X(unary_backward, gx, (UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy,     \
                         Tensor& gx), (op, x, y, gy, gx))                                     \
  /* Self-attention of every (batch, head) tile, SAOBP refinement included (docs/saobp-     */ \
  /* gradients.md). q,k,v,out: (B,NH,T,HS); key_mask: (B,T) u8 (1 = token) or undefined;    */ \
  /* lambda: (NH) (BP variants); probs: (B,NH,T,T) the final attention; saved: BP           */ \
  /* (steps,B,NH,T,T) beliefs b^0 = A .. b^{steps-1}, ElemMul (1,B,NH,T,T) A, original      */ \
  /* undefined; aux: ElemMul (B,NH,T) row sums, else undefined.                              */ \
  X(attention_forward, out, (const Tensor& q, const Tensor& k, const Tensor& v,             \
                             const Tensor& key_mask, const Tensor& lambda,                   \
                             const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved, \
                             Tensor& aux),                                                   \
    (q, k, v, key_mask, lambda, p, out, probs, saved, aux))                                   \
  /* accumulates gq, gk, gv (B,NH,T,HS) and glambda (NH); an undefined gradient is skipped. */ \
  X(attention_backward, gout, (const Tensor& q, const Tensor& k, const Tensor& v,           \
                               const Tensor& key_mask, const Tensor& lambda,                 \
                               const AttnParams& p, const Tensor& probs, const Tensor& saved,\
                               const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk,\
                               Tensor& gv, Tensor& glambda),                                 \
    (q, k, v, key_mask, lambda, p, probs, saved, aux, gout, gq, gk, gv, glambda))           \
  /* Rotary position embedding (RoFormer): x, y (B,NH,T,HS) contiguous, HS even. Pair      */ \
  /* (x[2i], x[2i+1]) at position t is rotated by t θ_i, θ_i = base^(-2i/HS) (interleaved  */ \
  /* pairs, the paper's form, not NeoX's rotate_half); angles in double. inverse: rotate  */ \
  /* by -t θ_i, which is the backward (rotations are orthogonal). y may alias x.           */ \
  X(rope, y, (const Tensor& x, double base, bool inverse, Tensor& y), (x, base, inverse, y))  \
  /* Head skip (head-skip note). probs: (B,NH,T,T) contiguous, key_mask: (B,T) u8 or undefined ->  */ \
  /* keep: (B,NH) of probs' dtype: 0 when more than `fraction` of the token rows i of the     */ \
  /* (b,h) tile have max_j probs[i,j] > tau, else 1 (1 for a tile without token rows).       */ \
  X(sink_gate, keep, (const Tensor& probs, const Tensor& key_mask, double tau, double fraction, \
                      Tensor& keep), (probs, key_mask, tau, fraction, keep))
// clang-format on
