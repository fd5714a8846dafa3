// CUDA kernels of the tiled SAOBP attention (O(T) memory, kernels.inc attention_tiled_forward /
// attention_tiled_backward). Host: tiled.cpp.
// CPU twin: src/attention/cpu/tiled.cpp, whose header derives the algorithm and lists its passes.
// This file is that schedule, pass for pass and sum for sum: each pass is one launch of a thread
// block per (head, query block) (per (head, key block) for dK and dV), the column sums are each
// query block's part combined in block order by combine_kernel (a decoder's prefixes in place),
// and inside a block the threads split each step of a tile:
//   elementwise steps (beliefs, logits, dL, ds)  one thread per tile element;
//   row sums (lse^τ, ρ^t)                        one thread per row, keys in order;
//   column sums (a block's parts, the in-tile prefixes)  one thread per column, rows in order;
//   ∂L/∂c of a tile                             thread 0, the tile's entries in row-major order;
//   tile products (s = (scale·Q) Kᵀ, g = dO Vᵀ, O += b V, dQ += scale·ds K, dK += dsᵀ (scale·Q),
//   dV += bᵀ dO)                                 one thread per output element, a plain dot product
//                                                (with SAOBP_TILED_STAGED=1 its operands through
//                                                shared memory: tile_product);
// with __syncthreads between the steps. Every running sum the CPU keeps in double is a double
// here, and no sum depends on scheduling (no atomics): results are bitwise the same run to run.
// Exponentials and logarithms are dmath::exp / dmath::log in the element type (expf / logf in
// f32), as in the rest of the CUDA attention (attention.cu, nn.cu's softmax); the CPU twin's f32
// exp_approx / log_approx differ from them in the last bits, so the twins agree to rounding.
// The tiles of each thread block, scale·Q and the vectors live in scratch from the caching
// allocator (launch.h, TiledArgs).
//
// State: this schedule (a block per query block) passed its [cuda][tiled] tests and
// compute-sanitizer on an H200 and ran at 10x the materialized kernel's step time at T = 2048
// (docs/performance.md, with why: mostly the uncoalesced operand reads of s and dO Vᵀ). The
// staged tile products (SAOBP_TILED_STAGED=1) pass under the CUDA emulator (tests/cuda_emu: the
// unstaged bits, in either thread order; the [cuda] tests on the emulated GPU with them switched
// on) but have not run on a GPU: opt-in until their test has passed there and gpu_check.sh has
// timed them. What would make it fast beyond this:
// the tile products on tensor cores, more than one thread block per SM, and the ∂L/∂c sum as a
// fixed-order tree rather than one thread.
#include "attention/cuda/launch.h"
#include "attention/formulas.h"
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

constexpr int64_t kBr = kTiledRows, kBc = kTiledCols, kArea = kTiledArea;

struct Tile {
  int64_t j0, br, k0, bc;
};

__device__ __forceinline__ int tid() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int nthreads() { return static_cast<int>(blockDim.x); }

// One (batch, head) as block blockIdx.x of a pass sees it: its inputs, the call's vectors and
// this block's tiles.
template <class T>
struct Head {
  int64_t n = 0, hs = 0, nb = 0, levels = 0;         // nb: query blocks; levels: stride of lse's levels
  const T *q = nullptr, *k = nullptr, *v = nullptr;  // q: scale·Q of this head (scratch)
  const uint8_t* key = nullptr;                      // (n) 1 = token, or nullptr
  bool causal = false;
  bool all = true;      // every other token row sends (encoder, leaking decoder)
  bool staged = false;  // tile products through shared memory (tile_product)
  int S = 0;
  T c = 0;
  T* lse = nullptr;     // lse^τ_j at lse[τ levels + j]
  T* col = nullptr;     // C^τ_k at col[(τ-1) levels + k]
  double* P = nullptr;  // decoder (nb, S, n): P^τ_k of query block qb at P[(qb S + τ-1) n + k]
  T *s = nullptr, *tmp = nullptr, *ds = nullptr, *x = nullptr, *b = nullptr, *g = nullptr, *dL = nullptr;

