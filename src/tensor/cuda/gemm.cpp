// CUDA GEMM: c = alpha op(a) op(b) + beta c, batched, through cuBLAS.
// CPU twin: src/tensor/cpu/gemm.cpp.
//
// cuBLAS is column-major, and a row-major (M,N) matrix is the column-major (N,M) matrix of its
// transpose, so c^T = op(b)^T op(a)^T is one column-major GEMM with the operands swapped:
//   m = N, n = M, k = K; first operand b (ld N, or K if tb), second a (ld K, or M if ta), ldc N.
// A batch of 1 broadcasts through a batch stride of 0.
//
// Reproducibility: one handle per device, in CUBLAS_PEDANTIC_MATH (no TF32 or other reduced-
// precision paths, whatever NVIDIA_TF32_OVERRIDE says) with atomics disallowed, on the default
// stream. cuBLAS then gives bitwise identical results run to run on one GPU model and version.
#include <cublas_v2.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "tensor/checks.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {

void check_cublas(cublasStatus_t s, const char* op) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(op, "cuBLAS error: {}", cublasGetStatusString(s));
}

// The cuBLAS handle of the current device `device`, created on first use and kept for the life
// of the process (never destroyed: the CUDA runtime may be gone during static destruction).
cublasHandle_t handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasHandle_t>;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "gemm");
  const char* math = std::getenv("SAOBP_CUBLAS_MATH");  // "default": CUBLAS_DEFAULT_MATH (measured)
  check_cublas(cublasSetMathMode(
                   h, math && std::string(math) == "default" ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH),
               "gemm");
  check_cublas(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "gemm");
  handles->emplace(device, h);
  return h;
}

cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb, int m, int n,
                            int k, const float* alpha, const float* A, int lda, long long sa, const float* B,
                            int ldb, long long sb, const float* beta, float* C, int ldc, long long sc,
                            int batch) {
  return cublasSgemmStridedBatched(h, opa, opb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                   batch);
}

cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb, int m, int n,
                            int k, const double* alpha, const double* A, int lda, long long sa,
                            const double* B, int ldb, long long sb, const double* beta, double* C, int ldc,
                            long long sc, int batch) {
  return cublasDgemmStridedBatched(h, opa, opb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                   batch);
}

// c: (Bc,M,N)  a: (Ba,M,K) or (Ba,K,M) if ta  b: (Bb,K,N) or (Bb,N,K) if tb; Ba, Bb in {Bc, 1}.
template <class T>
void gemm_t(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  const int64_t M = g.M, N = g.N, K = g.K, Ba = g.Ba, Bb = g.Bb, Bc = g.Bc;
  if (c.numel() == 0) return;
  if (K == 0) {  // op(a) op(b) is zero; cuBLAS would reject the leading dimension 0
    if (beta == 0.0)
      fill(c, 0.0);
    else
      axpby(c, beta, c, 0.0);
    return;
  }
  if (std::max({M, N, K, Bc}) > INT_MAX)
    fail("gemm", "dimensions of a {} b {} c {} exceed cuBLAS's int range", a.str(), b.str(), c.str());
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  check_cublas(
      gemm_batched(handle(c.device().index), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                   static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &al, b.data<T>(),
                   static_cast<int>(tb ? K : N), Bb == 1 ? 0 : K * N, a.data<T>(),
                   static_cast<int>(ta ? M : K), Ba == 1 ? 0 : M * K, &be, c.data<T>(), static_cast<int>(N),
                   M * N, static_cast<int>(Bc)),
      "gemm");
}

}  // namespace

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  use_device_of(c, "gemm");
  dispatch_float(c.dtype(), "gemm", [&](auto tag) { gemm_t<decltype(tag)>(a, ta, b, tb, c, alpha, beta); });
}

// gemm, then reduce_sum_to over op(a)'s columns (the definition; the CPU gathers the sums
// while packing).
void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  use_device_of(c, "gemm_rowsum");
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, beta);
  Tensor s = ta ? sums.view({1, g.M}) : sums.view({g.M, 1});
  reduce_sum_to(ta ? a.view({g.K, g.M}) : a.view({g.M, g.K}), s, 1.0, accumulate);
}

// The bias copied into every row of c, then cuBLAS with beta = 1 (cublasSgemm has no bias
// epilogue; on the GPU the copy is a small part of the product).
void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  use_device_of(c, "gemm_bias");
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  Tensor c2 = c.view({g.M, g.N});
  copy(bias.view({1, g.N}).expand({g.M, g.N}), c2, false);
  gemm(a, ta, b, tb, c, 1.0, 1.0);
}

}  // namespace saobp::cuda
