// cuBLAS and cuBLASLt for the emulated backend (SAOBP_CUDA=EMU, README.md): the products
// src/tensor/cuda/gemm.cpp asks for, column-major as the libraries define them, each element of
// op(A) op(B) summed in double over k in increasing order and rounded once to C's type, then
// scaled (alpha, beta) in C's type. That is not cuBLAS's order, so the tests that compare a GPU
// product with the CPU's by a tolerance compare the emulated one the same way; only its own
// repeatability is bitwise. The epilogues as cuBLASLt documents them: BIAS adds bias[i] to row i
// of D, BGRADA writes Σ_k op(A)[i,k] per row of D, BGRADB Σ_k op(B)[k,j] per column.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstring>
#include <vector>

#include "tensor/bf16.h"

namespace saobp::cuda {

struct EmuBlasHandle {};
struct EmuLtHandle {};
struct EmuLtDesc {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
};
struct EmuLtLayout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct EmuLtPreference {};

namespace {

// Element (r, c) of a stored column-major matrix of `type` with leading dimension ld.
double element(const void* p, cudaDataType_t type, int64_t ld, int64_t r, int64_t c) {
  const int64_t at = c * ld + r;
  switch (type) {
    case CUDA_R_64F:
      return static_cast<const double*>(p)[at];
    case CUDA_R_16BF:
      return bf16_value(static_cast<const bf16*>(p)[at].bits);
    case CUDA_R_32F:
      break;
  }
  return static_cast<const float*>(p)[at];
}

// op(X) of a stored matrix as rows of k values each (n rows): op(A)'s rows (i, ·) for A, op(B)'s
// columns (·, j) for B, so every sum runs over one contiguous row of each.
std::vector<double> gather(const void* p, cudaDataType_t type, int64_t ld, bool transposed, int64_t n,
                           int64_t k, bool rows_of_op) {
  std::vector<double> out(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      // A (rows_of_op): op(A)[i,kk] is stored (i,kk), or (kk,i) when transposed. B: op(B)[kk,i]
      // is stored (kk,i), or (i,kk) when transposed.
      const bool at_i_kk = rows_of_op != transposed;
      out[static_cast<size_t>(i * k + kk)] =
          at_i_kk ? element(p, type, ld, i, kk) : element(p, type, ld, kk, i);
    }
  return out;
}

bool valid(int m, int n, int k, int lda, int ldb, int ldc, bool ta, bool tb) {
  return m >= 0 && n >= 0 && k >= 0 && lda >= (ta ? k : m) && lda >= 1 && ldb >= (tb ? n : k) && ldb >= 1 &&
         ldc >= m && ldc >= 1;
}

// C_i = alpha op(A_i) op(B_i) + beta C_i in C's type T (beta == 0 ignores C, NaN included).
template <class T>
void product(bool ta, bool tb, int m, int n, int k, T alpha, const void* A, cudaDataType_t type_a, int lda,
             long long sa, const void* B, cudaDataType_t type_b, int ldb, long long sb, T beta, T* C, int ldc,
             long long sc, int batch, std::vector<double>* a_sums = nullptr,
             std::vector<double>* b_sums = nullptr) {
  const size_t elem_a = type_a == CUDA_R_64F ? 8 : type_a == CUDA_R_16BF ? 2 : 4;
  const size_t elem_b = type_b == CUDA_R_64F ? 8 : type_b == CUDA_R_16BF ? 2 : 4;
  for (int bi = 0; bi < batch; ++bi) {
    const void* a = static_cast<const char*>(A) + static_cast<size_t>(sa * bi) * elem_a;
    const void* b = static_cast<const char*>(B) + static_cast<size_t>(sb * bi) * elem_b;
    T* c = C + sc * bi;
    const std::vector<double> ar = gather(a, type_a, lda, ta, m, k, true);
    const std::vector<double> bc = gather(b, type_b, ldb, tb, n, k, false);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        const double* x = &ar[static_cast<size_t>(i) * static_cast<size_t>(k)];
        const double* y = &bc[static_cast<size_t>(j) * static_cast<size_t>(k)];
        double s = 0;
        for (int kk = 0; kk < k; ++kk) s += x[kk] * y[kk];
        T& out = c[static_cast<int64_t>(j) * ldc + i];
        const T p = alpha * static_cast<T>(s);
        out = beta == T(0) ? p : p + beta * out;
      }
    if (a_sums) {
      a_sums->assign(static_cast<size_t>(m), 0.0);
      for (int i = 0; i < m; ++i)
        for (int kk = 0; kk < k; ++kk)
          (*a_sums)[static_cast<size_t>(i)] += ar[static_cast<size_t>(i * k + kk)];
    }
    if (b_sums) {
      b_sums->assign(static_cast<size_t>(n), 0.0);
      for (int j = 0; j < n; ++j)
        for (int kk = 0; kk < k; ++kk)
          (*b_sums)[static_cast<size_t>(j)] += bc[static_cast<size_t>(j * k + kk)];
    }
  }
}

template <class T>
cublasStatus_t strided(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k,
                       const T* alpha, const T* A, int lda, long long sa, const T* B, int ldb, long long sb,
                       const T* beta, T* C, int ldc, long long sc, int batch, cudaDataType_t type) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid(m, n, k, lda, ldb, ldc, opa == CUBLAS_OP_T, opb == CUBLAS_OP_T) || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  product<T>(opa == CUBLAS_OP_T, opb == CUBLAS_OP_T, m, n, k, *alpha, A, type, lda, sa, B, type, ldb, sb,
             *beta, C, ldc, sc, batch);
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
void set(T& field, const void* value, size_t bytes) {
  if (bytes == sizeof field) std::memcpy(&field, value, bytes);
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new EmuBlasHandle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t) {
  return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t) {
  return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long sa, const float* B, int ldb, long long sb,
                                         const float* beta, float* C, int ldc, long long sc, int batch) {
  return strided(h, opa, opb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, CUDA_R_32F);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                         int m, int n, int k, const double* alpha, const double* A, int lda,
                                         long long sa, const double* B, int ldb, long long sb,
                                         const double* beta, double* C, int ldc, long long sc, int batch) {
  return strided(h, opa, opb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, CUDA_R_64F);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb,
                                          int m, int n, int k, const void* alpha, const void* A,
                                          cudaDataType_t ta, int lda, long long sa, const void* B,
                                          cudaDataType_t tb, int ldb, long long sb, const void* beta, void* C,
                                          cudaDataType_t tc, int ldc, long long sc, int batch,
                                          cublasComputeType_t, cublasGemmAlgo_t) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (tc != CUDA_R_32F || ta == CUDA_R_64F || tb == CUDA_R_64F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!valid(m, n, k, lda, ldb, ldc, opa == CUBLAS_OP_T, opb == CUBLAS_OP_T) || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  product<float>(opa == CUBLAS_OP_T, opb == CUBLAS_OP_T, m, n, k, *static_cast<const float*>(alpha), A, ta,
                 lda, sa, B, tb, ldb, sb, *static_cast<const float*>(beta), static_cast<float*>(C), ldc, sc,
                 batch);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = new EmuLtHandle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t, cudaDataType_t scale) {
  if (scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = new EmuLtDesc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* value, size_t bytes) {
  if (!d) return CUBLAS_STATUS_NOT_INITIALIZED;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      set(d->ta, value, bytes);
      break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      set(d->tb, value, bytes);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      set(d->epilogue, value, bytes);
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      set(d->bias, value, bytes);
      break;
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new EmuLtLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new EmuLtPreference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t, const void*,
                                                    size_t) {
  return p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
  if (!h || !d || !a || !b || !c || !dl || !p) return CUBLAS_STATUS_NOT_INITIALIZED;
  *found = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb,
                              const void* beta, const void* C, cublasLtMatrixLayout_t lc, void* D,
                              cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t) {
  if (!h || !d || !la || !lb || !lc || !ld) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = d->ta == CUBLAS_OP_T, tb = d->tb == CUBLAS_OP_T;
  const auto m = static_cast<int>(ld->rows), n = static_cast<int>(ld->cols);
  const auto k = static_cast<int>(ta ? la->rows : la->cols);
  if (ld->type != CUDA_R_32F || lc->type != CUDA_R_32F || lc->rows != ld->rows || lc->cols != ld->cols ||
      static_cast<int>(ta ? la->cols : la->rows) != m || static_cast<int>(tb ? lb->rows : lb->cols) != n ||
      static_cast<int>(tb ? lb->cols : lb->rows) != k)
    return CUBLAS_STATUS_INVALID_VALUE;
  auto* out = static_cast<float*>(D);
  if (C != D && *static_cast<const float*>(beta) != 0.0f)
    for (int j = 0; j < n; ++j)
      std::memcpy(out + j * ld->ld, static_cast<const float*>(C) + j * lc->ld,
                  static_cast<size_t>(m) * sizeof(float));
  std::vector<double> a_sums, b_sums;
  const bool bgrad_a = d->epilogue == CUBLASLT_EPILOGUE_BGRADA,
             bgrad_b = d->epilogue == CUBLASLT_EPILOGUE_BGRADB;
  product<float>(ta, tb, m, n, k, *static_cast<const float*>(alpha), A, la->type, static_cast<int>(la->ld), 0,
                 B, lb->type, static_cast<int>(lb->ld), 0, *static_cast<const float*>(beta), out,
                 static_cast<int>(ld->ld), 0, 1, bgrad_a ? &a_sums : nullptr, bgrad_b ? &b_sums : nullptr);
  auto* bias = static_cast<float*>(d->bias);
  switch (d->epilogue) {
    case CUBLASLT_EPILOGUE_BIAS:
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) out[j * ld->ld + i] += bias[i];
      break;
    case CUBLASLT_EPILOGUE_BGRADA:
      for (int i = 0; i < m; ++i) bias[i] = static_cast<float>(a_sums[static_cast<size_t>(i)]);
      break;
    case CUBLASLT_EPILOGUE_BGRADB:
      for (int j = 0; j < n; ++j) bias[j] = static_cast<float>(b_sums[static_cast<size_t>(j)]);
      break;
    default:
      break;
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace saobp::cuda
