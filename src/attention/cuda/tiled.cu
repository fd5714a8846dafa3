// CUDA kernels of the tiled SAOBP attention (O(T) memory, kernels.inc attention_tiled_forward /
// attention_tiled_backward). Host: tiled.cpp.
// CPU twin: src/attention/cpu/tiled.cpp, whose header derives the algorithm and lists its passes.
// This file is that algorithm, pass for pass and sum for sum: one thread block per (batch, head)
// walks the head's sweeps exactly as the CPU's one thread does (query blocks of 64 rows top
// down, key tiles of 64 left to right), and the block's threads split each step of a tile:
//   elementwise steps (beliefs, logits, dL, ds)  one thread per tile element;
//   row sums (lse^τ, ρ^t)                        one thread per row, keys in order;
//   column sums (C^τ, a decoder's P and R, E^t)  one thread per column, rows in order;
//   ∂L/∂c of a tile                             thread 0, the tile's entries in row-major order;
//   tile products (s = (scale·Q) Kᵀ, g = dO Vᵀ, O += b V, dQ += scale·ds K, dK += dsᵀ (scale·Q),
//   dV += bᵀ dO)                                 one thread per output element, a plain dot product;
// with __syncthreads between the steps. Every running sum the CPU keeps in double is a double
// here, and no sum depends on scheduling (no atomics): results are bitwise the same run to run.
// Exponentials and logarithms are dmath::exp / dmath::log in the element type (expf / logf in
// f32), as in the rest of the CUDA attention (attention.cu, nn.cu's softmax); the CPU twin's f32
// exp_approx / log_approx differ from them in the last bits, so the twins agree to rounding.
// The tiles and the per-head vectors (lse, column sums, P, R, E, ρ) live in global scratch from
// the caching allocator (tiled_work_elems / tiled_vec_elems, launch.h).
//
// State: its [cuda][tiled] tests (tests/attention/test_attention_tiled.cpp: the CPU twin's
// outputs, lse, colsum and gradients, bitwise reruns, NaN rows) passed on one NVIDIA H200, as did
// compute-sanitizer's memcheck, initcheck and synccheck over them; it has not been timed or run
// in training. It is written to be obviously the CPU twin, not fast:
// one block per head leaves most of a GPU idle at small batch × heads, every tile goes through
// global memory, and the products are scalar loops. What would make it fast: one block per
// (batch, head, query block), with a decoder's column prefixes P and R passed between blocks as
// a block table (or a scan over the blocks' column sums); the tiles in shared memory; the tile
// products on tensor cores; and the ∂L/∂c sum as a fixed-order tree rather than one thread.
#include "attention/cuda/launch.h"
#include "attention/formulas.h"
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

constexpr int64_t kBr = kTiledRows, kBc = kTiledCols, kArea = kTiledArea;

// One (batch, head): its inputs, the vectors the passes share and the block's tiles (all
// threads of the block hold the same copy).
template <class T>
struct Head {
  int64_t n = 0, hs = 0, levels = 0;  // levels: the stride between the levels of lse and colsum
  const T *q = nullptr, *k = nullptr, *v = nullptr;  // q: scale·Q of this head (scratch)
  const uint8_t* key = nullptr;                      // (n) 1 = token, or nullptr
  bool causal = false;
  bool all = true;  // every other token row sends (encoder, leaking decoder)
  int S = 0;
  T c = 0;
  T* lse = nullptr;                       // lse^τ_j at lse[τ levels + j]
  T* col = nullptr;                       // C^τ_k at col[(τ-1) levels + k]
  double *P = nullptr, *nextP = nullptr;  // (S, n) decoder: column sums of F^τ above the block
  T *s = nullptr, *tmp = nullptr, *ds = nullptr, *x = nullptr, *b = nullptr;  // tiles

  __device__ bool allowed(int64_t j, int64_t kk) const { return (!key || key[kk]) && (!causal || kk <= j); }
  __device__ bool sender(int64_t i) const { return !key || key[i]; }
  // The key tiles a block reads: every key, or a decoder's keys up to the block's last row.
  __device__ int64_t key_end(int64_t j0, int64_t br) const { return causal ? imin(n, j0 + br) : n; }
};

// The backward's vectors and tiles.
template <class T>
struct Grads {
  const T *dO = nullptr, *O = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  double* rho = nullptr;                  // (S+1, n)
  double* E = nullptr;                    // (S, n): E^t at [(t-1) n + k]
  double *R = nullptr, *nextR = nullptr;  // (S, n) decoder prefixes of dL^t above the block
  T *g = nullptr, *dL = nullptr;          // tiles, S + 1 levels each
};

