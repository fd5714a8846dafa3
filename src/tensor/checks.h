// Argument checks shared by both backends' kernels, so the CPU and the GPU reject the same
// inputs with the same messages.
#pragma once
#include "tensor/backend.h"

namespace saobp {

// Throws "[op] <what> must be contiguous" for a defined tensor that is not.
void require_contiguous(const char* op, const Tensor& t, const char* what);

// c = op(a) op(b): c (Bc,M,N), a (Ba,M,K) or (Ba,K,M) if ta, b (Bb,K,N) or (Bb,N,K) if tb, with
// Ba, Bb in {Bc, 1} (the products of the leading dims); all contiguous.
struct GemmDims {
  int64_t M, N, K, Ba, Bb, Bc;
};
GemmDims check_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c);

// gemm_bias: check_gemm with one batch item, and bias (N) contiguous of c's dtype.
GemmDims check_gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias,
                         const Tensor& c);
// gemm_rowsum: check_gemm with one batch item, and sums (M) contiguous of c's dtype.
GemmDims check_gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums);

// rope: x, y (B,NH,T,HS) of one dtype, HS even, both contiguous; base > 0.
void check_rope(const Tensor& x, double base, const Tensor& y);

}  // namespace saobp
