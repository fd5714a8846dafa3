// CPU GEMM: c = alpha op(a) op(b) + beta c, batched.
// CUDA twin: src/tensor/cuda/gemm.cpp (cuBLAS, host code only).
//
// f32 (training) runs our packed GEMM (sgemm.cpp), whose results do not depend on the thread
// count by construction. f64 (gradient checks, references) runs Eigen's row-major maps; there
// the threading is ours, not Eigen's (EIGEN_DONT_PARALLELIZE): Eigen's parallel GEMM derives its
// depth blocking from the thread count, which changes the order of the k-sum and so the bits
// of the result. We cut the output into tiles whose size depends only on (M, N) and let each
// thread run single-threaded Eigen on whole tiles; every output element is then computed the
// same way whatever OMP_NUM_THREADS is.
#include <Eigen/Core>
#include <type_traits>
#include <utility>

#include "tensor/checks.h"
#include "tensor/cpu/common.h"
#include "tensor/cpu/sgemm.h"

namespace saobp::cpu {

namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Tile edge lengths: rows in blocks of 256 (at least 8 blocks when M allows, so both cores get
// work on tall products), columns whole unless there are too few row tiles to share.
struct Tiling {
  int64_t tm, tn;
};
Tiling choose_tiles(int64_t M, int64_t N, int64_t batch) {
  int64_t tm = M >= 2048 ? 256 : std::max<int64_t>(64, (M + 7) / 8);
  tm = std::min(tm, std::max<int64_t>(M, 1));
  int64_t tn = N;
  const int64_t row_tiles = (M + tm - 1) / tm;
  if (batch * row_tiles < 8 && N >= 512) tn = std::max<int64_t>(256, (N + 3) / 4 / 64 * 64);
  return {tm, std::max<int64_t>(tn, 1)};
}

template <class T>
void gemm_t(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  // c: (Bc, M, N); a: (Ba, M, K) [or (Ba, K, M) if ta]; b: (Bb, K, N) [or (Bb, N, K) if tb].
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  const int64_t M = g.M, N = g.N, K = g.K, Ba = g.Ba, Bb = g.Bb, Bc = g.Bc;
  const int64_t lda = g.lda, ldb = g.ldb, ldc = g.ldc;  // the sizes above unless rows are apart
  if (M == 0 || N == 0) return;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* cp = c.data<T>();
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  const Tiling tl = choose_tiles(M, N, Bc);
  const int64_t mt = (M + tl.tm - 1) / tl.tm, nt = (N + tl.tn - 1) / tl.tn;
  const int64_t tiles = Bc * mt * nt;
#pragma omp parallel for schedule(static) if (tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t bi = t / (mt * nt), i0 = (t / nt) % mt * tl.tm, j0 = t % nt * tl.tn;
    const int64_t m = std::min(tl.tm, M - i0), n = std::min(tl.tn, N - j0);
    const T* A = ap + (Ba == 1 ? 0 : bi * M * K);
    const T* Bm = bp + (Bb == 1 ? 0 : bi * K * N);
    MMap<T> C(cp + bi * M * N + i0 * ldc + j0, m, n, Eigen::OuterStride<>(ldc));
    if (K == 0) {
      if (beta == 0)
        C.setZero();
      else
        C *= be;
      continue;
    }
    // Row block of op(a) and column block of op(b), as maps with the right strides.
    auto run = [&](const auto& Ablk, const auto& Bblk) {
      if (beta == 0)
        C.noalias() = al * (Ablk * Bblk);
      else {
        if (beta != 1) C *= be;
        C.noalias() += al * (Ablk * Bblk);
      }
    };
    if (!ta && !tb)
      run(CMap<T>(A + i0 * lda, m, K, Eigen::OuterStride<>(lda)),
          CMap<T>(Bm + j0, K, n, Eigen::OuterStride<>(ldb)));
    else if (ta && !tb)
      run(CMap<T>(A + i0, K, m, Eigen::OuterStride<>(lda)).transpose(),
          CMap<T>(Bm + j0, K, n, Eigen::OuterStride<>(ldb)));
    else if (!ta && tb)
      run(CMap<T>(A + i0 * lda, m, K, Eigen::OuterStride<>(lda)),
          CMap<T>(Bm + j0 * ldb, n, K, Eigen::OuterStride<>(ldb)).transpose());
    else
      run(CMap<T>(A + i0, K, m, Eigen::OuterStride<>(lda)).transpose(),
          CMap<T>(Bm + j0 * ldb, n, K, Eigen::OuterStride<>(ldb)).transpose());
  }
}

// f32: each batch item is one sgemm. Many items go one per thread (each alone); otherwise the
// items run in turn, each split over the team. Either way the bits are the same (sgemm.cpp).
void gemm_f32(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  const int64_t M = g.M, N = g.N, K = g.K;
  if (M == 0 || N == 0) return;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* cp = c.data<float>();
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  auto item = [&](int64_t bi, bool team) {
    const float* A = ap + (g.Ba == 1 ? 0 : bi * M * K);
    const float* B = bp + (g.Bb == 1 ? 0 : bi * K * N);
    const SView av = ta ? SView{A, 1, g.lda} : SView{A, g.lda, 1};  // op(a) (i, k)
    const SView bv = tb ? SView{B, 1, g.ldb} : SView{B, g.ldb, 1};  // op(b) (k, j)
    sgemm(M, N, K, al, av, bv, be, cp + bi * M * N, g.ldc, team);
  };
  const int64_t nt = omp_get_max_threads();
  if (g.Bc > 1 && nt > 1 && (g.Bc % nt == 0 || g.Bc >= 4 * nt)) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t bi = 0; bi < g.Bc; ++bi) item(bi, false);
  } else {
    for (int64_t bi = 0; bi < g.Bc; ++bi) item(bi, true);
  }
}

}  // namespace

