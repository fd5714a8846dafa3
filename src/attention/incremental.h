// Causal attention one chunk of positions at a time, for generation: the keys and values seen so
// far stay in a cache, and for the SAOBP variants so does what the new rows need of the old ones,
// so a new token costs O(T) per head instead of a forward over the whole sequence.
//
// Why a cache suffices (docs/generation.md has the derivation). In a decoder, row j's messages
// come from the rows i < j only (attention.h), and every row's beliefs depend on earlier rows
// only, so a row, once computed, never changes:
//   BP-High / BP-Low, step t = 1..steps, beliefs b^0 = A:
//     b^t_j = softmax over k <= j of  s_jk + G^t_jk,  G^t_jk = Σ_{i<j} log(1 - c b^{t-1}_ik)
//   G^t_j is a running column sum: the cache holds M^t_k = Σ_{i<P} log(1 - c b^{t-1}_ik) over the
//   P rows seen, the new rows add theirs (within a chunk, the rows above them first).
//   BP-ElemMul: B_jk ∝ Σ_m A_jm A_km over k <= j needs the rows A_k of earlier positions: the cache
//   holds them (O(T) memory per position instead of O(1), and O(T²) work per new row per head).
//   Head skip is refused: its gate counts the peaked rows of the whole sequence, later rows
//   included, so a full forward's output at position j depends on tokens after j and no causal
//   generation can reproduce it.
#pragma once
#include <cstdint>

#include "attention/attention.h"

namespace saobp {

// One layer's cache for a batch of B sequences of one length (no padding), capacity positions.
struct AttentionCache {
  AttentionConfig cfg;
  int64_t len = 0, capacity = 0;
  Tensor k, v;       // (B,NH,capacity,HS): keys (after RoPE) and values of positions [0, len)
  Tensor neg_c;      // BP: (1,NH,1,1) -c of each head (λ is fixed while generating)
  Tensor messages;   // BP: (steps,B,NH,1,capacity) M^t_k, zero past len
  Tensor attention;  // ElemMul: (B,NH,capacity,capacity) the rows A_j of positions [0, len), zero elsewhere
};

// An empty cache for q, k, v of (B,NH,·,HS) in `dtype` on `device`. lambda: (NH) per-head λ of the
// layer (BP variants; read once, here). Throws for an encoder's config (cfg.causal false) and for
// the head skip.
AttentionCache attention_cache(const AttentionConfig& cfg, int64_t B, int64_t NH, int64_t HS,
                               int64_t capacity, const Var& lambda, DType dtype, Device device);

// The attention output (B,NH,n,HS) of n new positions [len, len + n), given their q, k, v
// (B,NH,n,HS), k rotated already; appends them to the cache. Equals rows [len, len + n) of
// attention() over the whole sequence (up to rounding). No gradient: for inference only.
Tensor attention_extend(const Tensor& q, const Tensor& k, const Tensor& v, AttentionCache& cache);

}  // namespace saobp
