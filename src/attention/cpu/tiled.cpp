// SAOBP attention in O(T) memory: the FlashAttention idea applied to belief propagation
// (docs/saobp-gradients.md §10 derives it). No T×T tensor exists: every pass walks one head's
// score matrix in tiles of kBr query rows × kBc keys, recomputing s = scale·Q Kᵀ and the beliefs
// of the tile from vectors of length T that earlier passes left:
//   lse^τ_j   the log-sum-exp over the allowed keys of row j's logits at level τ (x^0 = s,
//             x^τ = s + G^τ), so b^τ_jk = exp(x^τ_jk - lse^τ_j) on the allowed entries;
//   C^τ_k     the column sum of the log-factors F^τ_ik = log(1 - c b^{τ-1}_ik) over the sender
//             rows (encoder: G^τ_jk = C^τ_k - F^τ_jk, every other token row sends);
//   P^τ_k(J)  a causal decoder's column sum of F^τ over the rows above query block J
//             (G^τ_jk = P^τ_k(J) + the exclusive prefix of F^τ down the block's own rows: row j
//             hears rows i < j only, so nothing leaks);
// and, in the backward, ρ^t_j = <g^t_j, b^t_j> (the softmax backward's row dot at level t;
// ρ^S = dO_j · O_j), E^t_k = Σ_j dL^t_jk over all rows and a decoder's prefix R^t_k(J) of dL^t
// over the rows above the block (dF^t_ik = Σ_{j>i} dL^t_jk = E^t_k - R^t_k(J) - the inclusive
// prefix inside the block).
//
// Every column sum is made of parts: query block J's part sums its own rows in order (a double),
// and combine adds the parts in block order (the total C or E, and the prefixes P(J) or R(J) on
// the way). Row statistics belong to their query block. So the passes run in either of two
// schedules with the same bits (§10.4, TiledSchedule in kernels.h):
//   by blocks (the CUDA twin's; here when a call has fewer heads than threads): each pass is a
//     parallel loop over (head, query block) items:
//     forward: for τ = 0..S, lse^τ, and between two levels the parts of C^{τ+1} (a decoder's
//       P^{τ+1}) combined; then O = Σ_k b^S_jk V_k.                            2S + 2 passes
//     backward: a decoder's P rebuilt (S passes); ρ^S from dO and O; for t = S..1: E^t's parts
//       combined (a decoder's R^t the prefixes), then ρ^{t-1}; then dQ row-owned (each query
//       block over its key tiles) with ∂L/∂c of the block's rows, and dK, dV column-owned
//       (each key block over the query blocks that read it, top down).   2S + 2 passes (+ S)
//   by heads (one thread per head, query blocks top down): a decoder's forward makes P(J+1)
//     in block J's output sweep (S + 2 sweeps of a block), its backward rebuilds P in the first
//     E sweep, and the last step is one sweep into dQ, dK and dV (each dK row still gets the
//     query blocks' terms top down).                                        2S + 1 backward
// Nothing depends on the thread count: an item's result depends only on its inputs.
// Saved for the backward: lse (S+1, B, NH, T) and C (S, B, NH, T) (a decoder's totals, unused by
// its backward, which rebuilds the prefixes).
//
// Memory: per thread a few kBr × kBc tiles per level; per head the vectors above, and in a call
// the blocks' parts (a decoder's prefix table is (T/64) × T doubles per level and head: scratch
// of the call, never kept). The materialized kernel (attention.cpp) keeps S + 1 maps of T×T per
// head for the backward, so this one is what makes long sequences fit: at T = 16384 one map of
// one head is 1 GiB in f32. CUDA twin: src/attention/cuda/tiled.cu.
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

struct Tile {
  int64_t j0, br, k0, bc;
};

// One (batch, head): its inputs, the vectors of the call it reads and writes, and a decoder's
// prefix table.
template <class T>
struct Head {
  int64_t n = 0, hs = 0, nb = 0, levels = 0;         // nb: query blocks; levels: stride of lse's levels
  const T *q = nullptr, *k = nullptr, *v = nullptr;  // q: scale·Q of this head
  TileMask m;
  int S = 0;            // BP steps (0: original)
  T c = 0;              // the Potts constant
  bool all = true;      // every other token row sends (encoder, leaking decoder)
  T* lse = nullptr;     // lse^τ_j at lse[τ levels + j]
  T* col = nullptr;     // C^τ_k at col[(τ-1) levels + k]
  double* P = nullptr;  // decoder (nb, S, n): P^τ_k of query block qb at P[(qb S + τ-1) n + k]