// bf16 operands (both, into f32 c: checks.cpp) are widened to f32, which is exact, and run the
// f32 product: each term a_ik b_kj of two bf16 values is exact in f32 too (8 + 8 significant
// bits), so this is the reference of the GPU's bf16 GEMMs, which multiply the same values and
// accumulate in f32 in their own order. A run config refuses bf16 on the CPU (it would be slower
// than f32 here, and no nearer to the GPU's bits than the f32 reference); tests use it.
namespace {
bool bf16_operands(const Tensor& a) { return a.dtype() == DType::bf16; }
Tensor widened(const Tensor& t) { return t.to(DType::f32); }
}  // namespace

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  if (bf16_operands(a)) return gemm(widened(a), ta, widened(b), tb, c, alpha, beta);
  dispatch_float(c.dtype(), "gemm", [&](auto tag) {
    if constexpr (std::is_same_v<decltype(tag), float>)
      gemm_f32(a, ta, b, tb, c, alpha, beta);
    else
      gemm_t<double>(a, ta, b, tb, c, alpha, beta);
  });
}

namespace {
// op(a) and op(b) of a one-item f32 product as sgemm's views.
std::pair<SView, SView> f32_views(const Tensor& a, bool ta, const Tensor& b, bool tb, const GemmDims& g) {
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  return {ta ? SView{A, 1, g.lda} : SView{A, g.lda, 1}, tb ? SView{B, 1, g.ldb} : SView{B, g.ldb, 1}};
}
}  // namespace

// f32: sgemm gathers the row sums from the a slivers it packs anyway (no second pass over a:
// the output gradient, 4096 × 1024 floats for BERT-Mini's FFN). f64: gemm, then reduce_sum_to
// over op(a)'s columns, which is the definition.
void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  if (bf16_operands(a)) return gemm_rowsum(widened(a), ta, widened(b), tb, c, beta, sums, accumulate);
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  if (c.dtype() == DType::f32) {
    const auto [av, bv] = f32_views(a, ta, b, tb, g);
    const RowSums rs{sums.data<float>(), accumulate};
    sgemm(g.M, g.N, g.K, 1.0f, av, bv, static_cast<float>(beta), c.data<float>(), g.N, true, nullptr, &rs);
    return;
  }
  gemm(a, ta, b, tb, c, 1.0, beta);
  Tensor s = ta ? sums.view({1, g.M}) : sums.view({g.M, 1});
  reduce_sum_to(ta ? a.view({g.K, g.M}) : a.view({g.M, g.K}), s, 1.0, accumulate);
}

// The definition: gemm, then the bias added to every row (copy with accumulate: c + bias, the
// addition of binary add).
void gemm_then_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  if (bf16_operands(a)) return gemm_then_bias(widened(a), ta, widened(b), tb, bias, c);
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, 0.0);
  Tensor c2 = c.view({g.M, g.N});
  copy(bias.view({1, g.N}).expand({g.M, g.N}), c2, true);
}

// The definition: gemm, then reduce_sum_to over op(b)'s rows.
void gemm_colsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  if (bf16_operands(a)) return gemm_colsum(widened(a), ta, widened(b), tb, c, beta, sums, accumulate);
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  gemm(a, ta, b, tb, c, 1.0, beta);
  Tensor s = tb ? sums.view({g.N, 1}) : sums.view({1, g.N});
  reduce_sum_to(tb ? b.view({g.N, g.K}) : b.view({g.K, g.N}), s, 1.0, accumulate);
}

// f32: the bias is sgemm's c0, read by the first depth block's update instead of a copy of it
// in every row of c (a write and a read of c saved: 75 MB each for BERT's MLM decoder). f64:
// the fill, then c += op(a) op(b); the same operations, so both dtypes match that definition.
void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  if (bf16_operands(a)) return gemm_bias(widened(a), ta, widened(b), tb, bias, c);
  const GemmDims g = gemm_dims(a, ta, b, tb, c);
  if (c.dtype() == DType::f32) {
    const auto [av, bv] = f32_views(a, ta, b, tb, g);
    sgemm(g.M, g.N, g.K, 1.0f, av, bv, 1.0f, c.data<float>(), g.N, true, bias.data<float>());
    return;
  }
  Tensor c2 = c.view({g.M, g.N});
  copy(bias.view({1, g.N}).expand({g.M, g.N}), c2, false);
  gemm(a, ta, b, tb, c, 1.0, 1.0);
}

}  // namespace saobp::cpu
