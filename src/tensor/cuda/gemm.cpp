// CUDA GEMM: c = alpha op(a) op(b) + beta c, batched, through cuBLAS.
// CPU twin: src/tensor/cpu/gemm.cpp.
//
// cuBLAS is column-major, and a row-major (M,N) matrix is the column-major (N,M) matrix of its
// transpose, so c^T = op(b)^T op(a)^T is one column-major GEMM with the operands swapped:
//   m = N, n = M, k = K; first operand b (ld N, or K if tb), second a (ld K, or M if ta), ldc N.
// A batch of 1 broadcasts through a batch stride of 0. The leading dimensions are GemmDims' lda,
// ldb, ldc: a 2-D operand may be the first columns of a wider buffer (rows further apart), such
// as the LM head's logits, whose rows are padded to 16-byte multiples (cuBLAS's tensor-core
// kernels want each row to start so aligned).
//
// Reproducibility: one handle per device, in CUBLAS_PEDANTIC_MATH (no TF32 or other reduced-
// precision paths, whatever NVIDIA_TF32_OVERRIDE says) with atomics disallowed, on the default
// stream. cuBLAS then gives bitwise identical results run to run on one GPU model and version.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <climits>
#include <cstdint>
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
// f32 and f64 products run in CUBLAS_PEDANTIC_MATH; bf16 operands in a handle of its own in
// CUBLAS_DEFAULT_MATH, where their products run on the tensor cores (each product of two bf16
// values is exact in f32 and the sums are f32, so no precision is traded there).
cublasHandle_t handle(int device, bool bf16_in = false) {
  static std::mutex mutex;
  static auto* handles = new std::map<std::pair<int, bool>, cublasHandle_t>;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = handles->find({device, bf16_in}); it != handles->end()) return it->second;
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "gemm");
  const char* math = std::getenv("SAOBP_CUBLAS_MATH");  // "default": CUBLAS_DEFAULT_MATH (measured)
  const bool pedantic = !bf16_in && !(math && std::string(math) == "default");
  check_cublas(cublasSetMathMode(h, pedantic ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH), "gemm");
  check_cublas(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "gemm");
  handles->emplace(std::pair{device, bf16_in}, h);
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

// --profile: a cuBLAS or cuBLASLt call timed under its shape, "KIND DTYPE OPS MxNxK[xBATCH]"
// (OPS: n or t for op(a), op(b)), with its 2·M·N·K·batch FLOPs: `saobp bench --profile` lists
// the step's GEMMs by shape beside the ops.
DetailTimer shape_timer(const char* kind, const Tensor& a, bool ta, bool tb, const GemmDims& g) {
  return DetailTimer(
      [&] {
        std::string label = fmt::format("{} {} {}{} {}x{}x{}", kind, dtype_name(a.dtype()), ta ? 't' : 'n',
                                        tb ? 't' : 'n', g.M, g.N, g.K);
        if (g.Bc > 1) label += fmt::format("x{}", g.Bc);
        return label;
      },
      2.0 * static_cast<double>(g.M) * static_cast<double>(g.N) * static_cast<double>(g.K) *
          static_cast<double>(g.Bc));
}

// c: (Bc,M,N)  a: (Ba,M,K) or (Ba,K,M) if ta  b: (Bb,K,N) or (Bb,N,K) if tb; Ba, Bb in {Bc, 1}.
// What every cuBLAS product does before the call: true when nothing is left to do (c empty, or
// K = 0: op(a) op(b) is zero and c is scaled by beta; cuBLAS would reject the leading dimension
// 0); refuses sizes past cuBLAS's int range.
bool gemm_done_without_cublas(const Tensor& a, const Tensor& b, Tensor& c, const GemmDims& g, double beta) {
  if (c.numel() == 0) return true;
  if (g.K == 0) {
    if (beta == 0.0)
      fill(c, 0.0);
    else
      axpby(c, beta, c, 0.0);
    return true;
  }
  if (std::max({g.M, g.N, g.K, g.Bc}) > INT_MAX)
    fail("gemm", "dimensions of a {} b {} c {} exceed cuBLAS's int range", a.str(), b.str(), c.str());
  return false;
}