  int64_t rows(int64_t qb) const { return std::min(kBr, n - qb * kBr); }
  // The keys a query block reads: every key, or a decoder's keys up to the block's last row.
  int64_t key_end(int64_t qb) const { return m.causal ? std::min(n, qb * kBr + rows(qb)) : n; }
  // The tile of query block qb and the keys from k0 (clipped at the block's key end).
  Tile tile(int64_t qb, int64_t k0) const {
    return {qb * kBr, rows(qb), k0, std::min(kBc, key_end(qb) - k0)};
  }
  const double* prefix(int64_t qb) const { return all ? nullptr : P + qb * S * n; }
};

// The per-thread tiles of one (block, key tile): s, the logits x^τ and beliefs b^τ of every
// level, and in the backward g^t and dL^t.
template <class T>
struct Work {
  std::vector<T> s, x, b, g, dL, ds, tmp;
  std::vector<double> run, acc;
  void ensure(int S) {
    const size_t t = static_cast<size_t>(kBr * kBc), L = static_cast<size_t>(S) + 1;
    for (auto* w : {&s, &ds, &tmp}) w->resize(t);
    for (auto* w : {&x, &b, &g, &dL}) w->resize(t * L);
    run.resize(static_cast<size_t>(kBc));
    acc.resize(static_cast<size_t>(2 * kBr));
  }
};

// f(item, work) for every item in [0, n), in parallel: each item is one (head, block) whose
// result depends on nothing but its inputs, so no bit depends on which thread runs it.
template <class T, class F>
void each(int64_t n, int S, F&& f) {
  std::vector<Work<T>> pool(static_cast<size_t>(std::max(omp_get_max_threads(), 1)));
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    Work<T>& w = pool[static_cast<size_t>(omp_get_thread_num())];
    if (w.s.empty()) w.ensure(S);
    for (int64_t i = i0; i < i1; ++i) f(i, w);
  });
}

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
// the tile. A decoder's messages start from P, the (S, n) prefixes of the tile's query block.
template <class T>
void forward_chain(const Head<T>& h, const Tile& t, int known, const double* P, Work<T>& w) {
  const int64_t br = t.br, bc = t.bc, area = kBr * kBc;
  T* s = w.s.data();
  tile_gemm(br, bc, h.hs, T(1), h.q + t.j0 * h.hs, false, h.k + t.k0 * h.hs, true, T(0), s);
  T* x0 = w.x.data();
  std::copy(s, s + br * bc, x0);
  const int top = std::min(known, h.S);
  for (int tau = 0; tau < known; ++tau) {
    const T* x = w.x.data() + tau * area;
    T* b = w.b.data() + tau * area;
    const T* lse = h.lse + tau * h.levels;
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
      const T* __restrict C = h.col + tau * h.levels + t.k0;
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
      const double* p = P + tau * h.n + t.k0;
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
    }
  }
}

// Row statistics of level τ of query block qb over every key tile: lse^τ of its rows.
template <class T>
void row_stats(const Head<T>& h, int64_t qb, int tau, Work<T>& w) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t br = h.rows(qb), j0 = qb * kBr;
  double* mx = w.acc.data();
  double* sum = mx + kBr;
  std::fill(mx, mx + br, -std::numeric_limits<double>::infinity());
  std::fill(sum, sum + br, 0.0);
  uint8_t nan[kBr] = {};
  for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
    const Tile t = h.tile(qb, k0);
    forward_chain(h, t, tau, h.prefix(qb), w);
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
  T* lse = h.lse + tau * h.levels;
  for (int64_t r = 0; r < br; ++r)
    lse[j0 + r] = nan[r]       ? std::numeric_limits<T>::quiet_NaN()
                  : sum[r] > 0 ? static_cast<T>(mx[r] + std::log(sum[r]))
                               : ninf;
}

// part[k] = Σ over the sender rows of query block qb, in order, of F^{τ+1}_ik = log(1 - c b^τ_ik)
// (0 past a decoder block's keys). part: (n)
// After a tile's forward chain down to level τ or further: its rows' terms of that part.
template <class T>
void add_column_part(const Head<T>& h, const Tile& t, int tau, double* part, const Work<T>& w) {
  const T* b = w.b.data() + tau * kBr * kBc;
  double* __restrict pk = part + t.k0;
  for (int64_t r = 0; r < t.br; ++r) {
    if (!h.m.sender(t.j0 + r)) continue;
    const T* __restrict brow = b + r * t.bc;
    for (int64_t c = 0; c < t.bc; ++c) pk[c] += log_approx(T(1) - h.c * brow[c]);
  }
}
template <class T>
void column_part(const Head<T>& h, int64_t qb, int tau, double* part, Work<T>& w) {
  std::fill(part, part + h.n, 0.0);
  for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
    const Tile t = h.tile(qb, k0);
    forward_chain(h, t, tau + 1, h.prefix(qb), w);
    add_column_part(h, t, tau, part, w);
  }
}

