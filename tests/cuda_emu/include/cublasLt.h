// cuBLASLt as the emulated backend (SAOBP_CUDA=EMU) sees it: the matmul with the bias and
// bias-gradient epilogues that src/tensor/cuda/gemm.cpp uses, computed on the host (blas.cpp).
// Descriptors hold what their attributes set; the heuristic offers one algorithm for any shape.
#pragma once
#include <cstdint>

#include "cublas_v2.h"

namespace saobp::cuda {

using cublasLtHandle_t = struct EmuLtHandle*;
using cublasLtMatmulDesc_t = struct EmuLtDesc*;
using cublasLtMatrixLayout_t = struct EmuLtLayout*;
using cublasLtMatmulPreference_t = struct EmuLtPreference*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8] = {};
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize = 0;
  cublasStatus_t state = CUBLAS_STATUS_SUCCESS;
  float wavesCount = 0;
  int reserved[4] = {};
};

enum cublasLtMatmulDescAttributes_t : int {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum cublasLtEpilogue_t : int {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};
enum cublasLtMatmulPreferenceAttributes_t : int {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* value, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* value, size_t bytes);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found);
// D = alpha op(A) op(B) + beta C, then the epilogue: BIAS adds bias[i] to row i of D; BGRADA
// writes bias[i] = Σ_k op(A)[i,k], BGRADB bias[j] = Σ_k op(B)[k,j]. C and D may be one matrix.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb,
                              const void* beta, const void* C, cublasLtMatrixLayout_t lc, void* D,
                              cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

}  // namespace saobp::cuda
