// Deterministic vectorizable math for the CPU kernels.
//
// Without -ffast-math GCC neither vectorizes calls to expf nor reorders a reduction, so a row
// softmax is bound by scalar libm calls and a row sum by the latency of one dependent add chain.
// The two helpers below fix both while staying bitwise reproducible:
// - exp_approx(float): Cephes' expf, written as plain float arithmetic that the compiler
//   vectorizes; with -ffp-contract=off the vector and scalar code perform the same IEEE
//   operations, so an element's value does not depend on where a loop's vector body ends.
//   At most 1 ulp from the correctly rounded e^x (measured over every float in [-87.3, 88]);
//   results below FLT_MIN flush to 0, so e^-inf = 0. Doubles use std::exp (gradient checks).
// - lane_sum: sums in 16 interleaved lanes (element c goes to lane c % 16), then adds the lanes
//   in order: a fixed order that depends only on the length, and 16 independent add chains.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace saobp::cpu {

inline float exp_approx(float x) {
  // exp(x) = 2^n · e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two for accuracy).
  const bool underflow = x < -87.3365447504f;  // e^x < FLT_MIN: flushed to 0 (so e^-inf = 0)
  x = x > 88.0f ? 88.0f : x;                   // keeps 2^n finite (n <= 127)
  x = underflow ? -87.3365447504f : x;
  // Round to nearest by adding and subtracting 1.5·2^23 (std::floor would block vectorizing).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float y = p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : y;
}
inline double exp_approx(double x) { return std::exp(x); }

// Cephes' logf for positive normal x, as plain float arithmetic (vectorizes; same determinism
// argument as exp_approx). x = m·2^e with m in [√½, √2), log x = log m + e ln 2. Max absolute
// error ≈ 1e-7 for x in [0.01, 100]. Doubles use std::log.
inline float log_approx(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  float m = std::bit_cast<float>((bits & 0x807fffff) | 0x3f000000);  // [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1 : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float fe = static_cast<float>(e);
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  return (m + y) + fe * 0.693359375f;
}
inline double log_approx(double x) { return std::log(x); }

// erfc(z) for z >= 0 as plain float arithmetic (vectorizes; same determinism argument as
// exp_approx): Numerical Recipes' Chebyshev fit erfc(z) = t·e^{-z² + P(t)}, t = 1/(1 + z/2),
// relative error < 1.2e-7 over all z >= 0 before float rounding (measured in the tests:
// GELU within 1e-6 relative / 1e-7 absolute of the double formula). Doubles use std::erfc.
inline float erfc_approx_nonneg(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * exp_approx(p - z * z);
}
inline double erfc_approx_nonneg(double z) { return std::erfc(z); }

template <class F>
inline double lane_sum(int64_t n, F&& value) {
  constexpr int L = 16;
  double acc[L] = {};
  int64_t c = 0;
  // The values of a block are computed first, then added: the same sums, but the value loop
  // (an exp, say) vectorizes on its own instead of being serialized with the f64 adds.
  using V = decltype(value(int64_t{0}));
  V tmp[L];
  for (; c + L <= n; c += L) {
    for (int j = 0; j < L; ++j) tmp[j] = value(c + j);
    for (int j = 0; j < L; ++j) acc[j] += static_cast<double>(tmp[j]);
  }
  for (int j = 0; c + j < n; ++j) acc[j] += static_cast<double>(value(c + j));
  double s = 0;
  for (int j = 0; j < L; ++j) s += acc[j];
  return s;
}

}  // namespace saobp::cpu

namespace saobp::cpu {

// Max over value(0..n-1) in 16 interleaved lanes (exact, so any lane order gives the same
// result; the lanes only break the dependency chain). -inf for n == 0.
template <class F>
inline auto lane_max(int64_t n, F&& value) -> decltype(value(int64_t{0})) {
  using T = decltype(value(int64_t{0}));
  constexpr int L = 16;
  T acc[L];
  for (int j = 0; j < L; ++j) acc[j] = -std::numeric_limits<T>::infinity();
  int64_t c = 0;
  for (; c + L <= n; c += L)
    for (int j = 0; j < L; ++j) {
      const T v = value(c + j);
      acc[j] = v > acc[j] ? v : acc[j];
    }
  for (int j = 0; c + j < n; ++j) acc[j] = value(c + j) > acc[j] ? value(c + j) : acc[j];
  T m = acc[0];
  for (int j = 1; j < L; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

}  // namespace saobp::cpu