// A decoder's P table advanced past query block qb, whose parts of every level are part (S, n):
// P[qb+1] = P[qb] + part, as combine makes it (P[0] = 0); after the last block the totals go to
// col when `save` (the forward).
template <class T>
void advance_prefix(const Head<T>& h, int64_t qb, const double* part, bool save) {
  const int64_t SN = h.S * h.n;
  const double* cur = h.P + qb * SN;
  for (int64_t i = 0; i < SN; ++i) {
    const double total = cur[i] + part[i];
    if (qb + 1 < h.nb)
      h.P[(qb + 1) * SN + i] = total;
    else if (save)
      h.col[i / h.n * h.levels + i % h.n] = static_cast<T>(total);
  }
}

// The blocks' column parts of one head combined, block by block in order: total[k] = Σ_qb
// part[qb][k]; with `prefix`, each part becomes the sum of the parts above it (the exclusive
// prefix a decoder's query block starts from). part[qb][k] at part[qb stride + k].
inline void combine(double* part, int64_t stride, int64_t nb, int64_t n, bool prefix, double* total) {
  for (int64_t k = 0; k < n; ++k) {
    double run = 0;
    for (int64_t qb = 0; qb < nb; ++qb) {
      double& x = part[qb * stride + k];
      const double add = x;
      if (prefix) x = run;
      run += add;
    }
    total[k] = run;
  }
}

// The per-head tables of a call, besides the heads' lse and colsum: a decoder's prefix table P
// (nb, S, n) per head, or an encoder's block parts (nb, n) per head, for one level at a time.
template <class T>
struct Tables {
  int64_t nb = 0, per_head = 0;
  std::vector<double> cells, total;
  Tables(int64_t tiles, int64_t nb_, int64_t n, int S, bool all)
      : nb(nb_),
        per_head(nb_ * (all ? 1 : S) * n),
        cells(static_cast<size_t>(tiles * per_head)),
        total(static_cast<size_t>(tiles * n)) {}
  // Where block qb of head bh keeps its part of level index lvl (τ - 1), and the stride between
  // the blocks' parts.
  double* part(const Head<T>& h, int64_t bh, int64_t qb, int lvl) {
    return cells.data() + bh * per_head + (h.all ? qb * h.n : (qb * h.S + lvl) * h.n);
  }
  int64_t stride(const Head<T>& h) const { return h.all ? h.n : h.S * h.n; }
};

// The column sums C^{τ+1} of every head from its lse^0..lse^τ: each query block's part, then the
// parts combined. A decoder's P^{τ+1} prefixes are left in its table; the totals go to col when
// `save` (the forward; the backward only rebuilds P).
template <class T>
void column_sums(std::vector<Head<T>>& heads, Tables<T>& tab, int tau, bool save) {
  const auto tiles = static_cast<int64_t>(heads.size());
  const int S = heads[0].S;
  each<T>(tiles * tab.nb, S, [&](int64_t i, Work<T>& w) {
    const int64_t bh = i / tab.nb, qb = i % tab.nb;
    column_part(heads[static_cast<size_t>(bh)], qb, tau,
                tab.part(heads[static_cast<size_t>(bh)], bh, qb, tau), w);
  });
  parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t bh = b0; bh < b1; ++bh) {
      const Head<T>& h = heads[static_cast<size_t>(bh)];
      double* total = tab.total.data() + bh * h.n;
      combine(tab.part(h, bh, 0, tau), tab.stride(h), tab.nb, h.n, !h.all, total);
      if (save || h.all)  // an encoder's chain reads C from col
        for (int64_t k = 0; k < h.n; ++k) h.col[tau * h.levels + k] = static_cast<T>(total[k]);
    }
  });
}

