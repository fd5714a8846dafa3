// f32 GEMM: c = alpha · a · b + beta · c (sgemm.h), after BLIS (Van Zee & van de Geijn, "BLIS: A
// Framework for Rapidly Instantiating BLAS Functionality", 2015).
//
// Structure. The depth K is cut into blocks of KC = 256. For each block of up to MCB rows of
// `a`, each depth block and each panel of up to NC columns of `b`, the panel is packed into
// NR-column slivers (NR values per k), and the rows into MR-row slivers (k-major: MR values per
// k; or row-major when `a` is row-major in memory, which then needs no transpose and is mostly
// read in place). A micro-kernel multiplies one a sliver by one b sliver into an MR×NR tile of
// registers, one fused multiply-add per element per k, and adds the tile into c. The loops,
// outer to inner:
//   row block i0 (MCB) → depth block p0 (KC) → column panel j0 (NC; pack b)
//     → group of up to G row slivers (pack a) → row sliver (MR) → column sliver (NR)
//     → micro-kernel over the kc values of the block.
// The a sliver (MR·KC floats, 12 KB) stays in L1 while the b panel (KC·NC, 512 KB) streams from
// L2; depth inside rows keeps a row block of c in cache across its depth blocks.
//
// Determinism. Element (i, j) is computed as: for each depth block in order, acc = 0 then
// acc = fma(a(i,k), b(k,j), acc) for k through the block in order, then c = alpha·acc + beta'·c
// (beta' = beta for the first block, 1 after; two roundings, never fused). Block boundaries
// depend on K alone. Nothing else enters an element's value: not which thread computes it, not
// where the tiles or slivers fall (edge tiles run the same kernel into a buffer, then apply the
// same update in scalar code, which performs the same IEEE operations as the vector code under
// -ffp-contract=off), not the instruction set (each kernel does the same fma chain). So the
// team split below may depend on the thread count, and results still do not.
//
// Threads. In a team, the packing of each b panel is shared out, a barrier follows, then the
// groups of row slivers are handed out dynamically: the thread that takes a group packs its a
// slivers into its own small buffer and multiplies them by the whole panel, so packed a is
// written and read by one core (shared packing of a left half of every sliver in the other
// core's cache: weight-gradient products ran at 140-150 GFLOP/s that way, 165-170 now). A
// barrier ends the panel before its buffer is reused. Batched products with many items go
// item-per-thread instead (gemm.cpp), each thread with its own buffers.
#include "tensor/cpu/sgemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace saobp::cpu {

