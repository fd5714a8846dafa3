// FNV-1a 64 (Fowler-Noll-Vo): the one hash of names, configs, corpora and tokenizers. Parameter
// names hash to their initialization streams (model/params.cpp), so a change here changes every
// trained model.
#pragma once
#include <cstdint>
#include <string_view>

namespace saobp {

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;  // the offset basis, 0xcbf29ce484222325
inline constexpr uint64_t kFnvPrime = 1099511628211ull;          // 0x100000001b3

// The bytes of s, continuing from `seed`: fnv1a64(b, fnv1a64(a)) == fnv1a64(a + b).
constexpr uint64_t fnv1a64(std::string_view s, uint64_t seed = kFnvOffset) {
  for (const char c : s) seed = (seed ^ static_cast<unsigned char>(c)) * kFnvPrime;
  return seed;
}

// The 8 bytes of v, least significant first, continuing from `seed`.
constexpr uint64_t fnv1a64_u64(uint64_t v, uint64_t seed) {
  for (int i = 0; i < 8; ++i) seed = (seed ^ ((v >> (8 * i)) & 0xff)) * kFnvPrime;
  return seed;
}

}  // namespace saobp