// A decoder's query blocks top down, one thread per head (the schedule by heads): block(h, bh,
// qb, parts, w) adds the block's column parts of every level into parts (S, n), zeroed before
// each block, and then P of the next block is advanced from them (advance_prefix; the totals go
// to col when save).
template <class T, class F>
void walk_prefixes(std::vector<Head<T>>& heads, bool save, F block) {
  const int S = heads[0].S;
  const int64_t n = heads[0].n, nb = heads[0].nb;
  parallel_for(static_cast<int64_t>(heads.size()), 1, [&](int64_t b0, int64_t b1) {
    Work<T> w;
    w.ensure(S);
    std::vector<double> parts(static_cast<size_t>(S * n));
    for (int64_t bh = b0; bh < b1; ++bh) {
      const Head<T>& h = heads[static_cast<size_t>(bh)];
      std::fill(h.P, h.P + S * n, 0.0);
      for (int64_t qb = 0; qb < nb; ++qb) {
        std::fill(parts.begin(), parts.end(), 0.0);
        block(h, bh, qb, parts.data(), w);
        advance_prefix(h, qb, parts.data(), save);
      }
    }
  });
}

// O of query block qb = Σ over its key tiles of b^S V; with parts, the block's column parts of
// every level (S, n) are added there on the way (the chains make every b^τ).
template <class T>
void output_block(const Head<T>& h, int64_t qb, T* out, double* parts, Work<T>& w) {
  T* o = out + qb * kBr * h.hs;
  std::fill(o, o + h.rows(qb) * h.hs, T(0));
  for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
    const Tile t = h.tile(qb, k0);
    forward_chain(h, t, h.S + 1, h.prefix(qb), w);
    if (parts)
      for (int tau = 0; tau < h.S; ++tau) add_column_part(h, t, tau, parts + tau * h.n, w);
    const T* bS = w.b.data() + h.S * kBr * kBc;
    tile_gemm(t.br, h.hs, t.bc, T(1), bS, false, h.v + k0 * h.hs, false, T(1), o);  // O += b^S V
  }
}

// The forward. By blocks: for τ = 0..S the row statistics lse^τ of every query block, and
// between them the column sums C^{τ+1} (parts, then combined): 2S + 2 passes. By heads, a
// decoder's query blocks go top down, each block's lse^0..lse^S and then its output, whose
// chains give the block's column parts for P of the next block: S + 2 sweeps of a block.
template <class T>
void forward_all(std::vector<Head<T>>& heads, Tables<T>& tab, T* out, bool by_head) {
  const auto tiles = static_cast<int64_t>(heads.size());
  const int S = heads[0].S;
  const int64_t nb = tab.nb, n = heads[0].n, hs = heads[0].hs;
  if (by_head && !heads[0].all) {
    walk_prefixes(heads, true, [&](const Head<T>& h, int64_t bh, int64_t qb, double* parts, Work<T>& w) {
      for (int tau = 0; tau <= S; ++tau) row_stats(h, qb, tau, w);
      output_block(h, qb, out + bh * n * hs, parts, w);
    });
    return;
  }
  for (int tau = 0; tau <= S; ++tau) {
    each<T>(tiles * nb, S,
            [&](int64_t i, Work<T>& w) { row_stats(heads[static_cast<size_t>(i / nb)], i % nb, tau, w); });
    if (tau < S) column_sums(heads, tab, tau, true);
  }
  each<T>(tiles * nb, S, [&](int64_t i, Work<T>& w) {
    output_block(heads[static_cast<size_t>(i / nb)], i % nb, out + i / nb * n * hs, nullptr, w);
  });
}

// ---- backward ---------------------------------------------------------------------------------

// The backward's vectors of one head.
template <class T>
struct Grads {
  const T *dO = nullptr, *O = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  double* rho = nullptr;  // (S+1, n)
  double* E = nullptr;    // (S, n): E^t at [(t-1) n + k]
  double* R = nullptr;  // decoder (nb, S, n): the prefix of dL^t above query block qb at [(qb S + t-1) n + k]
  double* dc = nullptr;  // (nb): ∂L/∂c of each query block's rows
  const double* prefix(const Head<T>& h, int64_t qb) const { return h.all ? nullptr : R + qb * h.S * h.n; }
};