  __device__ bool allowed(int64_t j, int64_t kk) const { return (!key || key[kk]) && (!causal || kk <= j); }
  __device__ bool sender(int64_t i) const { return !key || key[i]; }
  __device__ int64_t rows(int64_t qb) const { return imin(kBr, n - qb * kBr); }
  __device__ int64_t key_end(int64_t qb) const { return causal ? imin(n, qb * kBr + rows(qb)) : n; }
  __device__ Tile tile(int64_t qb, int64_t k0) const {
    return {qb * kBr, rows(qb), k0, imin(kBc, key_end(qb) - k0)};
  }
  __device__ const double* prefix(int64_t qb) const { return all ? nullptr : P + qb * S * n; }
};

// Head bh, with the tiles of this thread block (blockIdx.x) of the pass.
template <class T>
__device__ Head<T> make_head(const TiledArgs<T>& a, int64_t bh) {
  Head<T> h;
  const int64_t QS = a.n * a.hs;
  h.n = a.n, h.hs = a.hs, h.nb = a.nb, h.levels = a.tiles * a.n;
  h.q = a.qs + bh * QS, h.k = a.k + bh * QS, h.v = a.v + bh * QS;
  h.key = a.key ? a.key + bh / a.NH * a.n : nullptr;
  h.causal = a.causal, h.all = a.all, h.S = a.S, h.staged = a.staged;
  h.c = a.c ? static_cast<T>(a.c[bh % a.NH]) : T(0);
  h.lse = a.lse + bh * a.n;
  h.col = a.colsum ? a.colsum + bh * a.n : nullptr;
  h.P = a.all ? nullptr : a.cells + bh * tiled_cells_per_head(a.n, a.S, a.all);
  const int64_t L = a.S + 1;
  T* work = a.work + static_cast<int64_t>(blockIdx.x) * tiled_block_elems(a.S);
  h.s = work, h.tmp = h.s + kArea, h.ds = h.tmp + kArea, h.x = h.ds + kArea, h.b = h.x + L * kArea;
  h.g = h.b + L * kArea, h.dL = h.g + L * kArea;
  return h;
}

// c (M,N) = alpha · A B (+ c when accumulate): one thread per element of c, a dot product in T
// over k in order. A(m,k) = a[m am + k ak], B(k,n) = b[k bk + n bn], c row-major with ldc; M <= 64
// (a tile's rows or keys). Called by every thread of the block.
//
// Staged (SAOBP_TILED_STAGED=1): A and B come through shared memory in chunks of kChunk depth
// values, each element read from global memory once per chunk, and every thread keeps the
// accumulators of its kPer outputs (of a block of 64 columns of c) across the chunks, adding the
// depth values in order: the same operations in the same order per output, so the same bits. Not
// staged, each output's dot product reads A and B from global memory: for s = Q Kᵀ and dO Vᵀ
// the 32 threads of a warp read B at 32 rows HS floats apart, 33 L1 wavefronts a step of the
// dot product where staged B takes 1 (docs/performance.md, "The tiled SAOBP kernels on the GPU").
constexpr int64_t kChunk = 32;
constexpr int kPer = static_cast<int>(kArea / kBlock);
static_assert(kArea % kBlock == 0);

