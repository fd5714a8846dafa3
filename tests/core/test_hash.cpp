// FNV-1a 64 against the published test vectors (http://www.isthe.com/chongo/tech/comp/fnv/).
#include <catch2/catch.hpp>
#include <string>

#include "core/hash.h"

using namespace saobp;

TEST_CASE("fnv1a64 matches the reference vectors", "[core]") {
  static_assert(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
  // Continuing from a seed is hashing the concatenation.
  CHECK(fnv1a64("bar", fnv1a64("foo")) == fnv1a64("foobar"));
  // A u64 is its 8 bytes, least significant first.
  const std::string le("\x2a\0\0\0\0\0\0\0", 8);
  CHECK(fnv1a64_u64(42, fnv1a64("x")) == fnv1a64(le, fnv1a64("x")));
  CHECK(fnv1a64_u64(42, fnv1a64("x")) == 0xbe80ba0a45fafecdull);
}
