// SAOBP attention in O(T) memory: the FlashAttention idea applied to belief propagation
// (docs/saobp-gradients.md §10 derives it). No T×T tensor exists: every pass walks one head's
// score matrix in tiles of kBr query rows × kBc keys, recomputing s = scale·Q Kᵀ and the beliefs
// of the tile from vectors of length T that earlier passes left:
//   lse^τ_j   the log-sum-exp over the allowed keys of row j's logits at level τ (x^0 = s,
//             x^τ = s + G^τ), so b^τ_jk = exp(x^τ_jk - lse^τ_j) on the allowed entries;
//   C^τ_k     the column sum of the log-factors F^τ_ik = log(1 - c b^{τ-1}_ik) over the sender
//             rows (encoder: G^τ_jk = C^τ_k - F^τ_jk, every other token row sends);
//   P^τ_k     a causal decoder's running column sum of F^τ over the rows above the current block
//             (G^τ_jk = P^τ_k + the exclusive prefix of F^τ down the block's own rows: row j hears
//             rows i < j only, so nothing leaks);
// and, in the backward, ρ^t_j = <g^t_j, b^t_j> (the softmax backward's row dot at level t;
// ρ^S = dO_j · O_j), E^t_k = Σ_j dL^t_jk over all rows and a decoder's running prefix R^t_k of
// dL^t over the rows above the block (dF^t_ik = Σ_{j>i} dL^t_jk = E^t_k - R^t_k - the inclusive
// prefix inside the block).
//
// Passes per head (S = BP steps, 0 for original):
//   forward, encoder: for τ = 0..S the row statistics lse^τ, and between them C^{τ+1};
//     then O = Σ_k b^S_jk V_k.                                   2S + 2 sweeps of the tiles
//   forward, decoder: per query block, top down: lse^0..lse^S of its rows, then O of its rows
//     and P += the block's column sums (the rows below need only those).   S + 2 sweeps of a block
//   backward: ρ^S from dO and O; for t = S..1: E^t (a sweep), then ρ^{t-1} (a sweep); then a last
//     sweep that forms ds = Σ_t dL^t + b^0 ⊙ (g^0 - ρ^0) per tile and adds ds K into dQ, dsᵀ Q
//     into dK and b^Sᵀ dO into dV.                                2S + 1 sweeps
// Each head is walked by one thread in a fixed order (blocks top down, tiles left to right, rows
// in order inside a tile) and every running sum is a double, so results do not depend on the
// thread count; the column sums add rows in the order the materialized kernel adds them.
// Saved for the backward: lse (S+1, B, NH, T) and C (S, B, NH, T) (a decoder's totals, unused by
// its backward, which rebuilds the prefixes top down as the forward did).
//
// Memory: per thread a few kBr × kBc tiles per level; per head the vectors above. The
// materialized kernel (attention.cpp) keeps S + 1 maps of T×T per head for the backward, so this
// one is what makes long sequences fit: at T = 16384 one map of one head is 1 GiB in f32.
// CUDA twin: src/attention/cuda/tiled.cu.
#pragma GCC target("prefer-vector-width=512")
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/backend.h"
#include "attention/cpu/tile.h"
#include "tensor/cpu/common.h"
#include "tensor/cpu/tile_gemm.h"