namespace {

constexpr int64_t KC = 256;  // depth block: fixed, it decides the order of every sum
// Rows taken through all depth blocks before the next rows (a multiple of every kernel's MR);
// all of them when K is one depth block, so that each b panel is packed once.
constexpr int64_t MCB = 1536;
constexpr int64_t NC = 512;  // columns packed at once (a multiple of every kernel's NR)
constexpr int64_t G = 4;     // a slivers packed and multiplied together by one thread

// ------------------------------------------------------------------------ tile update
// c[r, j] = alpha · acc[r, j] + beta · ci[r, j] for the m×n corner of an acc tile (rows `ld`
// apart). ci is c itself (ldci = ldc), or a row vector (ldci = 0: sgemm's c0, a bias). The
// vector kernels' full tiles perform these same operations lane by lane.
void update_tile(const float* acc, int64_t ld, int64_t m, int64_t n, float* c, int64_t ldc, const float* ci,
                 int64_t ldci, float alpha, float beta) {
  for (int64_t r = 0; r < m; ++r) {
    const float* s = acc + r * ld;
    const float* in = ci + r * ldci;
    float* d = c + r * ldc;
    if (beta == 0.0f)
      for (int64_t j = 0; j < n; ++j) d[j] = alpha * s[j];
    else if (beta == 1.0f)
      for (int64_t j = 0; j < n; ++j) d[j] = in[j] + alpha * s[j];
    else
      for (int64_t j = 0; j < n; ++j) d[j] = beta * in[j] + alpha * s[j];
  }
}

// A micro-kernel: the MR×NR tile of (a sliver)·(b sliver) over kc, into c's m×n corner:
// c = alpha · tile + beta · ci (update_tile).
// The b sliver is k-major (NR values per k). The a sliver is k-major (MR values per k) or, when
// RowA, row-major with rows `ars` apart (a copy, ars = kc, or row-major a itself, read in
// place); the layout changes where a value is read, not the arithmetic.
using KernelFn = void (*)(int64_t kc, const float* ap, int64_t ars, const float* bp, float* c, int64_t ldc,
                          const float* ci, int64_t ldci, float alpha, float beta, int64_t m, int64_t n);
struct Kernel {
  int64_t mr, nr;
  KernelFn kmajor, rowa;  // a sliver k-major / row-major
  const char* name;
};
// a(r, k) of a packed sliver: `rs` apart by row, `ks` by k.
template <bool RowA, int64_t MR>
struct ASliver {
  int64_t rs, ks;
  explicit ASliver(int64_t ars) : rs(RowA ? ars : 1), ks(RowA ? 1 : MR) {}
};

// ------------------------------------------------------------------------ portable kernel
// ap: (kc, MR) k-major  bp: (kc, NR) k-major. std::fma is one rounding, as the vector FMAs.
constexpr int64_t MR_P = 4, NR_P = 16;
template <bool RowA>
void kernel_portable(int64_t kc, const float* __restrict ap, int64_t ars, const float* __restrict bp,
                     float* c, int64_t ldc, const float* ci, int64_t ldci, float alpha, float beta, int64_t m,
                     int64_t n) {
  const ASliver<RowA, MR_P> as(ars);
  float acc[MR_P * NR_P] = {};
  for (int64_t k = 0; k < kc; ++k, ap += as.ks, bp += NR_P)
    for (int64_t r = 0; r < MR_P; ++r)
      for (int64_t j = 0; j < NR_P; ++j)
        acc[r * NR_P + j] = std::fma(ap[r * as.rs], bp[j], acc[r * NR_P + j]);
  update_tile(acc, NR_P, m, n, c, ldc, ci, ldci, alpha, beta);
}

// ------------------------------------------------------------------------ AVX-512 kernel
// 12×32: 24 zmm accumulators, two zmm of b and one broadcast of a per k (BLIS's skx shape,
// transposed for row-major c). 24 FMAs per 14 loads keeps both FMA ports busy.
#if defined(__AVX512F__)
constexpr int64_t MR_512 = 12, NR_512 = 32;
template <bool RowA>
void kernel_avx512(int64_t kc, const float* __restrict ap, int64_t ars, const float* __restrict bp, float* c,
                   int64_t ldc, const float* ci, int64_t ldci, float alpha, float beta, int64_t m,
                   int64_t n) {
  const ASliver<RowA, MR_512> as(ars);
  __m512 acc[MR_512][2];
  for (int r = 0; r < MR_512; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // Row r of the a sliver through four bases (rows 0, 3, 6, 9) and offsets 0, rs, 2·rs: each of
  // the 12 broadcasts is one scaled-index address (with one pointer per row GCC spilled some).
  const float *a0 = ap, *a3 = ap + 3 * as.rs, *a6 = ap + 6 * as.rs, *a9 = ap + 9 * as.rs;
  const int64_t r1 = as.rs, r2 = 2 * as.rs;
  for (int64_t k = 0; k < kc; ++k, a0 += as.ks, a3 += as.ks, a6 += as.ks, a9 += as.ks, bp += NR_512) {
    const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
    const float* base[4] = {a0, a3, a6, a9};
#pragma GCC unroll 12
    for (int r = 0; r < MR_512; ++r) {
      const float* p = base[r / 3];
      const __m512 x = _mm512_set1_ps(r % 3 == 0 ? p[0] : r % 3 == 1 ? p[r1] : p[r2]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  if (m == MR_512 && n == NR_512) {
    const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
    for (int r = 0; r < MR_512; ++r)
      for (int h = 0; h < 2; ++h) {
        float* d = c + r * ldc + h * 16;
        const float* in = ci + r * ldci + h * 16;
        const __m512 t = _mm512_mul_ps(al, acc[r][h]);
        if (beta == 0.0f)
          _mm512_storeu_ps(d, t);
        else if (beta == 1.0f)
          _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(in), t));
        else
          _mm512_storeu_ps(d, _mm512_add_ps(_mm512_mul_ps(be, _mm512_loadu_ps(in)), t));
      }
    return;
  }
  alignas(64) float buf[MR_512 * NR_512];
  for (int r = 0; r < MR_512; ++r) {
    _mm512_store_ps(buf + r * NR_512, acc[r][0]);
    _mm512_store_ps(buf + r * NR_512 + 16, acc[r][1]);
  }
  update_tile(buf, NR_512, m, n, c, ldc, ci, ldci, alpha, beta);
}
constexpr Kernel kNative{MR_512, NR_512, kernel_avx512<false>, kernel_avx512<true>, "avx512 12x32"};

// ------------------------------------------------------------------------ AVX2 kernel
// 6×16: 12 ymm accumulators, two ymm of b, one broadcast (the 16 ymm registers allow no more).
// The accumulators are named variables, not an array: with `__m256 acc[6][2]` GCC kept the array
// in memory and stored all 12 to the stack on every k (98 GFLOP/s on Zen 5 against 188 now).
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int64_t MR_256 = 6, NR_256 = 16;
template <bool RowA>
void kernel_avx2(int64_t kc, const float* __restrict ap, int64_t ars, const float* __restrict bp, float* c,
                 int64_t ldc, const float* ci, int64_t ldci, float alpha, float beta, int64_t m, int64_t n) {
  const ASliver<RowA, MR_256> as(ars);
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int64_t r1 = as.rs, r2 = 2 * as.rs, r3 = 3 * as.rs, r4 = 4 * as.rs, r5 = 5 * as.rs;
  for (int64_t k = 0; k < kc; ++k, ap += as.ks, bp += NR_256) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    __m256 x = _mm256_broadcast_ss(ap);
    c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(ap + r1);
    c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(ap + r2);
    c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(ap + r3);
    c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(ap + r4);
    c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(ap + r5);
    c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 acc[MR_256][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (m == MR_256 && n == NR_256) {
    const __m256 al = _mm256_set1_ps(alpha), be = _mm256_set1_ps(beta);
    for (int r = 0; r < MR_256; ++r)
      for (int h = 0; h < 2; ++h) {
        float* d = c + r * ldc + h * 8;
        const float* in = ci + r * ldci + h * 8;
        const __m256 t = _mm256_mul_ps(al, acc[r][h]);
        if (beta == 0.0f)
          _mm256_storeu_ps(d, t);
        else if (beta == 1.0f)
          _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(in), t));
        else
          _mm256_storeu_ps(d, _mm256_add_ps(_mm256_mul_ps(be, _mm256_loadu_ps(in)), t));
      }
    return;
  }
  alignas(32) float buf[MR_256 * NR_256];
  for (int r = 0; r < MR_256; ++r) {
    _mm256_store_ps(buf + r * NR_256, acc[r][0]);
    _mm256_store_ps(buf + r * NR_256 + 8, acc[r][1]);
  }
  update_tile(buf, NR_256, m, n, c, ldc, ci, ldci, alpha, beta);
}
constexpr Kernel kNative{MR_256, NR_256, kernel_avx2<false>, kernel_avx2<true>, "avx2 6x16"};
#else
constexpr Kernel kNative{MR_P, NR_P, kernel_portable<false>, kernel_portable<true>, "portable 4x16"};
#endif
constexpr Kernel kPortable{MR_P, NR_P, kernel_portable<false>, kernel_portable<true>, "portable 4x16"};
static_assert(MCB % kNative.mr == 0 && MCB % MR_P == 0 && NC % kNative.nr == 0 && NC % NR_P == 0);
static_assert(kNative.mr <= 16 && MR_P <= 16);  // RowSumAcc::add_rows<16> holds a sliver

std::atomic<const Kernel*> g_kernel{&kNative};

// ------------------------------------------------------------------------ packing
// dst[k·w + r] = src[r·ld + k] for r < rows, 0 for rows <= r < w, k < kc: `rows` rows of a
// matrix stored along k, written k-major. This is the packing of b transposed in memory (x·Wᵀ;
// row-major a keeps its row layout instead, see Panel). With AVX-512, 16 rows × 16 k at a time go through an
// in-register 16×16 transpose; the plain loop below is the reference for it and handles the
// last kc % 16 values.
void pack_transposed_scalar(const float* src, int64_t ld, int64_t rows, int64_t k0, int64_t kc, int64_t w,
                            float* dst) {
  for (int64_t r = 0; r < w; ++r)
    for (int64_t k = k0; k < kc; ++k) dst[k * w + r] = r < rows ? src[r * ld + k] : 0.0f;
}

#if defined(__AVX512F__)
// v[i] = row i (16 floats) → v[j] = column j.
inline void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d a0 = _mm512_castps_pd(t[i]), a1 = _mm512_castps_pd(t[i + 1]);
    const __m512d a2 = _mm512_castps_pd(t[i + 2]), a3 = _mm512_castps_pd(t[i + 3]);
    v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    v[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    v[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  // Now v[4q + j] holds, in each 128-bit lane l, column (4l + j) of rows 4q..4q+3.
  for (int g = 0; g < 16; g += 8)
    for (int j = 0; j < 4; ++j) {
      t[g + j] = _mm512_shuffle_f32x4(v[g + j], v[g + 4 + j], 0x88);
      t[g + 4 + j] = _mm512_shuffle_f32x4(v[g + j], v[g + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    v[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    v[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

void pack_transposed(const float* src, int64_t ld, int64_t rows, int64_t kc, int64_t w, float* dst) {
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16)
    for (int64_t g = 0; g < w; g += 16) {
      __m512 v[16];
      for (int64_t i = 0; i < 16; ++i)
        v[i] = g + i < rows ? _mm512_loadu_ps(src + (g + i) * ld + k) : _mm512_setzero_ps();
      transpose16(v);
      const __mmask16 lanes = static_cast<__mmask16>((1u << std::min<int64_t>(16, w - g)) - 1u);
      for (int64_t j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + (k + j) * w + g, lanes, v[j]);
    }
  pack_transposed_scalar(src, ld, rows, k, kc, w, dst);
}
#else
void pack_transposed(const float* src, int64_t ld, int64_t rows, int64_t kc, int64_t w, float* dst) {
  pack_transposed_scalar(src, ld, rows, 0, kc, w, dst);
}
#endif

// d[0, n) = s[0, n), d[n, w) = 0. Short rows (12 or 32 floats) are the common case: with
// AVX-512 one masked load and store per 16 lanes instead of a memcpy call.
inline void copy_pad(float* d, const float* s, int64_t n, int64_t w) {
#if defined(__AVX512F__)
  for (int64_t j = 0; j < w; j += 16) {
    const int64_t valid = std::clamp<int64_t>(n - j, 0, 16), lanes = std::min<int64_t>(16, w - j);
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << valid) - 1u), s + j);
    _mm512_mask_storeu_ps(d + j, static_cast<__mmask16>((1u << lanes) - 1u), v);
  }
#else
  std::copy(s, s + n, d);
  std::fill(d + n, d + w, 0.0f);
#endif
}

// Any other strides (not used by the kernel API, kept for completeness).
void pack_strided(const float* src, int64_t rs, int64_t ks, int64_t rows, int64_t kc, int64_t w, float* dst) {
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t r = 0; r < w; ++r) dst[k * w + r] = r < rows ? src[r * rs + k * ks] : 0.0f;
}

// Whether a's slivers are packed row-major (a row-major in memory: rows are copied whole).
bool a_row_layout(const SView& a) { return a.cs == 1 && a.rs != 1; }

// A block of op(a) (lanes = rows) or a panel of op(b) (lanes = columns) to pack: `cnt` lanes ×
// kc depth from p (lane stride ls, depth stride ds), into slivers of w lanes at dst + s·w·kc,
// each (kc, w) k-major, or (w, kc) when row_layout; lanes cnt..w-1 of the last sliver are zero.
// The work is cut into pieces that read memory in order: when lanes are contiguous (a
// transposed in memory, b not), pieces of 16 depth values across all slivers (whole rows of
// memory); otherwise single slivers (each lane is read along its depth).
struct Panel {
  const float* p;
  int64_t ls, ds, cnt, kc, w;
  bool row_layout;
  float* dst;

  int64_t slivers() const { return (cnt + w - 1) / w; }
  bool by_depth() const { return ls == 1 && !row_layout; }
  int64_t pieces() const { return by_depth() ? (kc + 15) / 16 : slivers(); }

  void pack(int64_t u) const {
    if (by_depth()) {
      for (int64_t k = u * 16; k < std::min(kc, u * 16 + 16); ++k)
        for (int64_t s = 0; s < slivers(); ++s)
          copy_pad(dst + s * w * kc + k * w, p + k * ds + s * w, std::min(w, cnt - s * w), w);
      return;
    }
    pack_sliver(u, dst + u * w * kc);
  }

  // Slivers s0..s1-1 into d (one after another), by one thread: along the depth when the lanes
  // are contiguous (s1 - s0 slivers' lanes are one run of memory per depth value, which may be
  // a page or more from the next: the rows PF ahead are prefetched, as the hardware's streamer
  // stops at page boundaries), else sliver by sliver.
  void pack_slivers(int64_t s0, int64_t s1, float* d) const {
    if (!by_depth()) {
      for (int64_t s = s0; s < s1; ++s) pack_sliver(s, d + (s - s0) * w * kc);
      return;
    }
    constexpr int64_t PF = 8;
    const int64_t lanes = std::min(cnt, s1 * w) - s0 * w;
    for (int64_t k = 0; k < kc; ++k) {
      if (k + PF < kc)
        for (int64_t l = 0; l < lanes; l += 16) __builtin_prefetch(p + (k + PF) * ds + s0 * w + l);
      for (int64_t s = s0; s < s1; ++s)
        copy_pad(d + (s - s0) * w * kc + k * w, p + k * ds + s * w, std::min(w, cnt - s * w), w);
    }
  }

  // Sliver u (not by_depth) into d.
  void pack_sliver(int64_t u, float* d) const {
    const int64_t n = std::min(w, cnt - u * w);
    const float* src = p + u * w * ls;
    if (row_layout) {
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(d + r * kc, src + r * ls, static_cast<size_t>(kc) * sizeof(float));
      std::fill(d + n * kc, d + w * kc, 0.0f);
    } else if (ds == 1) {
      pack_transposed(src, ls, n, kc, w, d);
    } else {
      pack_strided(src, ls, ds, n, kc, w, d);
    }
  }
};

// ------------------------------------------------------------------------ buffers
struct AlignedBuffer {
  float* p = nullptr;
  size_t n = 0;
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(p); }
  float* ensure(size_t want) {
    if (want > n) {
      std::free(p);
      const size_t bytes = (want * sizeof(float) + 63) / 64 * 64;
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!p) throw std::bad_alloc();
      n = want;
    }
    return p;
  }
};

// Row sums of op(a), gathered from the a slivers as they are multiplied (sgemm.h: RowSums):
// per row, a double sum over each chunk of 512 depth values in order, the chunks added in order
// into total. A row's slivers of one depth block are summed by the thread that packed them, and
// the depth blocks follow each other, so the order never depends on the threads.
struct RowSumAcc {
  static constexpr int64_t kChunk = 512;  // reduce_sum_to's row block; a multiple of KC
  double* chunk;
  double* total;

  // rows (<= every kernel's MR) × kc values of a sliver (a(r, k) at ap[r·rs + k·ks]) of the
  // rows from i; `close`: the depth block ends a chunk. The rows are independent add chains,
  // interleaved (k outer) so they overlap; a full k-major sliver (the weight-gradient case: a
  // is the transposed output gradient) gets its row count at compile time, so that the rows
  // become vector lanes.
  void add(const float* ap, int64_t rs, int64_t ks, int64_t rows, int64_t kc, int64_t i, bool close) const {
    if (rs == 1 && rows == 12) return add_rows<12>(ap, 1, ks, 12, kc, i, close);
    if (rs == 1 && rows == 6) return add_rows<6>(ap, 1, ks, 6, kc, i, close);
    if (rs == 1 && rows == 4) return add_rows<4>(ap, 1, ks, 4, kc, i, close);
    add_rows<16>(ap, rs, ks, rows, kc, i, close);
  }
  template <int64_t R>
  void add_rows(const float* ap, int64_t rs, int64_t ks, int64_t rows, int64_t kc, int64_t i,
                bool close) const {
    double s[R];
    for (int64_t r = 0; r < rows; ++r) s[r] = chunk[i + r];
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t r = 0; r < rows; ++r) s[r] += ap[r * rs + k * ks];
    for (int64_t r = 0; r < rows; ++r) {
      chunk[i + r] = close ? 0.0 : s[r];
      if (close) total[i + r] += s[r];
    }
  }
};
static_assert(RowSumAcc::kChunk % KC == 0);

struct Product {
  int64_t M, N, K;
  float alpha, beta;
  SView a, b;
  float* c;
  int64_t ldc;
  const float* c0;        // the first depth block's beta term: row vector c0 (bias) instead of c, or null
  const RowSumAcc* sums;  // row sums of op(a) to gather, or null
  const Kernel* kn;
  float* bbuf;  // (NC / nr slivers) × (KC · nr): the caller's, shared with its team