template <class T>
__device__ void staged_product(int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t am, int64_t ak,
                               const T* b, int64_t bk, int64_t bn, bool accumulate, T* c, int64_t ldc) {
  __shared__ T As[kBr * kChunk], Bs[kChunk * kBc];
  for (int64_t n0 = 0; n0 < N; n0 += kBc) {
    const int64_t nc = imin(kBc, N - n0), outs = M * nc;
    T acc[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] = T(0);
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      const int64_t kc = imin(kChunk, K - k0);
      __syncthreads();  // the readers of the previous chunk (or product) are done with As and Bs
      for (int64_t e = tid(); e < M * kc; e += nthreads()) {
        const int64_t m = e / kc, kk = e - m * kc;
        As[m * kChunk + kk] = a[m * am + (k0 + kk) * ak];
      }
      for (int64_t e = tid(); e < kc * nc; e += nthreads()) {
        const int64_t kk = e / nc, nn = e - kk * nc;
        Bs[kk * kBc + nn] = b[(k0 + kk) * bk + (n0 + nn) * bn];
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int64_t i = tid() + j * int64_t{kBlock};
        if (i < outs) {
          const int64_t m = i / nc, nn = i - m * nc;
          for (int64_t kk = 0; kk < kc; ++kk) acc[j] += As[m * kChunk + kk] * Bs[kk * kBc + nn];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t i = tid() + j * int64_t{kBlock};
      if (i < outs) {
        const int64_t m = i / nc, nn = i - m * nc;
        T* o = c + m * ldc + n0 + nn;
        *o = accumulate ? *o + alpha * acc[j] : alpha * acc[j];
      }
    }
  }
}

template <class T>
__device__ void tile_product(bool staged, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t am,
                             int64_t ak, const T* b, int64_t bk, int64_t bn, bool accumulate, T* c,
                             int64_t ldc) {
  if (staged) {
    staged_product(M, N, K, alpha, a, am, ak, b, bk, bn, accumulate, c, ldc);
    return;
  }
  for (int64_t i = tid(); i < M * N; i += nthreads()) {
    const int64_t m = i / N, nn = i - m * N;
    T acc = T(0);
    for (int64_t kk = 0; kk < K; ++kk) acc += a[m * am + kk * ak] * b[kk * bk + nn * bn];
    T* o = c + m * ldc + nn;
    *o = accumulate ? *o + alpha * acc : alpha * acc;
  }
}

__device__ void zero_doubles(double* dst, int64_t n) {
  for (int64_t i = tid(); i < n; i += nthreads()) dst[i] = 0.0;
  __syncthreads();
}

// CPU: forward_chain. s, then the beliefs b^0..b^{known-1} (their lse known) and the logits
// x^0..x^{min(known, S)} of the tile. A decoder's messages start from P, the (S, n) prefixes of
// the tile's query block. Ends synchronized.
template <class T>
__device__ void forward_chain(const Head<T>& h, const Tile& t, int known, const double* P) {
  const int64_t br = t.br, bc = t.bc, cells = br * bc;
  tile_product(h.staged, br, bc, h.hs, T(1), h.q + t.j0 * h.hs, h.hs, int64_t{1}, h.k + t.k0 * h.hs,
               int64_t{1}, h.hs, false, h.s, bc);
  __syncthreads();
  for (int64_t i = tid(); i < cells; i += nthreads()) h.x[i] = h.s[i];
  __syncthreads();
  const int top = known < h.S ? known : h.S;
  for (int tau = 0; tau < known; ++tau) {
    const T* x = h.x + tau * kArea;
    T* b = h.b + tau * kArea;
    const T* lse = h.lse + tau * h.levels;
    for (int64_t i = tid(); i < cells; i += nthreads()) {
      const int64_t r = i / bc, c = i - r * bc, j = t.j0 + r;
      const T l = lse[j];
      b[i] = h.allowed(j, t.k0 + c) && l != dmath::neg_inf<T>() ? dmath::exp(x[i] - l) : T(0);
    }
    __syncthreads();
    if (tau + 1 > top) continue;
    // x^{τ+1} = s + G^{τ+1}, G from F^{τ+1} = log(1 - c b^τ) of the sender rows.
    T* xn = h.x + (tau + 1) * kArea;
    if (h.all) {
      const T* C = h.col + tau * h.levels + t.k0;
      for (int64_t i = tid(); i < cells; i += nthreads()) {
        const int64_t r = i / bc, c = i - r * bc;
        const T F = h.sender(t.j0 + r) ? dmath::log(T(1) - h.c * b[i]) : T(0);
        xn[i] = h.s[i] + static_cast<T>(static_cast<double>(C[c]) - static_cast<double>(F));
      }
    } else {
      for (int64_t c = tid(); c < bc; c += nthreads()) {  // one thread per column, rows in order
        double run = P[tau * h.n + t.k0 + c];
        for (int64_t r = 0; r < br; ++r) {
          xn[r * bc + c] = h.s[r * bc + c] + static_cast<T>(run);
          if (h.sender(t.j0 + r)) run += dmath::log(T(1) - h.c * b[r * bc + c]);
        }
      }
    }
    __syncthreads();
  }
}

// The pass's item of block blockIdx.x: head bh and query (or key) block qb.
struct Item {
  int64_t bh, qb;
};
template <class T>
__device__ Item item_of(const TiledArgs<T>& a) {
  return {static_cast<int64_t>(blockIdx.x) / a.nb, static_cast<int64_t>(blockIdx.x) % a.nb};
}

// ---- forward passes -----------------------------------------------------------------------------

// CPU: row_stats. lse^τ of query block qb's rows over every key tile: one thread per row keeps
// the row's running max and sum (in double) across the tiles.
template <class T>
__global__ void __launch_bounds__(kBlock) row_stats_kernel(TiledArgs<T> a, int tau) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  const T ninf = dmath::neg_inf<T>();
  double M = -INFINITY, Z = 0;
  bool nan = false;
  const int64_t br = h.rows(it.qb), j0 = it.qb * kBr;
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    forward_chain(h, t, tau, h.prefix(it.qb));
    const T* x = h.x + tau * kArea;
    if (tid() < br) {
      const int64_t r = tid(), j = j0 + r;
      T m = ninf;
      for (int64_t c = 0; c < t.bc; ++c) {
        const T xv = x[r * t.bc + c];
        if (h.allowed(j, k0 + c)) {
          m = xv > m ? xv : m;
          nan = nan || xv != xv;
        }
      }
      if (m != ninf) {
        if (static_cast<double>(m) > M) {
          Z *= ::exp(M - static_cast<double>(m));
          M = m;
        }
        const T Mt = static_cast<T>(M);
        double z = 0;
        for (int64_t c = 0; c < t.bc; ++c)
          if (h.allowed(j, k0 + c)) z += dmath::exp(x[r * t.bc + c] - Mt);
        Z += z;
      }
    }
    __syncthreads();  // the next tile overwrites x
  }
  if (tid() < br)
    h.lse[tau * h.levels + j0 + tid()] = nan     ? static_cast<T>(NAN)
                                         : Z > 0 ? static_cast<T>(M + ::log(Z))
                                                 : ninf;
}