namespace saobp::cpu {

using attn::TileMask;
using cpu::lane_max;
using cpu::lane_sum;

namespace {

constexpr int64_t kBr = 64, kBc = 64;

// One (batch, head): its inputs and the vectors the passes share.
template <class T>
struct Head {
  int64_t n = 0, hs = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  TileMask m;
  int S = 0;              // BP steps (0: original)
  T c = 0;                // the Potts constant
  bool all = true;        // every other token row sends (encoder, leaking decoder)
  T* lse = nullptr;       // (S+1, n): lse[τ n + j]
  T* col = nullptr;       // (S, n): C^τ at col[(τ-1) n + k]
  std::vector<double> P;  // (S, n) decoder: column sums of F^τ over the rows above the block
};

// The per-thread tiles of one (block, key tile): s, the logits x^τ and beliefs b^τ of every
// level, and in the backward g^t and dL^t.
template <class T>
struct Work {
  std::vector<T> s, x, b, g, dL, ds, tmp;
  std::vector<double> run;
  void ensure(int S) {
    const size_t t = static_cast<size_t>(kBr * kBc), L = static_cast<size_t>(S) + 1;
    for (auto* w : {&s, &ds, &tmp}) w->resize(t);
    for (auto* w : {&x, &b, &g, &dL}) w->resize(t * L);
    run.resize(static_cast<size_t>(kBc));
  }
};

struct Tile {
  int64_t j0, br, k0, bc;
};

// The allowed entries of a tile row: columns c < limit (a decoder's keys k <= j) whose key is a
// token (key: the tile's slice of the key mask, or null). Loops over a row select with these
// rather than calling TileMask::allowed, so they vectorize.
template <class T>
int64_t row_limit(const Head<T>& h, const Tile& t, int64_t r) {
  return h.m.causal ? std::clamp<int64_t>(t.j0 + r - t.k0 + 1, 0, t.bc) : t.bc;
}
template <class T>
const uint8_t* tile_keys(const Head<T>& h, const Tile& t) {
  return h.m.key ? h.m.key + t.k0 : nullptr;
}
// out[c] = allowed(c) ? value(c) : 0 for c < bc.
template <class T, class F>
void select_row(T* __restrict out, int64_t bc, int64_t limit, const uint8_t* __restrict key, F value) {
  if (key)
    for (int64_t c = 0; c < bc; ++c) {
      const T v = value(c);
      out[c] = c < limit && key[c] ? v : T(0);
    }
  else
    for (int64_t c = 0; c < bc; ++c) {
      const T v = value(c);
      out[c] = c < limit ? v : T(0);
    }
}

// s, then the beliefs b^0..b^{known-1} (their lse known) and the logits x^0..x^{min(known, S)} of
// the tile. A decoder's messages start from P (the rows above the block); with `next`, the
// running sums after the tile's last row go there (P of the next block).
template <class T>
void forward_chain(const Head<T>& h, const Tile& t, int known, const std::vector<double>* P,
                   std::vector<double>* next, Work<T>& w) {
  const int64_t br = t.br, bc = t.bc, area = kBr * kBc;
  T* s = w.s.data();
  tile_gemm(br, bc, h.hs, T(1), h.q + t.j0 * h.hs, false, h.k + t.k0 * h.hs, true, T(0), s);
  T* x0 = w.x.data();
  std::copy(s, s + br * bc, x0);
  const int top = std::min(known, h.S);
  for (int tau = 0; tau < known; ++tau) {
    const T* x = w.x.data() + tau * area;
    T* b = w.b.data() + tau * area;
    const T* lse = h.lse + tau * h.n;
    const uint8_t* key = tile_keys(h, t);
    for (int64_t r = 0; r < br; ++r) {
      const T l = lse[t.j0 + r];
      const T* __restrict xr = x + r * bc;
      if (l == -std::numeric_limits<T>::infinity()) {  // no allowed key in this row
        std::fill(b + r * bc, b + (r + 1) * bc, T(0));
        continue;
      }
      select_row(b + r * bc, bc, row_limit(h, t, r), key, [&](int64_t c) { return exp_approx(xr[c] - l); });
    }
    if (tau + 1 > top) continue;
    // x^{τ+1} = s + G^{τ+1}, G from F^{τ+1} = log(1 - c b^τ) of the sender rows.
    T* xn = w.x.data() + (tau + 1) * area;
    const T cc = h.c;
    T* __restrict F = w.tmp.data();
    if (h.all) {
      const T* __restrict C = h.col + tau * h.n + t.k0;
      for (int64_t r = 0; r < br; ++r) {
        const T* __restrict br_ = b + r * bc;
        const T* __restrict sr = s + r * bc;
        T* __restrict xr = xn + r * bc;
        if (h.m.sender(t.j0 + r))
          for (int64_t c = 0; c < bc; ++c) F[c] = log_approx(T(1) - cc * br_[c]);
        else
          std::fill(F, F + bc, T(0));
        for (int64_t c = 0; c < bc; ++c)
          xr[c] = sr[c] + static_cast<T>(static_cast<double>(C[c]) - static_cast<double>(F[c]));
      }
    } else {
      double* __restrict run = w.run.data();
      const double* p = P->data() + tau * h.n + t.k0;
      std::copy(p, p + bc, run);
      for (int64_t r = 0; r < br; ++r) {
        const T* __restrict br_ = b + r * bc;
        const T* __restrict sr = s + r * bc;
        T* __restrict xr = xn + r * bc;
        for (int64_t c = 0; c < bc; ++c) xr[c] = sr[c] + static_cast<T>(run[c]);
        if (!h.m.sender(t.j0 + r)) continue;
        for (int64_t c = 0; c < bc; ++c) F[c] = log_approx(T(1) - cc * br_[c]);
        for (int64_t c = 0; c < bc; ++c) run[c] += F[c];
      }
      if (next) std::copy(run, run + bc, next->data() + tau * h.n + t.k0);
    }
  }
}

// The key tiles a block reads: every key, or a decoder's keys up to the block's last row.
template <class T>
int64_t key_end(const Head<T>& h, int64_t j0, int64_t br) {
  return h.m.causal ? std::min(h.n, j0 + br) : h.n;
}

// Row statistics of level τ over every tile of the rows [j0, j0 + br): lse^τ.
template <class T>
void row_stats(Head<T>& h, int64_t j0, int64_t br, int tau, Work<T>& w) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  std::vector<double> mx(static_cast<size_t>(br), -std::numeric_limits<double>::infinity()),
      sum(static_cast<size_t>(br), 0.0);
  std::vector<uint8_t> nan(static_cast<size_t>(br), 0);
  const int64_t kend = key_end(h, j0, br);
  for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
    const Tile t{j0, br, k0, std::min(kBc, kend - k0)};
    forward_chain(h, t, tau, h.all ? nullptr : &h.P, nullptr, w);
    const T* x = w.x.data() + tau * kBr * kBc;
    const uint8_t* key = tile_keys(h, t);
    T* __restrict e = w.tmp.data();
    for (int64_t r = 0; r < br; ++r) {
      const T* __restrict xr = x + r * t.bc;
      const int64_t lim = row_limit(h, t, r);
      // The allowed entries' max (NaN skipped, and remembered), then their exps' sum.
      select_row(e, t.bc, lim, key, [&](int64_t c) { return xr[c]; });
      const auto allowed = [&](int64_t c) { return c < lim && (!key || key[c]); };
      const T m = lane_max(t.bc, [&](int64_t c) { return allowed(c) ? xr[c] : ninf; });
      bool any_nan = false;
      for (int64_t c = 0; c < t.bc; ++c) any_nan |= e[c] != e[c];
      nan[r] |= any_nan;
      if (m == ninf) continue;
      double& M = mx[r];
      double& Z = sum[r];
      if (m > M) {
        Z *= std::exp(M - static_cast<double>(m));
        M = m;
      }
      const T Mt = static_cast<T>(M);
      select_row(e, t.bc, lim, key, [&](int64_t c) { return exp_approx(xr[c] - Mt); });
      Z += lane_sum(t.bc, [&](int64_t c) { return e[c]; });
    }
  }
  T* lse = h.lse + tau * h.n;
  for (int64_t r = 0; r < br; ++r)
    lse[j0 + r] = nan[r]       ? std::numeric_limits<T>::quiet_NaN()
                  : sum[r] > 0 ? static_cast<T>(mx[r] + std::log(sum[r]))
                               : ninf;
}