  // The whole product. team: called by every thread of the enclosing parallel region. The b
  // panel is packed by all (static shares, then the implicit barrier); then the row slivers are
  // handed out dynamically in groups of G: a thread packs its group's a slivers into its own
  // buffer (G · mr · KC floats: L2-resident, written and read by one core) and multiplies them
  // by every b sliver of the panel. Which thread computes a tile does not change its bits; a
  // thread slowed by the machine takes fewer groups. The closing barrier keeps bbuf from being
  // repacked while in use. Not team: the calling thread alone, no OpenMP constructs.
  void run(bool team) const {
    const int64_t mr = kn->mr, nr = kn->nr;
    const bool rowa = a_row_layout(a);
    const KernelFn fn = rowa ? kn->rowa : kn->kmajor;
    // Row-major a is read in place, without the copy, unless its rows are a multiple of 4 KB
    // apart: then the 12 rows of a sliver fall in the same L1 sets and evict each other. Only a
    // partial last sliver is still copied (and zero-padded).
    const bool in_place = rowa && a.rs % 1024 != 0;
    static thread_local AlignedBuffer own;
    float* abuf = own.ensure(static_cast<size_t>(G * mr * KC));
    const int64_t threads = team ? omp_get_num_threads() : 1;
    const int64_t mcb = K <= KC ? M : MCB;
    for (int64_t i0 = 0; i0 < M; i0 += mcb) {
      const int64_t mc = std::min(mcb, M - i0), ms = (mc + mr - 1) / mr;
      const int64_t direct = in_place ? mc / mr : 0;  // slivers read in place: 0..direct-1
      // Groups of up to G slivers where there is packing to share, while leaving at least 4
      // groups per thread for the dynamic schedule to balance.
      const int64_t gs = direct >= ms ? 1 : std::clamp<int64_t>(ms / (4 * threads), 1, G);
      const int64_t groups = (ms + gs - 1) / gs;
      for (int64_t p0 = 0; p0 < K; p0 += KC) {  // depth inside rows: the c rows stay in cache
        const int64_t kc = std::min(KC, K - p0);
        const float be = p0 == 0 ? beta : 1.0f;
        const bool from_c0 = p0 == 0 && c0 != nullptr;
        const Panel pa{a.p + i0 * a.rs + p0 * a.cs, a.rs, a.cs, mc, kc, mr, rowa, nullptr};
        for (int64_t j0 = 0; j0 < N; j0 += NC) {
          const int64_t ncol = std::min(NC, N - j0), ns = (ncol + nr - 1) / nr;
          const Panel pb{b.p + p0 * b.rs + j0 * b.cs, b.cs, b.rs, ncol, kc, nr, false, bbuf};
          auto group = [&](int64_t g) {  // row slivers s0..s1-1, each across the panel
            const int64_t s0 = g * gs, s1 = std::min(ms, s0 + gs);
            if (s1 > direct)
              pa.pack_slivers(std::max(s0, direct), s1, abuf + (std::max(s0, direct) - s0) * mr * kc);
            for (int64_t ir = s0; ir < s1; ++ir) {
              const int64_t i = ir * mr;
              const bool dir = ir < direct;
              const float* ap = dir ? a.p + (i0 + i) * a.rs + p0 : abuf + (ir - s0) * mr * kc;
              if (sums && j0 == 0)
                sums->add(ap, rowa ? (dir ? a.rs : kc) : 1, rowa ? 1 : mr, std::min(mr, mc - i), kc, i0 + i,
                          (p0 + kc) % RowSumAcc::kChunk == 0 || p0 + kc == K);
              for (int64_t jr = 0; jr < ns; ++jr) {
                float* ct = c + (i0 + i) * ldc + j0 + jr * nr;
                fn(kc, ap, dir ? a.rs : kc, bbuf + jr * nr * kc, ct, ldc, from_c0 ? c0 + j0 + jr * nr : ct,
                   from_c0 ? 0 : ldc, alpha, be, std::min(mr, mc - i), std::min(nr, ncol - jr * nr));
              }
            }
          };
          if (team) {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < pb.pieces(); ++u) pb.pack(u);
#pragma omp for schedule(dynamic, 1)
            for (int64_t g = 0; g < groups; ++g) group(g);
          } else {
            for (int64_t u = 0; u < pb.pieces(); ++u) pb.pack(u);
            for (int64_t g = 0; g < groups; ++g) group(g);
          }
        }
      }
    }
  }
};

