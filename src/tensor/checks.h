// Argument checks shared by both backends' kernels, so the CPU and the GPU reject the same
// inputs with the same messages.
#pragma once
#include "tensor/backend.h"

namespace saobp {

// c = op(a) op(b): c (Bc,M,N), a (Ba,M,K) or (Ba,K,M) if ta, b (Bb,K,N) or (Bb,N,K) if tb, with
// Ba, Bb in {Bc, 1} (the products of the leading dims); all contiguous.
struct GemmDims {
  int64_t M, N, K, Ba, Bb, Bc;
};
GemmDims check_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c);

// The fused attention kernels' arguments (kernel_list.h): q, k, v (B,NH,T,HS); probs
// (B,NH,T,T); key_mask (B,T) u8; lambda (NH) and saved beliefs for the Potts variants; saved A
// and row sums for ElemMul. Everything contiguous.
struct AttnDims {
  int64_t B, NH, T, HS;
};
AttnDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                         const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                         const Tensor& aux);
// gemm_bias: check_gemm with one batch item, and bias (N) contiguous of c's dtype.
GemmDims check_gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias,
                         const Tensor& c);
// gemm_rowsum: check_gemm with one batch item, and sums (M) contiguous of c's dtype.
GemmDims check_gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums);
bool is_potts(AttnVariant v);

// rope: x, y (B,NH,T,HS) of one dtype, HS even, both contiguous; base > 0.
void check_rope(const Tensor& x, double base, const Tensor& y);
// sink_gate: probs (B,NH,T,T) contiguous float, key_mask undefined or (B,T) u8 contiguous, keep
// (B,NH) contiguous of probs' dtype.
void check_sink_gate(const Tensor& probs, const Tensor& key_mask, const Tensor& keep);

}  // namespace saobp
