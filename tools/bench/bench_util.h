// Timing helpers shared by the benchmarks: median of repeated timed runs, and the machine's
// measured FP32 FMA peak. Header-only so the Eigen baseline executable can use it too.
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace saobp::bench {

// Median seconds of one call of fn, over `reps` timed runs of enough calls to last ~50 ms each
// (after one warm-up run).
inline double median_seconds(const std::function<void()>& fn, int reps = 7) {
  using clk = std::chrono::steady_clock;
  fn();
  auto t0 = clk::now();
  fn();
  const double once = std::chrono::duration<double>(clk::now() - t0).count();
  const int inner = std::max(1, static_cast<int>(0.05 / std::max(once, 1e-7)));
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    t0 = clk::now();
    for (int i = 0; i < inner; ++i) fn();
    ts.push_back(std::chrono::duration<double>(clk::now() - t0).count() / inner);
  }
  std::nth_element(ts.begin(), ts.begin() + reps / 2, ts.end());
  return ts[reps / 2];
}

// Measured FP32 FMA peak of all OpenMP threads in GFLOP/s: 12 independent FMA chains per thread
// on the widest vectors this build targets (2 FLOPs per lane per FMA). One run.
inline double fma_peak_once() {
  const long iters = 20'000'000;
  auto t0 = std::chrono::steady_clock::now();
  float sink = 0;
  int lanes = 1;
#pragma omp parallel reduction(+ : sink)
  {
#if defined(__AVX512F__)
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (auto& x : a) x = _mm512_set1_ps(1.0f);
    for (long i = 0; i < iters; ++i)
      for (auto& x : a) x = _mm512_fmadd_ps(x, m, c);
    alignas(64) float buf[16];
    for (auto& x : a) {
      _mm512_store_ps(buf, x);
      for (float v : buf) sink += v;
    }
#pragma omp single
    lanes = 16;
#elif defined(__FMA__)
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (auto& x : a) x = _mm256_set1_ps(1.0f);
    for (long i = 0; i < iters; ++i)
      for (auto& x : a) x = _mm256_fmadd_ps(x, m, c);
    alignas(32) float buf[8];
    for (auto& x : a) {
      _mm256_store_ps(buf, x);
      for (float v : buf) sink += v;
    }
#pragma omp single
    lanes = 8;
#else
    float a[12];
    for (auto& x : a) x = 1.0f;
    for (long i = 0; i < iters; ++i)
      for (auto& x : a) x = __builtin_fmaf(x, 0.999999f, 1e-7f);
    for (float x : a) sink += x;
#endif
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sink == 12345.f) return 0;  // keep the loop alive
  return 2.0 * lanes * 12.0 * static_cast<double>(iters) * omp_get_max_threads() / secs / 1e9;
}

// A peak is a best case: the best of five runs (a single run varies with clock ramp-up).
inline double fma_peak_gflops() {
  double best = 0;
  for (int r = 0; r < 5; ++r) best = std::max(best, fma_peak_once());
  return best;
}

}  // namespace saobp::bench