template <class T>
void forward_head(Head<T>& h, T* out, Work<T>& w) {
  const int64_t n = h.n;
  auto output_block = [&](int64_t j0, int64_t br, std::vector<double>* next) {
    T* o = out + j0 * h.hs;
    std::fill(o, o + br * h.hs, T(0));
    const int64_t kend = key_end(h, j0, br);
    for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
      const Tile t{j0, br, k0, std::min(kBc, kend - k0)};
      forward_chain(h, t, h.S + 1, h.all ? nullptr : &h.P, next, w);
      const T* bS = w.b.data() + h.S * kBr * kBc;
      tile_gemm(br, h.hs, t.bc, T(1), bS, false, h.v + k0 * h.hs, false, T(1), o);  // O += b^S V
    }
  };
  if (h.all) {
    for (int tau = 0; tau <= h.S; ++tau) {
      for (int64_t j0 = 0; j0 < n; j0 += kBr) row_stats(h, j0, std::min(kBr, n - j0), tau, w);
      if (tau == h.S) break;
      // C^{τ+1}: the column sums of F^{τ+1} over the sender rows, top down.
      std::vector<double> C(static_cast<size_t>(n), 0.0);
      for (int64_t j0 = 0; j0 < n; j0 += kBr) {
        const int64_t br = std::min(kBr, n - j0);
        for (int64_t k0 = 0; k0 < n; k0 += kBc) {
          const Tile t{j0, br, k0, std::min(kBc, n - k0)};
          forward_chain(h, t, tau + 1, nullptr, nullptr, w);
          const T* b = w.b.data() + tau * kBr * kBc;
          for (int64_t r = 0; r < br; ++r) {
            if (!h.m.sender(j0 + r)) continue;
            for (int64_t c = 0; c < t.bc; ++c)
              C[static_cast<size_t>(k0 + c)] += log_approx(T(1) - h.c * b[r * t.bc + c]);
          }
        }
      }
      T* col = h.col + tau * n;
      for (int64_t k = 0; k < n; ++k) col[k] = static_cast<T>(C[static_cast<size_t>(k)]);
    }
    for (int64_t j0 = 0; j0 < n; j0 += kBr) output_block(j0, std::min(kBr, n - j0), nullptr);
    return;
  }
  // Decoder: block by block, top down; P holds the prefix of the rows above the block.
  h.P.assign(static_cast<size_t>(h.S * n), 0.0);
  std::vector<double> next(h.P.size(), 0.0);
  for (int64_t j0 = 0; j0 < n; j0 += kBr) {
    const int64_t br = std::min(kBr, n - j0);
    for (int tau = 0; tau <= h.S; ++tau) row_stats(h, j0, br, tau, w);
    next = h.P;  // keys past the block's rows keep their sums (those rows add 0 there)
    output_block(j0, br, &next);
    std::swap(h.P, next);
  }
  for (int tau = 0; tau < h.S; ++tau)
    for (int64_t k = 0; k < n; ++k)
      h.col[tau * n + k] = static_cast<T>(h.P[static_cast<size_t>(tau * n + k)]);
}