struct Tile {
  int64_t j0, br, k0, bc;
};

__device__ __forceinline__ int tid() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int nthreads() { return static_cast<int>(blockDim.x); }

// The head of block blockIdx.x: pointers into the call's tensors and this head's scratch.
template <class T>
__device__ Head<T> make_head(const TiledArgs<T>& a, bool backward) {
  const int64_t bh = blockIdx.x, QS = a.n * a.hs;
  Head<T> h;
  h.n = a.n, h.hs = a.hs, h.levels = a.tiles * a.n;
  T* work = a.work + bh * tiled_work_elems(a.n, a.hs, a.S, backward);
  h.q = work, h.k = a.k + bh * QS, h.v = a.v + bh * QS;
  h.key = a.key ? a.key + bh / a.NH * a.n : nullptr;
  h.causal = a.causal, h.all = a.all, h.S = a.S;
  h.c = a.c ? static_cast<T>(a.c[bh % a.NH]) : T(0);
  h.lse = a.lse + bh * a.n;
  h.col = a.colsum ? a.colsum + bh * a.n : nullptr;
  const int64_t L = a.S + 1;
  h.s = work + QS, h.tmp = h.s + kArea, h.ds = h.tmp + kArea, h.x = h.ds + kArea, h.b = h.x + L * kArea;
  // scale·Q into the scratch, as the CPU's copy: the tiles' s = q Kᵀ needs no multiply.
  const T sc = static_cast<T>(a.scale);
  T* qs = work;
  for (int64_t i = tid(); i < QS; i += nthreads()) qs[i] = sc * a.q[bh * QS + i];
  __syncthreads();
  return h;
}

// c (M,N) = alpha · A B (+ c when accumulate): one thread per element of c, a dot product in T
// over k in order. A(m,k) = a[m am + k ak], B(k,n) = b[k bk + n bn], c row-major with ldc.
template <class T>
__device__ void tile_product(int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t am, int64_t ak,
                             const T* b, int64_t bk, int64_t bn, bool accumulate, T* c, int64_t ldc) {
  for (int64_t i = tid(); i < M * N; i += nthreads()) {
    const int64_t m = i / N, nn = i - m * N;
    T acc = T(0);
    for (int64_t kk = 0; kk < K; ++kk) acc += a[m * am + kk * ak] * b[kk * bk + nn * bn];
    T* o = c + m * ldc + nn;
    *o = accumulate ? *o + alpha * acc : alpha * acc;
  }
}

// CPU: forward_chain. s, then the beliefs b^0..b^{known-1} (their lse known) and the logits
// x^0..x^{min(known, S)} of the tile. A decoder's messages start from P (the rows above the
// block); with `next`, the running sums after the tile's last row go there. Ends synchronized.
template <class T>
__device__ void forward_chain(const Head<T>& h, const Tile& t, int known, const double* P, double* next) {
  const int64_t br = t.br, bc = t.bc, cells = br * bc;
  tile_product(br, bc, h.hs, T(1), h.q + t.j0 * h.hs, h.hs, int64_t{1}, h.k + t.k0 * h.hs, int64_t{1}, h.hs,
               false, h.s, bc);
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
        if (next) next[tau * h.n + t.k0 + c] = run;
      }
    }
    __syncthreads();
  }
}

// CPU: row_stats. lse^τ of the rows [j0, j0 + br) over every key tile: one thread per row keeps
// the row's running max and sum (in double) across the tiles.
template <class T>
__device__ void row_stats(const Head<T>& h, int64_t j0, int64_t br, int tau) {
  const T ninf = dmath::neg_inf<T>();
  double M = -INFINITY, Z = 0;
  bool nan = false;
  const int64_t kend = h.key_end(j0, br);
  for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
    const Tile t{j0, br, k0, imin(kBc, kend - k0)};
    forward_chain(h, t, tau, h.P, nullptr);
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
  __syncthreads();
}