// ------------------------------------------------------------------------ one row
// c = alpha · a · b + beta · c for M = 1 (a decoder generating one token): no packing, which for a
// single row costs more than the product (packing the LM head's 50257×256 weights for each token
// was 37% of generation's time). Element j is the same chain as the kernels compute: per depth
// block, acc = 0, acc = fma(a(k), b(k, j), acc) through the block in order, then update_tile's
// update with beta for the first block (c0 in place of c when given) and 1 after; so the bits are
// those of the packed path. Columns in chunks of JB, shared out when `team`.
constexpr int64_t JB = 256;
void gemv_chunk(int64_t j0, int64_t n, int64_t K, float alpha, SView a, SView b, float beta, float* c,
                const float* c0) {
  float acc[JB];
  for (int64_t p0 = 0; p0 < K; p0 += KC) {
    const int64_t kc = std::min(KC, K - p0);
    if (b.cs == 1) {  // b's rows contiguous: one k at a time across the columns
      std::fill(acc, acc + n, 0.0f);
      for (int64_t k = p0; k < p0 + kc; ++k) {
        const float ak = a.p[k * a.cs];
        const float* __restrict bk = b.p + k * b.rs + j0;
        for (int64_t j = 0; j < n; ++j) acc[j] = std::fma(ak, bk[j], acc[j]);
      }
    } else {  // b's columns contiguous in k (b transposed): eight columns' chains side by side
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) {
        float s[8] = {};
        const float* bj = b.p + (j0 + j) * b.cs + p0 * b.rs;
        for (int64_t k = 0; k < kc; ++k) {
          const float ak = a.p[(p0 + k) * a.cs];
          for (int64_t r = 0; r < 8; ++r) s[r] = std::fma(ak, bj[r * b.cs + k * b.rs], s[r]);
        }
        std::copy(s, s + 8, acc + j);
      }
      for (; j < n; ++j) {
        const float* bj = b.p + (j0 + j) * b.cs + p0 * b.rs;
        float s = 0.0f;
        for (int64_t k = 0; k < kc; ++k) s = std::fma(a.p[(p0 + k) * a.cs], bj[k * b.rs], s);
        acc[j] = s;
      }
    }
    const bool from_c0 = p0 == 0 && c0 != nullptr;
    update_tile(acc, JB, 1, n, c + j0, 0, from_c0 ? c0 + j0 : c + j0, 0, alpha, p0 == 0 ? beta : 1.0f);
  }
}

