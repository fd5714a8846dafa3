// One row of (log-)softmax over its allowed entries, forward and backward: the single code path
// behind kern::softmax_forward and every attention variant, so that SAOBP with λ = 0 is bitwise
// the plain softmax.
//
//   y_a = e^{x_a - m} / Σ_a' e^{x_a' - m}  over allowed a (m = max allowed x),  0 elsewhere;
//   log form: y_a = x_a - m - log Σ_a' e^{x_a' - m}. A row with no allowed entry gives zeros.
//   NaN propagates: the max skips NaN, so a row whose allowed entries are all NaN (or NaN and
//   -inf) would look empty; it gives NaN instead of zeros, so damaged weights are not hidden.
//   Finite rows never take that branch's NaN test, so their results are unchanged.
//   backward (softmax):     gx_a += y_a (gy_a - Σ_a' gy_a' y_a')   (zero where y is)
#pragma once
#include <limits>

#include "tensor/cpu/vec_math.h"

namespace saobp::cpu {

// allowed: callable int64_t -> bool; `masked` false promises every entry is allowed (faster).
// x and y must not overlap (__restrict: without it the exp loop is not vectorized).
template <class T, class Allowed>
inline void softmax_row(const T* __restrict x, T* __restrict y, int64_t C, bool masked, Allowed allowed,
                        bool log = false) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const T mx = masked ? lane_max(C, [&](int64_t c) { return allowed(c) ? x[c] : ninf; })
                      : lane_max(C, [&](int64_t c) { return x[c]; });
  if (mx == ninf) {  // nothing allowed (or all -inf), or NaN
    bool nan = false;
    for (int64_t c = 0; c < C; ++c) nan |= (!masked || allowed(c)) && x[c] != x[c];
    for (int64_t c = 0; c < C; ++c) y[c] = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
    return;
  }
  if (masked)
    for (int64_t c = 0; c < C; ++c) y[c] = allowed(c) ? exp_approx(x[c] - mx) : T(0);
  else
    for (int64_t c = 0; c < C; ++c) y[c] = exp_approx(x[c] - mx);
  const double sum = lane_sum(C, [&](int64_t c) { return y[c]; });
  if (log) {
    const T lse = static_cast<T>(std::log(sum));
    for (int64_t c = 0; c < C; ++c) y[c] = (!masked || allowed(c)) ? x[c] - mx - lse : T(0);
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t c = 0; c < C; ++c) y[c] *= inv;
  }
}

// gx += y (gy - <gy, y>) for y = softmax_row(...).
template <class T>
inline void softmax_row_backward(const T* __restrict y, const T* __restrict gy, T* __restrict gx, int64_t C) {
  const T d = static_cast<T>(lane_sum(C, [&](int64_t c) { return gy[c] * y[c]; }));
  for (int64_t c = 0; c < C; ++c) gx[c] += y[c] * (gy[c] - d);
}

}  // namespace saobp::cpu