// CPU: column_part. The part of query block qb in the column sums of F^{τ+1}: its sender rows
// in order, one thread per column; 0 past a decoder block's keys. An encoder's part goes to its
// cells, a decoder's to its slot of level τ in the P table (the prefixes, once combined).
template <class T>
__global__ void __launch_bounds__(kBlock) column_part_kernel(TiledArgs<T> a, int tau) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  double* part = a.cells + it.bh * tiled_cells_per_head(h.n, h.S, h.all) +
                 (h.all ? it.qb * h.n : (it.qb * h.S + tau) * h.n);
  zero_doubles(part, h.n);
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    forward_chain(h, t, tau + 1, h.prefix(it.qb));
    const T* b = h.b + tau * kArea;
    for (int64_t c = tid(); c < t.bc; c += nthreads())
      for (int64_t r = 0; r < t.br; ++r)
        if (h.sender(t.j0 + r)) part[k0 + c] += dmath::log(T(1) - h.c * b[r * t.bc + c]);
    __syncthreads();
  }
}

// CPU: combine. One thread per (head, column): the blocks' parts in block order; with prefix,
// each part becomes the sum of those above it. The total goes to total (doubles) and col (T),
// either may be null. Part qb of head bh at parts[bh head_stride + qb block_stride + k].
template <class T>
__global__ void combine_kernel(double* parts, int64_t head_stride, int64_t block_stride, int64_t tiles,
                               int64_t n, int64_t nb, bool prefix, double* total, int64_t total_stride,
                               T* col) {
  for (int64_t i = thread_id(); i < tiles * n; i += thread_count()) {
    const int64_t bh = i / n, k = i - bh * n;
    double* p = parts + bh * head_stride + k;
    double run = 0;
    for (int64_t qb = 0; qb < nb; ++qb) {
      const double add = p[qb * block_stride];
      if (prefix) p[qb * block_stride] = run;
      run += add;
    }
    if (total) total[bh * total_stride + k] = run;
    if (col) col[i] = static_cast<T>(run);
  }
}