void gemv(int64_t N, int64_t K, float alpha, SView a, SView b, float beta, float* c, const float* c0,
          bool team) {
  const int64_t chunks = (N + JB - 1) / JB;
  const bool split = team && !omp_in_parallel() && omp_get_max_threads() > 1 && N * K >= (int64_t{1} << 19);
#pragma omp parallel for schedule(static) if (split)
  for (int64_t q = 0; q < chunks; ++q)
    gemv_chunk(q * JB, std::min(JB, N - q * JB), K, alpha, a, b, beta, c, c0);
}

}  // namespace

void sgemm_use_kernel(SgemmKernel k) { g_kernel.store(k == SgemmKernel::portable ? &kPortable : &kNative); }
const char* sgemm_kernel_name() { return g_kernel.load()->name; }

void sgemm(int64_t M, int64_t N, int64_t K, float alpha, SView a, SView b, float beta, float* c, int64_t ldc,
           bool team, const float* c0, const RowSums* rowsums) {
  if (M <= 0) return;
  // Row sums: double accumulators for the whole product, stored (or added) as floats at the end.
  std::vector<double> acc(rowsums ? static_cast<size_t>(2 * M) : 0, 0.0);
  const RowSumAcc sums{acc.data(), acc.data() + M};
  auto store_sums = [&] {
    if (!rowsums) return;
    for (int64_t i = 0; i < M; ++i)
      rowsums->out[i] =
          static_cast<float>(rowsums->accumulate ? rowsums->out[i] + sums.total[i] : sums.total[i]);
  };
  if (K <= 0 || N <= 0) {  // c = beta · c (and exactly 0 for beta = 0, whatever c held); sums 0
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * (c0 ? c0[j] : c[i * ldc + j]);
    if (K > 0 && rowsums) {  // N = 0: nothing multiplies, but the sums are still asked for
      for (int64_t i = 0; i < M; ++i)
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
          const int64_t kc = std::min(KC, K - p0);
          sums.add(a.p + i * a.rs + p0 * a.cs, 0, a.cs, 1, kc, i,
                   (p0 + kc) % RowSumAcc::kChunk == 0 || p0 + kc == K);
        }
    }
    store_sums();
    return;
  }
  if (M == 1 && !rowsums) {
    gemv(N, K, alpha, a, b, beta, c, c0, team);
    return;
  }
  const Kernel* kn = g_kernel.load();
  // The caller's b buffer, shared with its team: sized for one column panel.
  static thread_local AlignedBuffer bbuf;
  const int64_t kc = std::min(KC, K);
  const int64_t cols = (std::min(NC, N) + kn->nr - 1) / kn->nr * kn->nr;
  const Product pr{M,
                   N,
                   K,
                   alpha,
                   beta,
                   a,
                   b,
                   c,
                   ldc,
                   c0,
                   rowsums ? &sums : nullptr,
                   kn,
                   bbuf.ensure(static_cast<size_t>(cols * kc))};
  // Below ~1 MFLOP a team costs more than it saves (results are the same either way).
  const bool split =
      team && !omp_in_parallel() && omp_get_max_threads() > 1 && M * N * K >= (int64_t{1} << 19);
  if (!split)
    pr.run(false);
  else {
#pragma omp parallel
    pr.run(true);
  }
  store_sums();
}

}  // namespace saobp::cpu