// After forward_chain with every level: g^S = dO Vᵀ, then for t = S..lo+1 dL^t = b^t (g^t - ρ^t)
// and g^{t-1} = dF^t ⊙ (-c)/(1 - c b^{t-1}) on the sender rows, dF^t from E^t (a decoder's from
// R, the prefixes of its query block, and the running sum down the tile's rows). Needs ρ^t for
// t >= lo + 1. With `dc`, the ∂L/∂c terms of levels lo+1..S are added to it.
template <class T>
void backward_chain(const Head<T>& h, const Grads<T>& gr, const Tile& t, int lo, const double* R, double* dc,
                    Work<T>& w) {
  const int64_t br = t.br, bc = t.bc, area = kBr * kBc;
  T* gS = w.g.data() + h.S * area;
  tile_gemm(br, bc, h.hs, T(1), gr.dO + t.j0 * h.hs, false, h.v + t.k0 * h.hs, true, T(0), gS);
  for (int lev = h.S; lev > lo; --lev) {
    const T* g = w.g.data() + lev * area;
    const T* b = w.b.data() + lev * area;
    const T* bp = w.b.data() + (lev - 1) * area;
    T* dL = w.dL.data() + lev * area;
    T* gp = w.g.data() + (lev - 1) * area;
    const double* rho = gr.rho + lev * h.n + t.j0;
    for (int64_t r = 0; r < br; ++r) {
      const T rr = static_cast<T>(rho[r]);
      for (int64_t c = 0; c < bc; ++c) dL[r * bc + c] = b[r * bc + c] * (g[r * bc + c] - rr);
    }
    const double* E = gr.E + (lev - 1) * h.n + t.k0;
    double* run = w.run.data();
    if (!h.all) std::copy(R + (lev - 1) * h.n + t.k0, R + (lev - 1) * h.n + t.k0 + bc, run);
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
  }
}

// Both chains of a tile of query block qb, the backward's down to level lo.
template <class T>
void chains(const Head<T>& h, const Grads<T>& gr, int64_t qb, const Tile& t, int lo, double* dc, Work<T>& w) {
  forward_chain(h, t, h.S + 1, h.prefix(qb), w);
  backward_chain(h, gr, t, lo, gr.prefix(h, qb), dc, w);
}

// dL^lev = b^lev ⊙ (g^lev - ρ^lev) of the tile after its chains down to lev; part[k0 + c] gets
// its column sums, rows in order.
template <class T>
void dL_part(const Head<T>& h, const Grads<T>& gr, const Tile& t, int lev, double* part, const Work<T>& w) {
  const int64_t area = kBr * kBc;
  const T* g = w.g.data() + lev * area;
  const T* b = w.b.data() + lev * area;
  const double* rho = gr.rho + lev * h.n + t.j0;
  double* __restrict pk = part + t.k0;
  for (int64_t r = 0; r < t.br; ++r) {
    const T rr = static_cast<T>(rho[r]);
    for (int64_t c = 0; c < t.bc; ++c) pk[c] += b[r * t.bc + c] * (g[r * t.bc + c] - rr);
  }
}

// ds = Σ_t dL^t + b^0 ⊙ (g^0 - ρ^0) of the tile after its chains down to level 0.
template <class T>
void form_ds(const Head<T>& h, const Grads<T>& gr, const Tile& t, Work<T>& w) {
  const int64_t area = kBr * kBc;
  T* ds = w.ds.data();
  const T* g0 = w.g.data();
  const T* b0 = w.b.data();
  const double* rho0 = gr.rho + t.j0;
  for (int64_t r = 0; r < t.br; ++r) {
    const T rr = static_cast<T>(rho0[r]);
    for (int64_t c = 0; c < t.bc; ++c) ds[r * t.bc + c] = b0[r * t.bc + c] * (g0[r * t.bc + c] - rr);
  }
  for (int lev = 1; lev <= h.S; ++lev) {
    const T* dL = w.dL.data() + lev * area;
    for (int64_t i = 0; i < t.br * t.bc; ++i) ds[i] += dL[i];
  }
}

// The gradient products of a tile after its chains down to level 0: dQ += scale ds K (with dq),
// dK += scale dsᵀ Q (h.q is scale·Q already) and dV += b^Sᵀ dO (with dkv).
template <class T>
void grad_products(const Head<T>& h, const Grads<T>& gr, const Tile& t, T scale, bool dq, bool dkv,
                   Work<T>& w) {
  dq = dq && gr.dq;
  const bool dk = dkv && gr.dk, dv = dkv && gr.dv;
  if (dq || dk) form_ds(h, gr, t, w);
  if (dq)
    tile_gemm(t.br, h.hs, t.bc, scale, w.ds.data(), false, h.k + t.k0 * h.hs, false, T(1),
              gr.dq + t.j0 * h.hs);
  if (dk)
    tile_gemm(t.bc, h.hs, t.br, T(1), w.ds.data(), true, h.q + t.j0 * h.hs, false, T(1), gr.dk + t.k0 * h.hs);
  if (dv)
    tile_gemm(t.bc, h.hs, t.br, T(1), w.b.data() + h.S * kBr * kBc, true, gr.dO + t.j0 * h.hs, false, T(1),
              gr.dv + t.k0 * h.hs);
}

