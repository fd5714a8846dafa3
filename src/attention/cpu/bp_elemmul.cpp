// BP-ElemMul (paper eq. 15), one tile: the non-Potts baseline whose compatibility is the inner
// product of attention rows.
//
//   P = A Aᵀ,   r_j = Σ_{allowed k} P_jk,   B_jk = P_jk / r_j on allowed entries (0 elsewhere).
//
// Backward, given dB (derivation: docs/saobp-gradients.md §5):
//   dP_jk = (dB_jk - <dB_j, B_j>) / r_j on allowed entries, 0 elsewhere
//   dA    = dP A + dPᵀ A          (P_jk = Σ_m A_jm A_km is bilinear in A)
//   ds   += softmax backward of A for dA
// A row with r_j = 0 (no allowed entry) gives B_j = 0 and passes no gradient.
#include "attention/cpu/tile.h"
#include "tensor/cpu/tile_gemm.h"

namespace saobp::attn {

template <class T>
void elemmul_forward(const TileMask& m, const T* A, T* B, T* r, Scratch<T>& w) {
  const int64_t n = m.T;
  T* P = w.a.data();
  cpu::tile_gemm(n, n, n, T(1), A, false, A, true, T(0), P);  // P = A Aᵀ
  for (int64_t j = 0; j < n; ++j) {
    const T* Pj = P + j * n;
    T* Bj = B + j * n;
    const double rj = cpu::lane_sum(n, [&](int64_t k) { return m.allowed(j, k) ? Pj[k] : T(0); });
    r[j] = static_cast<T>(rj);
    const T inv = rj > 0 ? static_cast<T>(1.0 / rj) : T(0);
    for (int64_t k = 0; k < n; ++k) Bj[k] = m.allowed(j, k) ? Pj[k] * inv : T(0);
  }
}

template <class T>
void elemmul_backward(const TileMask& m, const T* A, const T* B, const T* r, const T* dB, T* ds,
                      Scratch<T>& w) {
  const int64_t n = m.T;
  T* dP = w.a.data();
  T* dA = w.b.data();
  for (int64_t j = 0; j < n; ++j) {
    const T *Bj = B + j * n, *dBj = dB + j * n;
    T* dPj = dP + j * n;
    if (!(r[j] > 0)) {
      std::fill(dPj, dPj + n, T(0));
      continue;
    }
    const T d = static_cast<T>(cpu::lane_sum(n, [&](int64_t k) { return dBj[k] * Bj[k]; }));
    const T inv = T(1) / r[j];
    for (int64_t k = 0; k < n; ++k) dPj[k] = m.allowed(j, k) ? (dBj[k] - d) * inv : T(0);
  }
  cpu::tile_gemm(n, n, n, T(1), dP, false, A, false, T(0), dA);  // dA = dP A
  cpu::tile_gemm(n, n, n, T(1), dP, true, A, false, T(1), dA);   //    + dPᵀ A
  softmax_tile_backward(m, A, dA, ds);
}

template void elemmul_forward<float>(const TileMask&, const float*, float*, float*, Scratch<float>&);
template void elemmul_forward<double>(const TileMask&, const double*, double*, double*, Scratch<double>&);
template void elemmul_backward<float>(const TileMask&, const float*, const float*, const float*, const float*,
                                      float*, Scratch<float>&);
template void elemmul_backward<double>(const TileMask&, const double*, const double*, const double*,
                                       const double*, double*, Scratch<double>&);

}  // namespace saobp::attn