template <class T>
void gemm_t(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  const int64_t M = g.M, N = g.N, K = g.K, Ba = g.Ba, Bb = g.Bb, Bc = g.Bc;
  if (gemm_done_without_cublas(a, b, c, g, beta)) return;
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  const DetailTimer timer = shape_timer("gemm", a, ta, tb, g);
  check_cublas(gemm_batched(handle(c.device().index), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                            static_cast<int>(K), &al, b.data<T>(), static_cast<int>(g.ldb),
                            Bb == 1 ? 0 : K * N, a.data<T>(), static_cast<int>(g.lda), Ba == 1 ? 0 : M * K,
                            &be, c.data<T>(), static_cast<int>(g.ldc), M * N, static_cast<int>(Bc)),
               "gemm");
}

// bf16 a and b into f32 c: cublasGemmStridedBatchedEx with f32 compute (the same operand swap).
void gemm_bf16(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  const int64_t M = g.M, N = g.N, K = g.K;
  if (gemm_done_without_cublas(a, b, c, g, beta)) return;
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  const DetailTimer timer = shape_timer("gemm", a, ta, tb, g);
  check_cublas(
      cublasGemmStridedBatchedEx(
          handle(c.device().index, true), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
          static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &al, b.data<bf16>(), CUDA_R_16BF,
          static_cast<int>(g.ldb), g.Bb == 1 ? 0 : K * N, a.data<bf16>(), CUDA_R_16BF,
          static_cast<int>(g.lda), g.Ba == 1 ? 0 : M * K, &be, c.data<float>(), CUDA_R_32F,
          static_cast<int>(g.ldc), M * N, static_cast<int>(g.Bc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "gemm");
}

// An f32 copy of a bf16 operand (exact), for the definitions' reduce_sum_to; f32 and f64 operands
// as they are (an f64 product's sums stay f64).
Tensor widened(const Tensor& t) { return t.dtype() == DType::bf16 ? t.to(DType::f32) : t; }

}  // namespace

// ---- cuBLASLt epilogues ------------------------------------------------------------------------
// A linear layer's bias (forward) and bias gradient (backward) ride on the GEMM as cuBLASLt
// epilogues, where the product's tile is still in registers: no copy of the bias into every row
// of c before the product, no second pass over the output gradient for its column sums.
// In cuBLASLt's column-major terms (see the top of the file) the product is D (N,M) = A (N,K) ·
// B (K,M) with A the b side and B the a side, so
//   CUBLASLT_EPILOGUE_BIAS:   D += bias over D's rows (N): our bias per column of c;
//   CUBLASLT_EPILOGUE_BGRADB: bias (M) = Σ_k B: the row sums of op(a) (gemm_rowsum);
//   CUBLASLT_EPILOGUE_BGRADA: bias (N) = Σ_k A: the column sums of op(b) (gemm_colsum).
// Reproducibility as the plain GEMM's: one algorithm per shape, chosen once by the heuristic and
// kept, pedantic f32 compute, the default stream; the workspace is a fixed 32 MiB per device.
// Products the epilogue path does not take (f64, a bias or sums not 16-byte aligned, no
// algorithm offered, or SAOBP_CUBLASLT=0) run the definitions: gemm and a separate copy or
// reduce_sum_to.
namespace {

enum class Epilogue { bias, bgrad_a_side, bgrad_b_side };

void check_lt(cublasStatus_t s, const char* op) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(op, "cuBLASLt error: {}", cublasGetStatusString(s));
}

constexpr size_t kLtWorkspace = size_t{32} << 20;

// SAOBP_CUBLASLT=0: no cuBLASLt, the definitions instead (for measuring what the epilogues save).
// Plain products stay with cublasSgemm: cuBLASLt's heuristic gave the same step times for them
// (docs/performance.md).
bool lt_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SAOBP_CUBLASLT");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

// Alignment of a pointer, up to 16 bytes (what the heuristic must know of it).
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 16;
  while (a > 4 && v % a != 0) a /= 2;
  return a;
}

