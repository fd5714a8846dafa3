// Internal to src/attention/: one (batch, head) attention tile on the CPU. A tile is the T×T
// score matrix of one head of one sequence; the fused kernel (attention.cpp) walks tiles in
// parallel and calls the variant's refinement (bp_potts.cpp, bp_elemmul.cpp) on each, so the
// T×T working set stays in cache (1 MiB at T = 512 in f32).
//
// Notation follows docs/saobp-gradients.md: s scores, A = softmax of s over the allowed keys,
// B the refined attention that multiplies V.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/backend.h"
#include "attention/formulas.h"
#include "tensor/cpu/softmax_row.h"

namespace saobp::attn {

// Which entries of a tile exist. allowed(j,k): key k is a token (not padding) and, in a causal
// model, k <= j. sender(i): query row i is a token. Senders of row j (SAOBP messages): token
// rows i != j (encoder, or a leaking decoder) or i < j (decoder).
struct TileMask {
  int64_t T = 0;
  const uint8_t* key = nullptr;  // (T) 1 = token; null = no padding
  bool causal = false;
  bool leak = false;  // causal keys, but every other token row sends (AttnParams::leak)
  bool masked() const { return key || causal; }
  bool allowed(int64_t j, int64_t k) const { return (!key || key[k]) && (!causal || k <= j); }
  bool sender(int64_t i) const { return !key || key[i]; }
};

// y = softmax of row j of a tile over its allowed entries.  x, y: (T)
// Causal rows stop at k = j (the rest is 0) and the key mask is a plain byte test, so the row
// loops vectorize (a generic allowed(j, k) with its null and causal tests kept them scalar).
template <class T>
void softmax_tile_row(const TileMask& m, int64_t j, const T* x, T* y) {
  const int64_t n = m.causal ? j + 1 : m.T;
  if (m.key)
    cpu::softmax_row(x, y, n, true, [key = m.key](int64_t k) { return key[k] != 0; });
  else
    cpu::softmax_row(x, y, n, false, [](int64_t) { return true; });
  std::fill(y + n, y + m.T, T(0));
}

// A = softmax of s over the allowed entries of each row.  s, A: (T,T)
template <class T>
void softmax_tile(const TileMask& m, const T* s, T* A) {
  for (int64_t j = 0; j < m.T; ++j) softmax_tile_row(m, j, s + j * m.T, A + j * m.T);
}

// gs += softmax backward of y = softmax_tile(s) for the gradient gy.  y, gy, gs: (T,T)
template <class T>
void softmax_tile_backward(const TileMask& m, const T* y, const T* gy, T* gs) {
  for (int64_t j = 0; j < m.T; ++j) cpu::softmax_row_backward(y + j * m.T, gy + j * m.T, gs + j * m.T, m.T);
}

// λ of each head as the element type holds it, in double (the kernels' Potts constants are
// computed from these); empty when λ is undefined (no Potts factor).
template <class T>
std::vector<double> head_lambdas(const Tensor& lambda) {
  if (!lambda.defined()) return {};
  const std::vector<T> v = lambda.to(dtype_of<T>::value).template to_vector<T>();
  return {v.begin(), v.end()};
}

// glambda[h] += Σ_b dlam[b NH + h], the batch summed in order (the tiles' ∂L/∂λ are computed in
// parallel, each into its own slot): the result does not depend on the thread count.
template <class T>
void add_lambda_grad(const std::vector<double>& dlam, int64_t B, int64_t NH, T* glambda) {
  for (int64_t h = 0; h < NH; ++h) {
    double acc = 0;
    for (int64_t b = 0; b < B; ++b) acc += dlam[static_cast<size_t>(b * NH + h)];
    glambda[h] += static_cast<T>(acc);
  }
}

// Per-thread scratch of T×T (and T) buffers, reused across tiles.
template <class T>
struct Scratch {
  std::vector<T> a, b, c, d, e;
  std::vector<T> row;  // (T)
  std::vector<double> acc;
  void ensure(int64_t T2, int64_t T1) {
    for (auto* v : {&a, &b, &c, &d, &e})
      if (static_cast<int64_t>(v->size()) < T2) v->resize(static_cast<size_t>(T2));
    if (static_cast<int64_t>(row.size()) < T1) row.resize(static_cast<size_t>(T1));
    if (static_cast<int64_t>(acc.size()) < T1) acc.resize(static_cast<size_t>(T1));
  }
};

// ---- SAOBP with a Potts factor (bp_potts.cpp); c is potts_c (formulas.h).
// beliefs[0] = A (given), beliefs[t] (t = 1..steps) written; beliefs[steps] is B.
template <class T>
void potts_forward(const TileMask& m, double c, int steps, const T* s, T* const* beliefs, Scratch<T>& w);
// Given dB, accumulates ds and returns ∂L/∂c. beliefs as in the forward.
template <class T>
double potts_backward(const TileMask& m, double c, int steps, const T* const* beliefs, const T* dB, T* ds,
                      Scratch<T>& w);

// ---- BP-ElemMul (bp_elemmul.cpp): B = row-normalize(A Aᵀ) over the allowed entries.
// r: (T) the row sums, saved for the backward.
template <class T>
void elemmul_forward(const TileMask& m, const T* A, T* B, T* r, Scratch<T>& w);
template <class T>
void elemmul_backward(const TileMask& m, const T* A, const T* B, const T* r, const T* dB, T* ds,
                      Scratch<T>& w);

}  // namespace saobp::attn