// O of the rows [j0, j0 + br) = Σ over the key tiles of b^S V (a decoder's P from h.P, the next
// block's into next).
template <class T>
__device__ void output_block(const Head<T>& h, int64_t j0, int64_t br, double* next, T* out) {
  T* o = out + j0 * h.hs;
  for (int64_t i = tid(); i < br * h.hs; i += nthreads()) o[i] = T(0);
  __syncthreads();
  const int64_t kend = h.key_end(j0, br);
  for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
    const Tile t{j0, br, k0, imin(kBc, kend - k0)};
    forward_chain(h, t, h.S + 1, h.P, next);
    const T* bS = h.b + h.S * kArea;
    tile_product(br, h.hs, t.bc, T(1), bS, t.bc, int64_t{1}, h.v + k0 * h.hs, h.hs, int64_t{1}, true, o,
                 h.hs);  // O += b^S V
    __syncthreads();
  }
}

// Copies n doubles (block-wide, then synchronized).
__device__ void copy_doubles(const double* src, double* dst, int64_t n) {
  for (int64_t i = tid(); i < n; i += nthreads()) dst[i] = src[i];
  __syncthreads();
}
__device__ void zero_doubles(double* dst, int64_t n) {
  for (int64_t i = tid(); i < n; i += nthreads()) dst[i] = 0.0;
  __syncthreads();
}

// CPU: forward_head, for head blockIdx.x.
template <class T>
__global__ void __launch_bounds__(kBlock) tiled_forward_kernel(TiledArgs<T> a, T* out_all) {
  Head<T> h = make_head(a, false);
  const int64_t n = h.n, bh = blockIdx.x;
  T* out = out_all + bh * n * h.hs;
  double* vecs = a.vecs + bh * tiled_vec_elems(n, a.S, false);
  double* C = vecs;  // (n) encoder
  h.P = vecs + n, h.nextP = h.P + h.S * n;
  if (h.all) {
    for (int tau = 0; tau <= h.S; ++tau) {
      for (int64_t j0 = 0; j0 < n; j0 += kBr) row_stats(h, j0, imin(kBr, n - j0), tau);
      if (tau == h.S) break;
      // C^{τ+1}: the column sums of F^{τ+1} over the sender rows, top down.
      zero_doubles(C, n);
      for (int64_t j0 = 0; j0 < n; j0 += kBr) {
        const int64_t br = imin(kBr, n - j0);
        for (int64_t k0 = 0; k0 < n; k0 += kBc) {
          const Tile t{j0, br, k0, imin(kBc, n - k0)};
          forward_chain(h, t, tau + 1, nullptr, nullptr);
          const T* b = h.b + tau * kArea;
          for (int64_t c = tid(); c < t.bc; c += nthreads())
            for (int64_t r = 0; r < br; ++r)
              if (h.sender(j0 + r)) C[k0 + c] += dmath::log(T(1) - h.c * b[r * t.bc + c]);
          __syncthreads();
        }
      }
      for (int64_t kk = tid(); kk < n; kk += nthreads()) h.col[tau * h.levels + kk] = static_cast<T>(C[kk]);
      __syncthreads();
    }
    for (int64_t j0 = 0; j0 < n; j0 += kBr) output_block(h, j0, imin(kBr, n - j0), nullptr, out);
    return;
  }
  // Decoder: block by block, top down; P holds the prefix of the rows above the block.
  zero_doubles(h.P, h.S * n);
  for (int64_t j0 = 0; j0 < n; j0 += kBr) {
    const int64_t br = imin(kBr, n - j0);
    for (int tau = 0; tau <= h.S; ++tau) row_stats(h, j0, br, tau);
    copy_doubles(h.P, h.nextP, h.S * n);  // keys past the block's rows keep their sums
    output_block(h, j0, br, h.nextP, out);
    double* swap = h.P;
    h.P = h.nextP, h.nextP = swap;
  }
  for (int64_t i = tid(); i < h.S * n; i += nthreads()) {
    const int64_t tau = i / n, kk = i - tau * n;
    h.col[tau * h.levels + kk] = static_cast<T>(h.P[i]);
  }
}

// ---- backward ---------------------------------------------------------------------------------