// CPU: forward_all's last pass. O of query block qb = Σ over its key tiles of b^S V.
template <class T>
__global__ void __launch_bounds__(kBlock) output_kernel(TiledArgs<T> a, T* out) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  T* o = out + it.bh * h.n * h.hs + it.qb * kBr * h.hs;
  const int64_t br = h.rows(it.qb);
  for (int64_t i = tid(); i < br * h.hs; i += nthreads()) o[i] = T(0);
  __syncthreads();
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    forward_chain(h, t, h.S + 1, h.prefix(it.qb));
    tile_product(h.staged, br, h.hs, t.bc, T(1), h.b + h.S * kArea, t.bc, int64_t{1}, h.v + k0 * h.hs, h.hs,
                 int64_t{1}, true, o, h.hs);  // O += b^S V
    __syncthreads();
  }
}

// ---- backward passes ----------------------------------------------------------------------------

// The backward's vectors of head bh.
template <class T>
struct Grads {
  const T *dO = nullptr, *O = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const double* rho = nullptr;  // (S+1, n)
  const double* E = nullptr;    // (S, n): E^t at [(t-1) n + k]
  double* R = nullptr;  // decoder (nb, S, n): prefix of dL^t above query block qb at [(qb S + t-1) n + k]
  __device__ const double* prefix(const Head<T>& h, int64_t qb) const {
    return h.all ? nullptr : R + qb * h.S * h.n;
  }
};
template <class T>
__device__ Grads<T> make_grads(const TiledArgs<T>& a, int64_t bh) {
  const int64_t QS = a.n * a.hs;
  Grads<T> gr;
  gr.dO = a.gout + bh * QS, gr.O = a.out + bh * QS;
  gr.dq = a.gq ? a.gq + bh * QS : nullptr;
  gr.dk = a.gk ? a.gk + bh * QS : nullptr;
  gr.dv = a.gv ? a.gv + bh * QS : nullptr;
  gr.rho = a.rho + bh * (a.S + 1) * a.n;
  gr.E = a.E + bh * a.S * a.n;
  gr.R = a.all ? nullptr : a.R + bh * a.nb * a.S * a.n;
  return gr;
}

