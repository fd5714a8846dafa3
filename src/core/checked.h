// Overflow-checked arithmetic on sizes: products of user-given sizes (batch x seq_len x layers,
// a tensor's shape) must fail with a message, never wrap into a small or negative number.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace saobp {

// a * b, or nullopt when it does not fit in an int64_t.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a + b, or nullopt when it does not fit in an int64_t.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of all factors, or nullopt when any partial product overflows.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    const std::optional<int64_t> p = checked_mul(r, f);
    if (!p) return std::nullopt;
    r = *p;
  }
  return r;
}

}  // namespace saobp
