// cuBLAS as the emulated backend (SAOBP_CUDA=EMU) sees it: the calls src/tensor/cuda/gemm.cpp
// makes, with the library's column-major contract, computed on the host (blas.cpp). In
// saobp::cuda, like the shadow cuda_runtime.h.
#pragma once
#include "cuda_runtime.h"

namespace saobp::cuda {

enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t : int { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 };
enum cublasAtomicsMode_t : int { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 };
enum cublasComputeType_t : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69 };
enum cublasGemmAlgo_t : int { CUBLAS_GEMM_DEFAULT = -1 };
using cublasHandle_t = struct EmuBlasHandle*;

cublasStatus_t cublasCreate(cublasHandle_t* h);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t mode);
const char* cublasGetStatusString(cublasStatus_t s);

// C_i = alpha op(A_i) op(B_i) + beta C_i, i < batch, column-major; A_i = A + i·sa and so on.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long sa, const float* B, int ldb, long long sb,
                                         const float* beta, float* C, int ldc, long long sc, int batch);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                         int m, int n, int k, const double* alpha, const double* A, int lda,
                                         long long sa, const double* B, int ldb, long long sb,
                                         const double* beta, double* C, int ldc, long long sc, int batch);
// The types the backend passes: A and B bf16 or f32, C f32, f32 compute.
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                          int m, int n, int k, const void* alpha, const void* A,
                                          cudaDataType_t ta, int lda, long long sa, const void* B,
                                          cudaDataType_t tb, int ldb, long long sb, const void* beta, void* C,
                                          cudaDataType_t tc, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);

}  // namespace saobp::cuda