// CPU: backward_chain. After forward_chain with every level: g^S = dO Vᵀ, then for t = S..lo+1
// dL^t = b^t (g^t - ρ^t) and g^{t-1} = dF^t ⊙ (-c)/(1 - c b^{t-1}) on the sender rows, dF^t from
// E^t (a decoder's from R, its query block's prefixes, and the running sum down the tile). With
// dc, thread 0 adds the ∂L/∂c terms of levels lo+1..S to *dc, each level's tile summed in
// row-major order. Ends synchronized.
template <class T>
__device__ void backward_chain(const Head<T>& h, const Grads<T>& gr, const Tile& t, int lo, const double* R,
                               double* dc) {
  const int64_t br = t.br, bc = t.bc, cells = br * bc;
  T* gS = h.g + h.S * kArea;
  tile_product(h.staged, br, bc, h.hs, T(1), gr.dO + t.j0 * h.hs, h.hs, int64_t{1}, h.v + t.k0 * h.hs,
               int64_t{1}, h.hs, false, gS, bc);
  __syncthreads();
  for (int lev = h.S; lev > lo; --lev) {
    const T* g = h.g + lev * kArea;
    const T* b = h.b + lev * kArea;
    const T* bp = h.b + (lev - 1) * kArea;
    T* dL = h.dL + lev * kArea;
    T* gp = h.g + (lev - 1) * kArea;
    const double* rho = gr.rho + lev * h.n + t.j0;
    for (int64_t i = tid(); i < cells; i += nthreads()) {
      const int64_t r = i / bc;
      dL[i] = b[i] * (g[i] - static_cast<T>(rho[r]));
    }
    __syncthreads();
    const double* E = gr.E + (lev - 1) * h.n + t.k0;
    for (int64_t c = tid(); c < bc; c += nthreads()) {  // one thread per column, rows in order
      double run = h.all ? 0.0 : R[(lev - 1) * h.n + t.k0 + c];
      for (int64_t r = 0; r < br; ++r) {
        const T d = dL[r * bc + c];
        T dF;
        if (h.all) {
          dF = static_cast<T>(E[c] - static_cast<double>(d));
        } else {
          run += d;  // inclusive prefix: dF_ik = Σ_{j > i} dL_jk = E_k - Σ_{j <= i} dL_jk
          dF = static_cast<T>(E[c] - run);
        }
        if (!h.sender(t.j0 + r)) {
          gp[r * bc + c] = T(0);
          continue;
        }
        const T p = bp[r * bc + c], den = T(1) - h.c * p;
        gp[r * bc + c] = dF * -h.c / den;
        if (dc) h.tmp[r * bc + c] = dF * -p / den;
      }
    }
    __syncthreads();
    if (dc) {
      if (tid() == 0) {
        double acc = 0;
        for (int64_t r = 0; r < br; ++r)
          if (h.sender(t.j0 + r))
            for (int64_t c = 0; c < bc; ++c) acc += static_cast<double>(h.tmp[r * bc + c]);
        *dc += acc;
      }
      __syncthreads();
    }
  }
}

// Both chains of a tile of query block qb, the backward's down to level lo.
template <class T>
__device__ void chains(const Head<T>& h, const Grads<T>& gr, int64_t qb, const Tile& t, int lo, double* dc) {
  forward_chain(h, t, h.S + 1, h.prefix(qb));
  backward_chain(h, gr, t, lo, gr.prefix(h, qb), dc);
}

// ds = Σ_t dL^t + b^0 ⊙ (g^0 - ρ^0) of the tile after its chains down to level 0. Ends synchronized.
template <class T>
__device__ void form_ds(const Head<T>& h, const Grads<T>& gr, const Tile& t) {
  const int64_t cells = t.br * t.bc;
  for (int64_t i = tid(); i < cells; i += nthreads()) {
    const int64_t r = i / t.bc;
    T d = h.b[i] * (h.g[i] - static_cast<T>(gr.rho[t.j0 + r]));
    for (int lev = 1; lev <= h.S; ++lev) d += h.dL[lev * kArea + i];
    h.ds[i] = d;
  }
  __syncthreads();
}

// ρ^S_j = <dB_j, B_j> = dO_j · O_j, one thread per (head, row).
template <class T>
__global__ void rho_top_kernel(TiledArgs<T> a) {
  const int64_t n = a.n, hs = a.hs;
  for (int64_t i = thread_id(); i < a.tiles * n; i += thread_count()) {
    const int64_t bh = i / n, j = i - bh * n;
    const T* dO = a.gout + i * hs;
    const T* O = a.out + i * hs;
    double d = 0;
    for (int64_t e = 0; e < hs; ++e) d += static_cast<double>(dO[e]) * static_cast<double>(O[e]);
    a.rho[bh * (a.S + 1) * n + a.S * n + j] = d;
  }
}