// ---- backward ---------------------------------------------------------------------------------

template <class T>
struct Grads {
  const T *dO = nullptr, *O = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::vector<double> rho;  // (S+1, n)
  std::vector<double> E;    // (S, n): E^t at [(t-1) n + k]
  std::vector<double> R;    // (S, n): decoder prefix of dL^t above the block
  double dc = 0;
};

// After forward_chain with every level: g^S = dO Vᵀ, then for t = S..lo+1 dL^t = b^t (g^t - ρ^t)
// and g^{t-1} = dF^t ⊙ (-c)/(1 - c b^{t-1}) on the sender rows, dF^t from E^t (and R^t, the
// running sum updated into `next` for a decoder). Needs ρ^t for t >= lo + 1... and ρ^lo only for
// dL^lo, which the caller forms. With `dc`, the ∂L/∂c terms of levels lo+1..S are added to it.
template <class T>
void backward_chain(const Head<T>& h, const Grads<T>& gr, const Tile& t, int lo, std::vector<double>* next,
                    double* dc, Work<T>& w) {
  const int64_t br = t.br, bc = t.bc, area = kBr * kBc;
  T* gS = w.g.data() + h.S * area;
  tile_gemm(br, bc, h.hs, T(1), gr.dO + t.j0 * h.hs, false, h.v + t.k0 * h.hs, true, T(0), gS);
  for (int lev = h.S; lev > lo; --lev) {
    const T* g = w.g.data() + lev * area;
    const T* b = w.b.data() + lev * area;
    const T* bp = w.b.data() + (lev - 1) * area;
    T* dL = w.dL.data() + lev * area;
    T* gp = w.g.data() + (lev - 1) * area;
    const double* rho = gr.rho.data() + lev * h.n + t.j0;
    for (int64_t r = 0; r < br; ++r) {
      const T rr = static_cast<T>(rho[r]);
      for (int64_t c = 0; c < bc; ++c) dL[r * bc + c] = b[r * bc + c] * (g[r * bc + c] - rr);
    }
    const double* E = gr.E.data() + (lev - 1) * h.n + t.k0;
    double* run = w.run.data();
    if (!h.all)
      std::copy(gr.R.data() + (lev - 1) * h.n + t.k0, gr.R.data() + (lev - 1) * h.n + t.k0 + bc, run);
    const T cc = h.c;
    T* __restrict dF = w.tmp.data();
    T* __restrict term = w.ds.data();  // free until the caller forms ds
    double acc = 0;
    for (int64_t r = 0; r < br; ++r) {
      const T* __restrict dLr = dL + r * bc;
      if (h.all) {
        for (int64_t c = 0; c < bc; ++c) dF[c] = static_cast<T>(E[c] - static_cast<double>(dLr[c]));
      } else {  // inclusive prefix: dF_ik = Σ_{j > i} dL_jk = E_k - Σ_{j <= i} dL_jk
        for (int64_t c = 0; c < bc; ++c) run[c] += dLr[c];
        for (int64_t c = 0; c < bc; ++c) dF[c] = static_cast<T>(E[c] - run[c]);
      }
      T* __restrict gpr = gp + r * bc;
      if (!h.m.sender(t.j0 + r)) {
        std::fill(gpr, gpr + bc, T(0));
        continue;
      }
      const T* __restrict bpr = bp + r * bc;
      for (int64_t c = 0; c < bc; ++c) {
        const T den = T(1) - cc * bpr[c];
        gpr[c] = dF[c] * -cc / den;
        term[c] = dF[c] * -bpr[c] / den;
      }
      if (dc) acc += lane_sum(bc, [&](int64_t c) { return term[c]; });
    }
    if (dc) *dc += acc;
    if (!h.all && next) std::copy(run, run + bc, next->data() + (lev - 1) * h.n + t.k0);
  }
}