// CPU: backward_chain. After forward_chain with every level: g^S = dO Vᵀ, then for t = S..lo+1
// dL^t = b^t (g^t - ρ^t) and g^{t-1} = dF^t ⊙ (-c)/(1 - c b^{t-1}) on the sender rows, dF^t from
// E^t (and a decoder's R^t, its running sum going into nextR). With want_dc, thread 0 adds the
// ∂L/∂c terms of levels lo+1..S to dc, each level's tile summed in row-major order as the CPU
// does. Ends synchronized.
template <class T>
__device__ void backward_chain(const Head<T>& h, const Grads<T>& gr, const Tile& t, int lo, double* nextR,
                               bool want_dc, double& dc) {
  const int64_t br = t.br, bc = t.bc, cells = br * bc;
  T* gS = gr.g + h.S * kArea;
  tile_product(br, bc, h.hs, T(1), gr.dO + t.j0 * h.hs, h.hs, int64_t{1}, h.v + t.k0 * h.hs, int64_t{1}, h.hs,
               false, gS, bc);
  __syncthreads();
  for (int lev = h.S; lev > lo; --lev) {
    const T* g = gr.g + lev * kArea;
    const T* b = h.b + lev * kArea;
    const T* bp = h.b + (lev - 1) * kArea;
    T* dL = gr.dL + lev * kArea;
    T* gp = gr.g + (lev - 1) * kArea;
    const double* rho = gr.rho + lev * h.n + t.j0;
    for (int64_t i = tid(); i < cells; i += nthreads()) {
      const int64_t r = i / bc;
      dL[i] = b[i] * (g[i] - static_cast<T>(rho[r]));
    }
    __syncthreads();
    const double* E = gr.E + (lev - 1) * h.n + t.k0;
    for (int64_t c = tid(); c < bc; c += nthreads()) {  // one thread per column, rows in order
      double run = h.all ? 0.0 : gr.R[(lev - 1) * h.n + t.k0 + c];
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
        if (want_dc) h.tmp[r * bc + c] = dF * -p / den;
      }
      if (!h.all && nextR) nextR[(lev - 1) * h.n + t.k0 + c] = run;
    }
    __syncthreads();
    if (want_dc) {
      if (tid() == 0) {
        double acc = 0;
        for (int64_t r = 0; r < br; ++r)
          if (h.sender(t.j0 + r))
            for (int64_t c = 0; c < bc; ++c) acc += static_cast<double>(h.tmp[r * bc + c]);
        dc += acc;
      }
      __syncthreads();
    }
  }
}

// One top-down sweep of the head (CPU: backward_head's sweep): fn(tile) after the forward chain,
// with a decoder's P and R advanced block by block. fn ends synchronized.
template <class T, class Fn>
__device__ void sweep(Head<T>& h, Grads<T>& gr, Fn fn) {
  const int64_t n = h.n, SN = h.S * n;
  if (!h.all) {
    zero_doubles(h.P, SN);
    zero_doubles(gr.R, SN);
  }
  for (int64_t j0 = 0; j0 < n; j0 += kBr) {
    const int64_t br = imin(kBr, n - j0);
    if (!h.all) {
      copy_doubles(h.P, h.nextP, SN);
      copy_doubles(gr.R, gr.nextR, SN);
    }
    const int64_t kend = h.key_end(j0, br);
    for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
      const Tile t{j0, br, k0, imin(kBc, kend - k0)};
      forward_chain(h, t, h.S + 1, h.all ? nullptr : h.P, h.all ? nullptr : h.nextP);
      fn(t, h.all ? nullptr : gr.nextR);
    }
    if (!h.all) {
      double* swap = h.P;
      h.P = h.nextP, h.nextP = swap;
      swap = gr.R;
      gr.R = gr.nextR, gr.nextR = swap;
    }
  }
}