struct LtKey {
  int device, m, n, k;
  bool ta, tb, bf16_in;  // a and b bf16 (f32 compute, CUBLAS_COMPUTE_32F), else f32 pedantic
  Epilogue epi;
  uint32_t align_a, align_b, align_c;
  auto operator<=>(const LtKey&) const = default;
};

// The descriptors and algorithm of one shape (never destroyed, as the handles).
struct LtPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

std::mutex lt_mutex;

// Caller holds lt_mutex; device `index` is current.
LtDevice& lt_device(int index) {
  static auto* devices = new std::map<int, LtDevice>;
  LtDevice& d = (*devices)[index];
  if (!d.handle) {
    check_lt(cublasLtCreate(&d.handle), "gemm");
    check(cudaMalloc(&d.workspace, kLtWorkspace), "gemm");
  }
  return d;
}

// Caller holds lt_mutex.
const LtPlan& lt_plan(const LtKey& key, LtDevice& dev) {
  static auto* plans = new std::map<LtKey, LtPlan>;
  if (auto it = plans->find(key); it != plans->end()) return it->second;
  LtPlan p;
  const cublasOperation_t opa = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescCreate(&p.desc, key.bf16_in ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC,
                                    CUDA_R_32F),
           "gemm");
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "gemm");
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "gemm");
  const cublasLtEpilogue_t epi = key.epi == Epilogue::bias           ? CUBLASLT_EPILOGUE_BIAS
                                 : key.epi == Epilogue::bgrad_a_side ? CUBLASLT_EPILOGUE_BGRADB
                                                                     : CUBLASLT_EPILOGUE_BGRADA;
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "gemm");
  // Stored shapes (rows, cols, ld), column-major: A is op(b)ᵀ's storage, B op(a)ᵀ's.
  const uint64_t m = key.m, n = key.n, k = key.k;
  const cudaDataType_t in = key.bf16_in ? CUDA_R_16BF : CUDA_R_32F;
  check_lt(cublasLtMatrixLayoutCreate(&p.a, in, key.tb ? k : m, key.tb ? m : k, key.tb ? k : m), "gemm");
  check_lt(cublasLtMatrixLayoutCreate(&p.b, in, key.ta ? n : k, key.ta ? k : n, key.ta ? n : k), "gemm");
  check_lt(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, m), "gemm");
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "gemm");
  const uint64_t ws = kLtWorkspace;
  check_lt(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
      "gemm");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, v] : aligns)
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof v), "gemm");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(dev.handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p.ok) p.algo = result.algo;
  return plans->emplace(key, p).first->second;
}

// c = op(a) op(b) + beta c with the epilogue, vec its bias (read) or bias gradient (written).
// False when this product does not take the epilogue path (then nothing ran).
bool gemm_lt(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta,
             Epilogue epi, float* vec) {
  if (!lt_enabled() || c.dtype() != DType::f32 || alignment(vec) < 16) return false;
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  if (g.M == 0 || g.N == 0 || g.K == 0 || std::max({g.M, g.N, g.K}) > INT_MAX) return false;
  const int device = c.device().index;
  const LtKey key{device,
                  static_cast<int>(g.N),
                  static_cast<int>(g.M),
                  static_cast<int>(g.K),
                  ta,
                  tb,
                  a.dtype() == DType::bf16,
                  epi,
                  alignment(a.raw()),
                  alignment(b.raw()),
                  alignment(c.data<float>())};
  std::lock_guard<std::mutex> lock(lt_mutex);
  LtDevice& dev = lt_device(device);
  const LtPlan& p = lt_plan(key, dev);
  if (!p.ok) return false;
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof vec),
           "gemm");
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  const DetailTimer timer = shape_timer(epi == Epilogue::bias ? "lt+bias" : "lt+bgrad", a, ta, tb, g);
  check_lt(cublasLtMatmul(dev.handle, p.desc, &al, b.raw(), p.a, a.raw(), p.b, &be, c.data<float>(), p.c,
                          c.data<float>(), p.c, &p.algo, dev.workspace, kLtWorkspace, nullptr),
           "gemm");
  return true;
}