template <class T>
void backward_head(Head<T>& h, Grads<T>& gr, T scale, Work<T>& w) {
  const int64_t n = h.n, area = kBr * kBc;
  gr.rho.assign(static_cast<size_t>((h.S + 1) * n), 0.0);
  gr.E.assign(static_cast<size_t>(h.S * n), 0.0);
  gr.R.assign(static_cast<size_t>(h.S * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {  // ρ^S_j = <dB_j, B_j> = dO_j · O_j
    double d = 0;
    for (int64_t e = 0; e < h.hs; ++e)
      d += static_cast<double>(gr.dO[j * h.hs + e]) * static_cast<double>(gr.O[j * h.hs + e]);
    gr.rho[static_cast<size_t>(h.S * n + j)] = d;
  }
  // One top-down sweep: fn(tile) after the forward chain, with a decoder's P and R advanced
  // block by block (the rows below a block need only the block's column sums).
  auto sweep = [&](int lo, auto fn) {
    if (!h.all) {
      h.P.assign(static_cast<size_t>(h.S * n), 0.0);
      gr.R.assign(static_cast<size_t>(h.S * n), 0.0);
    }
    std::vector<double> nextP, nextR;
    for (int64_t j0 = 0; j0 < n; j0 += kBr) {
      const int64_t br = std::min(kBr, n - j0);
      if (!h.all) nextP = h.P, nextR = gr.R;
      const int64_t kend = key_end(h, j0, br);
      for (int64_t k0 = 0; k0 < kend; k0 += kBc) {
        const Tile t{j0, br, k0, std::min(kBc, kend - k0)};
        forward_chain(h, t, h.S + 1, h.all ? nullptr : &h.P, h.all ? nullptr : &nextP, w);
        fn(t, lo, h.all ? nullptr : &nextR);
      }
      if (!h.all) std::swap(h.P, nextP), std::swap(gr.R, nextR);
    }
  };
  for (int lev = h.S; lev >= 1; --lev) {
    // E^lev: the column sums of dL^lev over every row.
    std::vector<double> E(static_cast<size_t>(n), 0.0);
    sweep(lev, [&](const Tile& t, int lo, std::vector<double>* nextR) {
      backward_chain(h, gr, t, lo, nextR, nullptr, w);
      const T* g = w.g.data() + lev * area;
      const T* b = w.b.data() + lev * area;
      const double* rho = gr.rho.data() + lev * n + t.j0;
      for (int64_t r = 0; r < t.br; ++r) {
        const T rr = static_cast<T>(rho[r]);
        for (int64_t c = 0; c < t.bc; ++c)
          E[static_cast<size_t>(t.k0 + c)] += b[r * t.bc + c] * (g[r * t.bc + c] - rr);
      }
    });
    std::copy(E.begin(), E.end(), gr.E.begin() + (lev - 1) * n);
    // ρ^{lev-1}: the row dots of g^{lev-1} with b^{lev-1}.
    std::vector<double> rho(static_cast<size_t>(n), 0.0);
    sweep(lev - 1, [&](const Tile& t, int lo, std::vector<double>* nextR) {
      backward_chain(h, gr, t, lo, nextR, nullptr, w);
      const T* g = w.g.data() + (lev - 1) * area;
      const T* b = w.b.data() + (lev - 1) * area;
      for (int64_t r = 0; r < t.br; ++r)
        rho[static_cast<size_t>(t.j0 + r)] +=
            lane_sum(t.bc, [&](int64_t c) { return g[r * t.bc + c] * b[r * t.bc + c]; });
    });
    std::copy(rho.begin(), rho.end(), gr.rho.begin() + (lev - 1) * n);
  }
  // ds = Σ_t dL^t + b^0 ⊙ (g^0 - ρ^0); dQ += scale ds K, dK += scale dsᵀ Q, dV += b^Sᵀ dO.
  sweep(0, [&](const Tile& t, int lo, std::vector<double>* nextR) {
    backward_chain(h, gr, t, lo, nextR, &gr.dc, w);
    T* ds = w.ds.data();
    const T* g0 = w.g.data();
    const T* b0 = w.b.data();
    const double* rho0 = gr.rho.data() + t.j0;
    for (int64_t r = 0; r < t.br; ++r) {
      const T rr = static_cast<T>(rho0[r]);
      for (int64_t c = 0; c < t.bc; ++c) ds[r * t.bc + c] = b0[r * t.bc + c] * (g0[r * t.bc + c] - rr);
    }
    for (int lev = 1; lev <= h.S; ++lev) {
      const T* dL = w.dL.data() + lev * area;
      for (int64_t i = 0; i < t.br * t.bc; ++i) ds[i] += dL[i];
    }
    if (gr.dq)
      tile_gemm(t.br, h.hs, t.bc, scale, ds, false, h.k + t.k0 * h.hs, false, T(1), gr.dq + t.j0 * h.hs);
    if (gr.dk)  // h.q is scale·Q already: dK += scale dsᵀ Q = dsᵀ (scale Q)
      tile_gemm(t.bc, h.hs, t.br, T(1), ds, true, h.q + t.j0 * h.hs, false, T(1), gr.dk + t.k0 * h.hs);
    if (gr.dv)
      tile_gemm(t.bc, h.hs, t.br, T(1), w.b.data() + h.S * area, true, gr.dO + t.j0 * h.hs, false, T(1),
                gr.dv + t.k0 * h.hs);
  });
}

// The head (b, h) of a call: q is read pre-scaled (scale folded into a copy of Q's head), so the
// tiles' s = Q Kᵀ needs no multiply.
template <class T>
Head<T> make_head(const AttnDims& d, const AttnParams& p, const std::vector<double>& lam, const T* qs,
                  const T* kp, const T* vp, const uint8_t* km, T* lse, T* col, int64_t bh) {
  const int64_t b = bh / d.NH, hh = bh % d.NH, QS = d.T * d.HS;
  Head<T> h;
  h.n = d.T, h.hs = d.HS;
  h.q = qs, h.k = kp + bh * QS, h.v = vp + bh * QS;
  h.m = TileMask{d.T, km ? km + b * d.T : nullptr, p.causal, p.leak};
  const bool bp = uses_lambda(p.variant);
  h.S = bp ? p.steps : 0;
  h.c = bp ? static_cast<T>(attn::potts_c(p.variant == AttnVariant::bp_high, lam[static_cast<size_t>(hh)]))
           : T(0);
  h.all = !p.causal || p.leak;
  h.lse = lse;  // (S+1, T) and (S, T) of this head: the caller gathers and scatters them
  h.col = col;
  return h;
}

// The saved vectors of head bh live at [level][bh][j] in the (L, B, NH, T) tensors; a head works
// on a contiguous (L, T) copy and writes it back.
template <class T>
void gather(const T* src, T* dst, int levels, int64_t bh, int64_t tiles, int64_t n) {
  for (int l = 0; l < levels; ++l)
    std::copy(src + (l * tiles + bh) * n, src + (l * tiles + bh + 1) * n, dst + l * n);
}
template <class T>
void scatter(const T* src, T* dst, int levels, int64_t bh, int64_t tiles, int64_t n) {
  for (int l = 0; l < levels; ++l) std::copy(src + l * n, src + (l + 1) * n, dst + (l * tiles + bh) * n);
}

template <class T>
void tiled_forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                     const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse, Tensor& colsum) {
  const AttnDims d = attn_dims(q);
  const int64_t tiles = d.B * d.NH, QS = d.T * d.HS;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const int S = uses_lambda(p.variant) ? p.steps : 0;
  const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>();
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  T* op = out.data<T>();
  T* lp = lse.data<T>();
  T* cp = colsum.defined() ? colsum.data<T>() : nullptr;
  const T sc = static_cast<T>(p.scale);
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    Work<T> w;
    w.ensure(S);
    std::vector<T> qs(static_cast<size_t>(QS)), hl(static_cast<size_t>((S + 1) * d.T)),
        hc(static_cast<size_t>(std::max(S, 1) * d.T));
    for (int64_t bh = t0; bh < t1; ++bh) {
      for (int64_t i = 0; i < QS; ++i) qs[static_cast<size_t>(i)] = sc * qp[bh * QS + i];
      Head<T> h = make_head(d, p, lam, qs.data(), kp, vp, km, hl.data(), hc.data(), bh);
      forward_head(h, op + bh * QS, w);
      scatter(hl.data(), lp, S + 1, bh, tiles, d.T);
      if (cp) scatter(hc.data(), cp, S, bh, tiles, d.T);
    }
  });
}