// The backward. By blocks, each pass over (head, block) items in parallel:
//   a decoder's P tables rebuilt (S passes of column_part, as the forward built them);
//   ρ^S = dO · O row by row;
//   for t = S..1: E^t (each query block's column parts of dL^t, combined; a decoder's R^t are
//     the parts' prefixes) and ρ^{t-1} (row-owned: each query block its own rows);
//   dQ and ∂L/∂c row-owned (each query block over its key tiles), dK and dV column-owned (each
//     key block over the query blocks that read it, top down),
// so every sum has one owner and a fixed order, and no item writes what another writes:
// 2S + 2 passes, and S more for a decoder. By heads, a decoder rebuilds P in its first E pass
// (its query blocks top down) and the last two passes are one (query blocks top down, key tiles
// left to right: each dK and dV row gets the query blocks' terms in the same order as the
// column-owned pass adds them): 2S + 1 sweeps, the same bits.
template <class T>
void backward_all(std::vector<Head<T>>& heads, std::vector<Grads<T>>& grads, Tables<T>& tab, T scale,
                  bool by_head) {
  const auto tiles = static_cast<int64_t>(heads.size());
  const Head<T>& h0 = heads[0];
  const int S = h0.S;
  const int64_t nb = tab.nb, n = h0.n;
  const bool fuse_prefix = by_head && !h0.all && S > 0;
  if (!h0.all && !fuse_prefix)
    for (int tau = 0; tau < S; ++tau) column_sums(heads, tab, tau, false);
  const auto head_of = [&](int64_t i) -> const Head<T>& { return heads[static_cast<size_t>(i / nb)]; };
  const auto grads_of = [&](int64_t i) -> Grads<T>& { return grads[static_cast<size_t>(i / nb)]; };
  parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t bh = b0; bh < b1; ++bh) {  // ρ^S_j = <dB_j, B_j> = dO_j · O_j
      const Grads<T>& gr = grads[static_cast<size_t>(bh)];
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t e = 0; e < h0.hs; ++e)
          d += static_cast<double>(gr.dO[j * h0.hs + e]) * static_cast<double>(gr.O[j * h0.hs + e]);
        gr.rho[S * n + j] = d;
      }
    }
  });
  // E^t's parts: the tab cells of an encoder (one level at a time), R^t's slots of a decoder.
  const auto E_part = [&](int64_t bh, int64_t qb, int lev) -> double* {
    const Head<T>& h = heads[static_cast<size_t>(bh)];
    return h.all ? tab.part(h, bh, qb, 0) : grads[static_cast<size_t>(bh)].R + (qb * S + lev - 1) * n;
  };
  // Query block qb's part of E^lev; with parts, its column parts of P's levels too (S, n).
  const auto E_block = [&](int64_t bh, int64_t qb, int lev, double* parts, Work<T>& w) {
    const Head<T>& h = heads[static_cast<size_t>(bh)];
    const Grads<T>& gr = grads[static_cast<size_t>(bh)];
    double* part = E_part(bh, qb, lev);
    std::fill(part, part + n, 0.0);
    for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
      const Tile t = h.tile(qb, k0);
      chains(h, gr, qb, t, lev, nullptr, w);
      if (parts)
        for (int tau = 0; tau < S; ++tau) add_column_part(h, t, tau, parts + tau * n, w);
      dL_part(h, gr, t, lev, part, w);
    }
  };
  for (int lev = S; lev >= 1; --lev) {
    if (fuse_prefix && lev == S) {
      walk_prefixes(heads, false, [&](const Head<T>&, int64_t bh, int64_t qb, double* parts, Work<T>& w) {
        E_block(bh, qb, lev, parts, w);
      });
    } else {
      each<T>(tiles * nb, S, [&](int64_t i, Work<T>& w) { E_block(i / nb, i % nb, lev, nullptr, w); });
    }
    parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t bh = b0; bh < b1; ++bh) {
        const Head<T>& h = heads[static_cast<size_t>(bh)];
        combine(E_part(bh, 0, lev), h.all ? n : S * n, nb, n, !h.all,
                grads[static_cast<size_t>(bh)].E + (lev - 1) * n);
      }
    });
    // ρ^{lev-1}: the row dots of g^{lev-1} with b^{lev-1}, key tiles in order.
    each<T>(tiles * nb, S, [&](int64_t i, Work<T>& w) {
      const Head<T>& h = head_of(i);
      const Grads<T>& gr = grads_of(i);
      const int64_t qb = i % nb;
      double* rho = w.acc.data();
      std::fill(rho, rho + h.rows(qb), 0.0);
      for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
        const Tile t = h.tile(qb, k0);
        chains(h, gr, qb, t, lev - 1, nullptr, w);
        const T* g = w.g.data() + (lev - 1) * kBr * kBc;
        const T* b = w.b.data() + (lev - 1) * kBr * kBc;
        for (int64_t r = 0; r < t.br; ++r)
          rho[r] += lane_sum(t.bc, [&](int64_t c) { return g[r * t.bc + c] * b[r * t.bc + c]; });
      }
      std::copy(rho, rho + h.rows(qb), gr.rho + (lev - 1) * n + qb * kBr);
    });
  }
  // The gradients of q, k, v and ∂L/∂c of each query block's rows.
  const auto dq_block = [&](int64_t bh, int64_t qb, bool dkv, Work<T>& w) {
    const Head<T>& h = heads[static_cast<size_t>(bh)];
    const Grads<T>& gr = grads[static_cast<size_t>(bh)];
    double dc = 0;
    for (int64_t k0 = 0; k0 < h.key_end(qb); k0 += kBc) {
      const Tile t = h.tile(qb, k0);
      chains(h, gr, qb, t, 0, &dc, w);
      grad_products(h, gr, t, scale, true, dkv, w);
    }
    gr.dc[qb] = dc;
  };
  if (by_head) {
    parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
      Work<T> w;
      w.ensure(S);
      for (int64_t bh = b0; bh < b1; ++bh)
        for (int64_t qb = 0; qb < nb; ++qb) dq_block(bh, qb, true, w);
    });
    return;
  }
  each<T>(tiles * nb, S, [&](int64_t i, Work<T>& w) { dq_block(i / nb, i % nb, false, w); });
  if (!grads[0].dk && !grads[0].dv) return;
  const int64_t nkb = (n + kBc - 1) / kBc;
  each<T>(tiles * nkb, S, [&](int64_t i, Work<T>& w) {
    const Head<T>& h = heads[static_cast<size_t>(i / nkb)];
    const Grads<T>& gr = grads[static_cast<size_t>(i / nkb)];
    const int64_t k0 = i % nkb * kBc;
    for (int64_t qb = 0; qb < nb; ++qb) {
      if (k0 >= h.key_end(qb)) continue;
      const Tile t = h.tile(qb, k0);
      chains(h, gr, qb, t, 0, nullptr, w);
      grad_products(h, gr, t, scale, false, true, w);
    }
  });
}