// CPU: backward_head, for head blockIdx.x.
template <class T>
__global__ void __launch_bounds__(kBlock) tiled_backward_kernel(TiledArgs<T> a) {
  Head<T> h = make_head(a, true);
  const int64_t n = h.n, bh = blockIdx.x, QS = n * h.hs, SN = h.S * n;
  Grads<T> gr;
  gr.dO = a.gout + bh * QS, gr.O = a.out + bh * QS;
  gr.dq = a.gq ? a.gq + bh * QS : nullptr;
  gr.dk = a.gk ? a.gk + bh * QS : nullptr;
  gr.dv = a.gv ? a.gv + bh * QS : nullptr;
  gr.g = h.b + (h.S + 1) * kArea, gr.dL = gr.g + (h.S + 1) * kArea;
  double* vecs = a.vecs + bh * tiled_vec_elems(n, a.S, true);
  gr.rho = vecs, gr.E = gr.rho + (h.S + 1) * n, gr.R = gr.E + SN, gr.nextR = gr.R + SN;
  h.P = gr.nextR + SN, h.nextP = h.P + SN;
  zero_doubles(gr.rho, (h.S + 1) * n);
  zero_doubles(gr.E, SN);
  zero_doubles(gr.R, SN);
  for (int64_t j = tid(); j < n; j += nthreads()) {  // ρ^S_j = <dB_j, B_j> = dO_j · O_j
    double d = 0;
    for (int64_t e = 0; e < h.hs; ++e)
      d += static_cast<double>(gr.dO[j * h.hs + e]) * static_cast<double>(gr.O[j * h.hs + e]);
    gr.rho[h.S * n + j] = d;
  }
  __syncthreads();
  double dc = 0;  // ∂L/∂c of this head, kept by thread 0
  for (int lev = h.S; lev >= 1; --lev) {
    // E^lev: the column sums of dL^lev over every row (level lev-1 of E is read by no chain
    // below lev, so it is summed in place from 0).
    sweep(h, gr, [&](const Tile& t, double* nextR) {
      backward_chain(h, gr, t, lev, nextR, false, dc);
      const T* g = gr.g + lev * kArea;
      const T* b = h.b + lev * kArea;
      const double* rho = gr.rho + lev * n + t.j0;
      double* E = gr.E + (lev - 1) * n + t.k0;
      for (int64_t c = tid(); c < t.bc; c += nthreads())
        for (int64_t r = 0; r < t.br; ++r)
          E[c] += b[r * t.bc + c] * (g[r * t.bc + c] - static_cast<T>(rho[r]));
      __syncthreads();
    });
    // ρ^{lev-1}: the row dots of g^{lev-1} with b^{lev-1} (summed in place from 0 likewise).
    sweep(h, gr, [&](const Tile& t, double* nextR) {
      backward_chain(h, gr, t, lev - 1, nextR, false, dc);
      const T* g = gr.g + (lev - 1) * kArea;
      const T* b = h.b + (lev - 1) * kArea;
      if (tid() < t.br) {
        const int64_t r = tid();
        double d = 0;
        for (int64_t c = 0; c < t.bc; ++c) d += static_cast<double>(g[r * t.bc + c] * b[r * t.bc + c]);
        gr.rho[(lev - 1) * n + t.j0 + r] += d;
      }
      __syncthreads();
    });
  }
  // ds = Σ_t dL^t + b^0 ⊙ (g^0 - ρ^0); dQ += scale ds K, dK += dsᵀ (scale Q), dV += b^Sᵀ dO.
  const T sc = static_cast<T>(a.scale);
  sweep(h, gr, [&](const Tile& t, double* nextR) {
    backward_chain(h, gr, t, 0, nextR, true, dc);
    const int64_t cells = t.br * t.bc;
    for (int64_t i = tid(); i < cells; i += nthreads()) {
      const int64_t r = i / t.bc;
      T d = h.b[i] * (gr.g[i] - static_cast<T>(gr.rho[t.j0 + r]));
      for (int lev = 1; lev <= h.S; ++lev) d += gr.dL[lev * kArea + i];
      h.ds[i] = d;
    }
    __syncthreads();
    if (gr.dq)
      tile_product(t.br, h.hs, t.bc, sc, h.ds, t.bc, int64_t{1}, h.k + t.k0 * h.hs, h.hs, int64_t{1}, true,
                   gr.dq + t.j0 * h.hs, h.hs);
    if (gr.dk)
      tile_product(t.bc, h.hs, t.br, T(1), h.ds, int64_t{1}, t.bc, h.q + t.j0 * h.hs, h.hs, int64_t{1}, true,
                   gr.dk + t.k0 * h.hs, h.hs);
    if (gr.dv)
      tile_product(t.bc, h.hs, t.br, T(1), h.b + h.S * kArea, int64_t{1}, t.bc, gr.dO + t.j0 * h.hs, h.hs,
                   int64_t{1}, true, gr.dv + t.k0 * h.hs, h.hs);
    __syncthreads();
  });
  if (tid() == 0) a.dc[bh] = dc;
}

}  // namespace

template <class T>
cudaError_t launch_attention_tiled_forward(const TiledArgs<T>& a, T* out) {
  tiled_forward_kernel<<<static_cast<unsigned>(a.tiles), kBlock>>>(a, out);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_attention_tiled_backward(const TiledArgs<T>& a) {
  tiled_backward_kernel<<<static_cast<unsigned>(a.tiles), kBlock>>>(a);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                          \
  template cudaError_t launch_attention_tiled_forward<T>(const TiledArgs<T>&, T*); \
  template cudaError_t launch_attention_tiled_backward<T>(const TiledArgs<T>&);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