// The bias gradient through the epilogue, which writes it: into sums, or a scratch vector then
// added to sums when accumulating.
bool gemm_sums_lt(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                  bool accumulate, Epilogue epi) {
  if (c.dtype() != DType::f32) return false;
  Tensor out = accumulate ? Tensor::empty(sums.shape(), sums.dtype(), sums.device()) : sums;
  if (!gemm_lt(a, ta, b, tb, c, 1.0, beta, epi, out.data<float>())) return false;
  if (accumulate) copy(out, sums, true);
  return true;
}

}  // namespace

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  use_device_of(c, "gemm");
  if (a.dtype() == DType::bf16) return gemm_bf16(a, ta, b, tb, c, alpha, beta);
  dispatch_float(c.dtype(), "gemm", [&](auto tag) { gemm_t<decltype(tag)>(a, ta, b, tb, c, alpha, beta); });
}

// gemm, then reduce_sum_to over op(a)'s columns (the definition; the CPU gathers the sums while
// packing), or one cuBLASLt call with the bias-gradient epilogue.
void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  use_device_of(c, "gemm_rowsum");
  if (gemm_sums_lt(a, ta, b, tb, c, beta, sums, accumulate, Epilogue::bgrad_a_side)) return;
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, beta);
  Tensor s = ta ? sums.view({1, g.M}) : sums.view({g.M, 1});
  const Tensor aw = widened(a);
  reduce_sum_to(ta ? aw.view({g.K, g.M}) : aw.view({g.M, g.K}), s, 1.0, accumulate);
}

// gemm, then reduce_sum_to over op(b)'s rows, or one cuBLASLt call with the bias-gradient
// epilogue.
void gemm_colsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  use_device_of(c, "gemm_colsum");
  if (gemm_sums_lt(a, ta, b, tb, c, beta, sums, accumulate, Epilogue::bgrad_b_side)) return;
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, beta);
  Tensor s = tb ? sums.view({g.N, 1}) : sums.view({1, g.N});
  const Tensor bw = widened(b);
  reduce_sum_to(tb ? bw.view({g.N, g.K}) : bw.view({g.K, g.N}), s, 1.0, accumulate);
}

// One cuBLASLt call with the bias epilogue (which adds the bias to the finished product), or the
// definitions: for gemm_bias the bias copied into every row of c and cuBLAS with beta = 1, for
// gemm_then_bias cuBLAS and then the bias added to every row.
void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  use_device_of(c, "gemm_bias");
  if (c.dtype() == DType::f32 && gemm_lt(a, ta, b, tb, c, 1.0, 0.0, Epilogue::bias, bias.data<float>()))
    return;
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  Tensor c2 = c.view({g.M, g.N});
  copy(bias.view({1, g.N}).expand({g.M, g.N}), c2, false);
  gemm(a, ta, b, tb, c, 1.0, 1.0);
}

void gemm_then_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  use_device_of(c, "gemm_then_bias");
  if (c.dtype() == DType::f32 && gemm_lt(a, ta, b, tb, c, 1.0, 0.0, Epilogue::bias, bias.data<float>()))
    return;
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, 0.0);
  Tensor c2 = c.view({g.M, g.N});
  copy(bias.view({1, g.N}).expand({g.M, g.N}), c2, true);
}

}  // namespace saobp::cuda