// The heads of a call, q read pre-scaled (scale folded into a copy of Q, qs), so the tiles'
// s = Q Kᵀ needs no multiply. lse (S+1, B, NH, T) and col (S, B, NH, T) are the call's tensors.
template <class T>
std::vector<Head<T>> make_heads(const AttnDims& d, const AttnParams& p, const std::vector<double>& lam,
                                const T* qs, const T* kp, const T* vp, const uint8_t* km, T* lse, T* col,
                                Tables<T>& tab) {
  const int64_t tiles = d.B * d.NH, QS = d.T * d.HS;
  const bool bp = uses_lambda(p.variant);
  std::vector<Head<T>> heads(static_cast<size_t>(tiles));
  for (int64_t bh = 0; bh < tiles; ++bh) {
    Head<T>& h = heads[static_cast<size_t>(bh)];
    const int64_t b = bh / d.NH, hh = bh % d.NH;
    h.n = d.T, h.hs = d.HS, h.nb = tab.nb, h.levels = tiles * d.T;
    h.q = qs + bh * QS, h.k = kp + bh * QS, h.v = vp + bh * QS;
    h.m = TileMask{d.T, km ? km + b * d.T : nullptr, p.causal, p.leak};
    h.S = bp ? p.steps : 0;
    h.c = bp ? static_cast<T>(attn::potts_c(p.variant == AttnVariant::bp_high, lam[static_cast<size_t>(hh)]))
             : T(0);
    h.all = !p.causal || p.leak;
    h.lse = lse + bh * d.T;
    h.col = col ? col + bh * d.T : nullptr;
    h.P = h.all ? nullptr : tab.cells.data() + bh * tab.per_head;
  }
  return heads;
}

