// The device twins of the attention kernels (src/attention/kernels.inc) and the argument checks
// that their dispatchers make for both (dispatch.cpp, checks.cpp). Kernel code only, as
// src/tensor/backend.h: src/attention/cpu/, cuda/, dispatch.cpp and checks.cpp include it.
#pragma once
#include "attention/kernels.h"
#include "tensor/checks.h"

namespace saobp {

namespace cpu {
#include "attention/kernels.inc"
// kern::set_tiled_schedule's CPU half (src/attention/cpu/tiled.cpp).
void set_tiled_schedule(TiledSchedule s);
}  // namespace cpu

namespace cuda {
#include "attention/kernels.inc"
}  // namespace cuda

// The fused attention kernels' arguments: q, k, v (B,NH,T,HS); probs (B,NH,T,T); key_mask (B,T)
// u8; lambda (NH) and saved beliefs for the Potts variants; saved A and row sums for ElemMul.
// Everything contiguous and on one device.
struct AttnDims {
  int64_t B, NH, T, HS;
};
// The dims of a checked call (the twins' view).
inline AttnDims attn_dims(const Tensor& q) { return {q.size(0), q.size(1), q.size(2), q.size(3)}; }
AttnDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                         const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                         const Tensor& aux);
// The tiled kernels: q, k, v, key_mask and lambda as check_attention's; variant original,
// bp_high or bp_low; lse (S+1,B,NH,T) and colsum (S,B,NH,T) (undefined when S = 0) contiguous of
// q's dtype, S = steps for the BP variants and 0 for original.
AttnDims check_attention_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                               const Tensor& lambda, const AttnParams& p, const Tensor& lse,
                               const Tensor& colsum);
// sink_gate: probs (B,NH,T,T) contiguous float, key_mask undefined or (B,T) u8 contiguous, keep
// (B,NH) contiguous of probs' dtype, all on one device.
void check_sink_gate(const Tensor& probs, const Tensor& key_mask, const Tensor& keep);

}  // namespace saobp