// CPU: backward_all's E pass. Query block qb's part in the column sums of dL^lev, one thread per
// column, rows in order: into an encoder's cells, or a decoder's slot of R (its prefixes, once
// combined).
template <class T>
__global__ void __launch_bounds__(kBlock) dL_part_kernel(TiledArgs<T> a, int lev) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  const Grads<T> gr = make_grads(a, it.bh);
  double* part = h.all ? a.cells + it.bh * tiled_cells_per_head(h.n, h.S, true) + it.qb * h.n
                       : gr.R + (it.qb * h.S + lev - 1) * h.n;
  zero_doubles(part, h.n);
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    chains(h, gr, it.qb, t, lev, static_cast<double*>(nullptr));
    const T* g = h.g + lev * kArea;
    const T* b = h.b + lev * kArea;
    const double* rho = gr.rho + lev * h.n + t.j0;
    for (int64_t c = tid(); c < t.bc; c += nthreads())
      for (int64_t r = 0; r < t.br; ++r)
        part[k0 + c] += b[r * t.bc + c] * (g[r * t.bc + c] - static_cast<T>(rho[r]));
    __syncthreads();
  }
}

// CPU: backward_all's ρ pass. ρ^lo of query block qb's rows: one thread per row, key tiles in order.
template <class T>
__global__ void __launch_bounds__(kBlock) rho_kernel(TiledArgs<T> a, int lo) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  const Grads<T> gr = make_grads(a, it.bh);
  double acc = 0;
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    chains(h, gr, it.qb, t, lo, static_cast<double*>(nullptr));
    const T* g = h.g + lo * kArea;
    const T* b = h.b + lo * kArea;
    if (tid() < t.br) {
      const int64_t r = tid();
      double d = 0;
      for (int64_t c = 0; c < t.bc; ++c) d += static_cast<double>(g[r * t.bc + c] * b[r * t.bc + c]);
      acc += d;
    }
    __syncthreads();
  }
  if (tid() < h.rows(it.qb)) a.rho[it.bh * (h.S + 1) * h.n + lo * h.n + it.qb * kBr + tid()] = acc;
}

// CPU: backward_all's dQ pass. dQ += scale ds K over query block qb's key tiles (row-owned), and
// the block's ∂L/∂c (kept by thread 0) into dc[bh nb + qb].
template <class T>
__global__ void __launch_bounds__(kBlock) dq_kernel(TiledArgs<T> a) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  const Grads<T> gr = make_grads(a, it.bh);
  const T sc = static_cast<T>(a.scale);
  double dc = 0;
  for (int64_t k0 = 0; k0 < h.key_end(it.qb); k0 += kBc) {
    const Tile t = h.tile(it.qb, k0);
    chains(h, gr, it.qb, t, 0, &dc);
    if (!gr.dq) continue;
    form_ds(h, gr, t);
    tile_product(h.staged, t.br, h.hs, t.bc, sc, h.ds, t.bc, int64_t{1}, h.k + t.k0 * h.hs, h.hs, int64_t{1},
                 true, gr.dq + t.j0 * h.hs, h.hs);
    __syncthreads();
  }
  if (tid() == 0) a.dc[blockIdx.x] = dc;
}

// CPU: backward_all's dK, dV pass. Key block kb (blockIdx.x % nb) over the query blocks that
// read it, top down (column-owned): dK += dsᵀ (scale Q), dV += b^Sᵀ dO.
template <class T>
__global__ void __launch_bounds__(kBlock) dkv_kernel(TiledArgs<T> a) {
  const Item it = item_of(a);
  const Head<T> h = make_head(a, it.bh);
  const Grads<T> gr = make_grads(a, it.bh);
  const int64_t k0 = it.qb * kBc;
  for (int64_t qb = 0; qb < h.nb; ++qb) {
    if (k0 >= h.key_end(qb)) continue;
    const Tile t = h.tile(qb, k0);
    chains(h, gr, qb, t, 0, static_cast<double*>(nullptr));
    if (gr.dk) {
      form_ds(h, gr, t);
      tile_product(h.staged, t.bc, h.hs, t.br, T(1), h.ds, int64_t{1}, t.bc, h.q + t.j0 * h.hs, h.hs,
                   int64_t{1}, true, gr.dk + t.k0 * h.hs, h.hs);
    }
    if (gr.dv)
      tile_product(h.staged, t.bc, h.hs, t.br, T(1), h.b + h.S * kArea, int64_t{1}, t.bc, gr.dO + t.j0 * h.hs,
                   h.hs, int64_t{1}, true, gr.dv + t.k0 * h.hs, h.hs);
    __syncthreads();
  }
}