template <class T>
std::vector<T> scaled_q(const Tensor& q, T scale) {
  const int64_t N = q.numel();
  std::vector<T> qs(static_cast<size_t>(N));
  const T* qp = q.data<T>();
  parallel_for(N, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) qs[static_cast<size_t>(i)] = scale * qp[i];
  });
  return qs;
}

int64_t query_blocks(int64_t n) { return (n + kBr - 1) / kBr; }

TiledSchedule g_schedule = TiledSchedule::automatic;

// Whether a call of `tiles` heads runs by heads (kernels.h, TiledSchedule).
bool by_heads(int64_t tiles) {
  if (g_schedule != TiledSchedule::automatic) return g_schedule == TiledSchedule::heads;
  return tiles >= omp_get_max_threads();
}

template <class T>
void tiled_forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                     const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse, Tensor& colsum) {
  const AttnDims d = attn_dims(q);
  const int64_t tiles = d.B * d.NH;
  if (tiles * d.T == 0) return;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const int S = uses_lambda(p.variant) ? p.steps : 0;
  const std::vector<T> qs = scaled_q(q, static_cast<T>(p.scale));
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  Tables<T> tab(tiles, query_blocks(d.T), d.T, S, !p.causal || p.leak);
  std::vector<Head<T>> heads = make_heads(d, p, lam, qs.data(), k.data<T>(), v.data<T>(), km, lse.data<T>(),
                                          colsum.defined() ? colsum.data<T>() : nullptr, tab);
  forward_all(heads, tab, out.data<T>(), by_heads(tiles));
}

template <class T>
void tiled_backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                      const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                      const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                      Tensor& glambda) {
  const AttnDims d = attn_dims(q);
  const int64_t tiles = d.B * d.NH, QS = d.T * d.HS;
  if (tiles * d.T == 0) return;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const bool bp = uses_lambda(p.variant);
  const int S = bp ? p.steps : 0;
  const std::vector<T> qs = scaled_q(q, static_cast<T>(p.scale));
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  const bool all = !p.causal || p.leak;
  const int64_t nb = query_blocks(d.T);
  Tables<T> tab(tiles, nb, d.T, S, all);
  // lse is read only; a decoder's colsum is not read (its P tables are rebuilt).
  std::vector<Head<T>> heads =
      make_heads(d, p, lam, qs.data(), k.data<T>(), v.data<T>(), km, const_cast<T*>(lse.data<T>()),
                 colsum.defined() ? const_cast<T*>(colsum.data<T>()) : nullptr, tab);
  std::vector<double> vecs(
      static_cast<size_t>(tiles * ((S + 1) * d.T + S * d.T + (all ? 0 : nb * S * d.T) + nb)));
  std::vector<Grads<T>> grads(static_cast<size_t>(tiles));
  const T *op = out.data<T>(), *gp = gout.data<T>();
  T* gqp = gq.defined() ? gq.data<T>() : nullptr;
  T* gkp = gk.defined() ? gk.data<T>() : nullptr;
  T* gvp = gv.defined() ? gv.data<T>() : nullptr;
  double* cursor = vecs.data();
  for (int64_t bh = 0; bh < tiles; ++bh) {
    Grads<T>& gr = grads[static_cast<size_t>(bh)];
    gr.dO = gp + bh * QS, gr.O = op + bh * QS;
    gr.dq = gqp ? gqp + bh * QS : nullptr;
    gr.dk = gkp ? gkp + bh * QS : nullptr;
    gr.dv = gvp ? gvp + bh * QS : nullptr;
    gr.rho = cursor, cursor += (S + 1) * d.T;
    gr.E = cursor, cursor += S * d.T;
    if (!all) gr.R = cursor, cursor += nb * S * d.T;
    gr.dc = cursor, cursor += nb;
  }
  backward_all(heads, grads, tab, static_cast<T>(p.scale), by_heads(tiles));
  if (!glambda.defined() || !bp) return;
  std::vector<double> dlam(static_cast<size_t>(tiles), 0.0);  // per head, summed over b in order below
  for (int64_t bh = 0; bh < tiles; ++bh) {
    double dc = 0;
    for (int64_t qb = 0; qb < nb; ++qb) dc += grads[static_cast<size_t>(bh)].dc[qb];
    dlam[static_cast<size_t>(bh)] =
        dc * attn::potts_dc_dlambda(p.variant == AttnVariant::bp_high, lam[static_cast<size_t>(bh % d.NH)]);
  }
  attn::add_lambda_grad(dlam, d.B, d.NH, glambda.data<T>());
}

}  // namespace

void set_tiled_schedule(TiledSchedule s) { g_schedule = s; }

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
