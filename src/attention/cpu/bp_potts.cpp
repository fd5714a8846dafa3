// SAOBP with the Potts factor (BP-High and BP-Low), one tile, forward and backward.
// Derivation: docs/saobp-gradients.md §2-§4. Summary, for one BP step from beliefs P (P = A at
// the first step) to beliefs B:
//
//   F_ik = log(1 - c P_ik)                     for sender rows i (0 elsewhere; 0 where P is)
//   G_jk = Σ_{i ∈ N(j)} F_ik                   encoder: column sum minus row j's own term
//                                              decoder: exclusive prefix sum down the rows
//                                              leaking decoder (m.leak): as the encoder
//   L_jk = s_jk + G_jk,   B_j = softmax over the allowed k of L_j
//
// Backward, given dB:
//   dL_j  = B_j ⊙ (dB_j - <dB_j, B_j>)         (softmax backward)        → ds += dL
//   dF_ik = Σ_{j : i ∈ N(j)} dL_jk             encoder: column sum minus own; decoder: suffix
//   dP_ik = dF_ik · (-c) / (1 - c P_ik),   ∂L/∂c += dF_ik · (-P_ik) / (1 - c P_ik)
// and dP becomes the dB of the previous step; after the first step dA goes through the softmax
// backward of A into ds.
// The log and softmax loops here are compute-bound: 512-bit vectors where the target has them,
// as in src/tensor/cpu/nn.cpp (-march=native tunes for 256); the width changes no element's
// operations, so the results do not change.
#pragma GCC target("prefer-vector-width=512")
#include <algorithm>

#include "attention/cpu/tile.h"

namespace saobp::attn {

using cpu::lane_sum;
using cpu::log_approx;

template <class T>
void potts_forward(const TileMask& m, double c, int steps, const T* s, T* const* beliefs, Scratch<T>& w) {
  const int64_t n = m.T;
  const T cc = static_cast<T>(c);
  T* F = w.a.data();           // (T,T) log-factors of the previous beliefs
  T* L = w.b.data();           // (T) one row of refined logits
  double* acc = w.acc.data();  // (T) column or prefix sums of F
  for (int t = 1; t <= steps; ++t) {
    const T* P = beliefs[t - 1];
    T* B = beliefs[t];
    // F_ik = log(1 - c P_ik): the log of message M_ik / (w S_i), see the file comment.
    for (int64_t i = 0; i < n; ++i) {
      T* Fi = F + i * n;
      const T* Pi = P + i * n;
      if (!m.sender(i)) {
        std::fill(Fi, Fi + n, T(0));
        continue;
      }
      for (int64_t k = 0; k < n; ++k) Fi[k] = log_approx(T(1) - cc * Pi[k]);
    }
    std::fill(acc, acc + n, 0.0);
    auto refine_row = [&](int64_t j, auto message) {  // L_j = s_j + G_j, B_j = softmax(L_j)
      const T* sj = s + j * n;
      for (int64_t k = 0; k < n; ++k) L[k] = sj[k] + message(k);
      softmax_tile_row(m, j, L, B + j * n);
    };
    if (!m.causal || m.leak) {
      // G_jk = Σ_{i != j} F_ik: the column sum over all senders, minus row j's own term.
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < n; ++k) acc[k] += F[i * n + k];
      for (int64_t j = 0; j < n; ++j)
        refine_row(j, [&](int64_t k) { return static_cast<T>(acc[k] - F[j * n + k]); });
    } else {
      // G_jk = Σ_{i < j} F_ik: an exclusive prefix sum, so row j hears only earlier rows.
      for (int64_t j = 0; j < n; ++j) {
        refine_row(j, [&](int64_t k) { return static_cast<T>(acc[k]); });
        for (int64_t k = 0; k < n; ++k) acc[k] += F[j * n + k];
      }
    }
  }
}

template <class T>
double potts_backward(const TileMask& m, double c, int steps, const T* const* beliefs, const T* dB, T* ds,
                      Scratch<T>& w) {
  const int64_t n = m.T, nn = n * n;
  const T cc = static_cast<T>(c);
  T* db = w.a.data();  // (T,T) gradient at the current step's beliefs
  T* dL = w.b.data();  // (T,T) gradient at the refined logits
  T* dP = w.c.data();  // (T,T) gradient at the previous step's beliefs
  double* acc = w.acc.data();
  double dc = 0;
  std::copy(dB, dB + nn, db);
  for (int t = steps; t >= 1; --t) {
    const T* B = beliefs[t];
    const T* P = beliefs[t - 1];
    std::fill(dL, dL + nn, T(0));
    softmax_tile_backward(m, B, db, dL);
    for (int64_t i = 0; i < nn; ++i) ds[i] += dL[i];  // L = s + G: s gets dL directly
    // Row i of dF, then the chain through F = log(1 - c P).
    // The ∂L/∂c terms go through a row buffer first (one vector loop with dP); lane_sum over a
    // plain buffer vectorizes its adds, over the expression GCC kept its 16 lanes scalar.
    T* term = w.row.data();
    auto chain_row = [&](int64_t i, auto dF) {
      T* __restrict dPi = dP + i * n;
      T* __restrict tk = term;
      const T* __restrict Pi = P + i * n;
      if (!m.sender(i)) {
        std::fill(dPi, dPi + n, T(0));
        return;
      }
      for (int64_t k = 0; k < n; ++k) {
        const T f = dF(k), den = T(1) - cc * Pi[k];
        dPi[k] = f * -cc / den;
        tk[k] = f * -Pi[k] / den;
      }
      dc += lane_sum(n, [&](int64_t k) { return tk[k]; });
    };
    std::fill(acc, acc + n, 0.0);
    if (!m.causal || m.leak) {
      // Row i sent to every j != i: dF_ik = Σ_j dL_jk - dL_ik.
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < n; ++k) acc[k] += dL[j * n + k];
      for (int64_t i = 0; i < n; ++i)
        chain_row(i, [&](int64_t k) { return static_cast<T>(acc[k] - dL[i * n + k]); });
    } else {
      // Row i sent to every j > i: an exclusive suffix sum from the bottom row up.
      for (int64_t i = n - 1; i >= 0; --i) {
        chain_row(i, [&](int64_t k) { return static_cast<T>(acc[k]); });
        for (int64_t k = 0; k < n; ++k) acc[k] += dL[i * n + k];
      }
    }
    std::swap(db, dP);
  }
  softmax_tile_backward(m, beliefs[0], db, ds);  // db now holds dA
  return dc;
}

template void potts_forward<float>(const TileMask&, double, int, const float*, float* const*,
                                   Scratch<float>&);
template void potts_forward<double>(const TileMask&, double, int, const double*, double* const*,
                                    Scratch<double>&);
template double potts_backward<float>(const TileMask&, double, int, const float* const*, const float*, float*,
                                      Scratch<float>&);
template double potts_backward<double>(const TileMask&, double, int, const double* const*, const double*,
                                       double*, Scratch<double>&);

}  // namespace saobp::attn