template <class T>
__global__ void scale_kernel(const T* q, T scale, int64_t N, T* out) {
  for (int64_t i = thread_id(); i < N; i += thread_count()) out[i] = scale * q[i];
}

// One launch per (head, block) pass: tiles · nb blocks.
template <class T>
unsigned items(const TiledArgs<T>& a) {
  return static_cast<unsigned>(a.tiles * a.nb);
}

// The column sums C^{τ+1} from lse^0..lse^τ: the blocks' parts, combined (a decoder's into its
// P prefixes; the totals to colsum when save).
template <class T>
cudaError_t column_sums(const TiledArgs<T>& a, int tau, bool save) {
  column_part_kernel<<<items(a), kBlock>>>(a, tau);
  const int64_t per_head = tiled_cells_per_head(a.n, a.S, a.all);
  T* col = save || a.all ? a.colsum + tau * a.tiles * a.n : nullptr;
  combine_kernel<T><<<grid_for(a.tiles * a.n), kBlock>>>(a.cells + (a.all ? 0 : tau * a.n), per_head,
                                                         a.all ? a.n : a.S * a.n, a.tiles, a.n, a.nb, !a.all,
                                                         nullptr, 0, col);
  return cudaGetLastError();
}

}  // namespace

// CPU twin: tiled_forward_t / forward_all, pass for pass.
template <class T>
cudaError_t launch_attention_tiled_forward(const TiledArgs<T>& a, T* out) {
  scale_kernel<<<grid_for(a.tiles * a.n * a.hs), kBlock>>>(a.q, static_cast<T>(a.scale), a.tiles * a.n * a.hs,
                                                           a.qs);
  for (int tau = 0; tau <= a.S; ++tau) {
    row_stats_kernel<<<items(a), kBlock>>>(a, tau);
    if (tau < a.S)
      if (const cudaError_t e = column_sums(a, tau, true); e != cudaSuccess) return e;
  }
  output_kernel<<<items(a), kBlock>>>(a, out);
  return cudaGetLastError();
}

// CPU twin: tiled_backward_t / backward_all, pass for pass.
template <class T>
cudaError_t launch_attention_tiled_backward(const TiledArgs<T>& a) {
  scale_kernel<<<grid_for(a.tiles * a.n * a.hs), kBlock>>>(a.q, static_cast<T>(a.scale), a.tiles * a.n * a.hs,
                                                           a.qs);
  if (!a.all)
    for (int tau = 0; tau < a.S; ++tau)
      if (const cudaError_t e = column_sums(a, tau, false); e != cudaSuccess) return e;
  rho_top_kernel<<<grid_for(a.tiles * a.n), kBlock>>>(a);
  const int64_t SN = int64_t{a.S} * a.n;
  for (int lev = a.S; lev >= 1; --lev) {
    dL_part_kernel<<<items(a), kBlock>>>(a, lev);
    combine_kernel<T><<<grid_for(a.tiles * a.n), kBlock>>>(
        a.all ? a.cells : a.R + (lev - 1) * a.n, a.all ? tiled_cells_per_head(a.n, a.S, true) : a.nb * SN,
        a.all ? a.n : SN, a.tiles, a.n, a.nb, !a.all, a.E + (lev - 1) * a.n, SN, static_cast<T*>(nullptr));
    rho_kernel<<<items(a), kBlock>>>(a, lev - 1);
  }
  dq_kernel<<<items(a), kBlock>>>(a);
  if (a.gk || a.gv) dkv_kernel<<<items(a), kBlock>>>(a);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                          \
  template cudaError_t launch_attention_tiled_forward<T>(const TiledArgs<T>&, T*); \
  template cudaError_t launch_attention_tiled_backward<T>(const TiledArgs<T>&);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