template <class T>
void tiled_backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                      const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                      const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                      Tensor& glambda) {
  const AttnDims d = attn_dims(q);
  const int64_t tiles = d.B * d.NH, QS = d.T * d.HS;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const bool bp = uses_lambda(p.variant);
  const int S = bp ? p.steps : 0;
  const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *op = out.data<T>(), *gp = gout.data<T>();
  const T* lp = lse.data<T>();
  const T* cp = colsum.defined() ? colsum.data<T>() : nullptr;
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  T* gqp = gq.defined() ? gq.data<T>() : nullptr;
  T* gkp = gk.defined() ? gk.data<T>() : nullptr;
  T* gvp = gv.defined() ? gv.data<T>() : nullptr;
  const T sc = static_cast<T>(p.scale);
  std::vector<double> dlam(static_cast<size_t>(tiles), 0.0);  // per head, summed over b in order below
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    Work<T> w;
    w.ensure(S);
    std::vector<T> qs(static_cast<size_t>(QS)), hl(static_cast<size_t>((S + 1) * d.T)),
        hc(static_cast<size_t>(std::max(S, 1) * d.T)), dqs(static_cast<size_t>(QS));
    for (int64_t bh = t0; bh < t1; ++bh) {
      for (int64_t i = 0; i < QS; ++i) qs[static_cast<size_t>(i)] = sc * qp[bh * QS + i];
      gather(lp, hl.data(), S + 1, bh, tiles, d.T);
      if (cp) gather(cp, hc.data(), S, bh, tiles, d.T);
      Head<T> h = make_head(d, p, lam, qs.data(), kp, vp, km, hl.data(), hc.data(), bh);
      Grads<T> gr;
      gr.dO = gp + bh * QS, gr.O = op + bh * QS;
      gr.dq = gqp ? gqp + bh * QS : nullptr;
      gr.dk = gkp ? gkp + bh * QS : nullptr;
      gr.dv = gvp ? gvp + bh * QS : nullptr;
      backward_head(h, gr, sc, w);
      if (bp)
        dlam[static_cast<size_t>(bh)] = gr.dc * attn::potts_dc_dlambda(p.variant == AttnVariant::bp_high,
                                                                       lam[static_cast<size_t>(bh % d.NH)]);
    }
  });
  if (glambda.defined() && bp) attn::add_lambda_grad(dlam, d.B, d.NH, glambda.data<T>());
}

}  // namespace

void attention_tiled_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                             const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse,
                             Tensor& colsum) {
  dispatch_float(q.dtype(), "attention_tiled", [&](auto tag) {
    tiled_forward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, lse, colsum);
  });
}

void attention_tiled_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                              const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                              const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                              Tensor& glambda) {
  dispatch_float(q.dtype(), "attention_tiled_backward", [&](auto tag) {
    tiled_backward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, lse, colsum, gout, gq, gk, gv,
                                    glambda);
  });
}

}  // namespace saobp::cpu
