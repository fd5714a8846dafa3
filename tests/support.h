// Helpers shared by the tests: random tensors from Philox, bitwise and tolerance comparisons,
// thread-count control, gradient-check assertions.
#pragma once
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

// expr throws saobp::Error (not just any exception) whose message satisfies `matcher`.
#define CHECK_ERROR(expr, matcher)         \
  do {                                     \
    CHECK_THROWS_AS(expr, ::saobp::Error); \
    CHECK_THROWS_WITH(expr, matcher);      \
  } while (0)

namespace saobp::test {

// f() with environment variable `name` set to `value`, unset again afterwards (an opt-in switch of
// the CUDA backend, env_switch_on): f's result.
template <class F>
auto with_env(const char* name, const char* value, F f) {
  ::setenv(name, value, 1);
  struct Unset {
    const char* name;
    ~Unset() { ::unsetenv(name); }
  } unset{name};
  return f();
}

// N(mean, std²) values from Philox(seed, stream 1); f64 unless told.
inline Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f64, double std = 1.0,
                    double mean = 0.0) {
  Tensor t = Tensor::empty(shape, dtype);
  kern::fill_random(t, RandomKind::normal, mean, std, RngKey{seed, 1, 0});
  return t;
}

// Deterministic pseudo-random token ids in [0, V) (a linear congruential sequence from seed).
inline std::vector<int32_t> tokens(size_t n, int32_t V, uint32_t seed) {
  std::vector<int32_t> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(V));
  }
  return v;
}

// U[lo, hi) values from Philox(seed, stream 2).
inline Tensor randu(const Shape& shape, uint64_t seed, double lo = 0.0, double hi = 1.0,
                    DType dtype = DType::f64) {
  Tensor t = Tensor::empty(shape, dtype);
  kern::fill_random(t, RandomKind::uniform, lo, hi, RngKey{seed, 2, 0});
  return t;
}

inline Tensor ids(const std::vector<int32_t>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }

// u8 mask (1 = allowed) from a list of 0/1 values.
inline Tensor mask_of(const std::vector<uint8_t>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

// (1,1,T,T) causal mask: query t sees keys <= t.
inline Tensor causal_mask(int64_t T) {
  std::vector<uint8_t> m(static_cast<size_t>(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) m[static_cast<size_t>(i * T + j)] = j <= i;
  return Tensor::from_vector(m, {1, 1, T, T});
}

// The raw bytes of t in logical (row-major) order.
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
  std::vector<unsigned char> b(n);
  if (n) std::memcpy(b.data(), c.raw(), n);
  return b;
}

// Same dtype, shape and bytes (memcmp).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const auto x = bytes_of(a), y = bytes_of(b);
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
}

// Any floating or integer tensor as doubles, logical order.
inline std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  switch (c.dtype()) {
    case DType::f64:
      return c.to_vector<double>();
    default:
      return c.to(DType::f64).to_vector<double>();
  }
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - b[i]);
    if (!(d <= m)) m = d;  // NaN propagates as NaN
  }
  return m;
}

inline bool all_finite(const Tensor& t) {
  for (double v : values(t))
    if (!std::isfinite(v)) return false;
  return true;
}

// Runs f() with n OpenMP threads and restores the previous setting (also on throw).
template <class F>
auto with_threads(int n, F&& f) {
  struct Restore {
    int prev = omp_get_max_threads();
    ~Restore() { omp_set_num_threads(prev); }
  } restore;
  omp_set_num_threads(n);
  return f();
}

// gradcheck in f64 with the error bound of the suite; names the worst element on failure.
inline void require_gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                              const std::vector<size_t>& skip = {}, double tol = 1e-6) {
  const GradcheckResult r = gradcheck(f, inputs, 42, 1e-6, skip);
  INFO("worst: " << r.worst);
  REQUIRE(r.checked > 0);
  REQUIRE(r.max_error < tol);
  // The check must be about something: some numeric gradient is clearly nonzero.
  double biggest = 0;
  for (const auto& v : r.numeric)
    for (double x : v) biggest = std::max(biggest, std::abs(x));
  REQUIRE(biggest > 1e-3);
}

}  // namespace saobp::test
