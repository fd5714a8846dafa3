// bfloat16, the GPU's mixed-precision storage type: the top 16 bits of a binary32 (sign, the
// same 8-bit exponent, 7 bits of mantissa). One conversion for both backends (SAOBP_HD), so a
// bf16 tensor made on the CPU and one made on the GPU from the same floats hold the same bits:
// round to nearest, ties to even (PyTorch's .bfloat16() gives the same bits for every non-NaN
// float tried: 200,000 random bit patterns and the edge cases of the [tensor] test), a value past
// the largest bf16 becomes ±inf, and a NaN stays a NaN (made quiet, sign and top payload kept,
// where PyTorch gives its one NaN). Widening back is exact. Only std and host_device.h here:
// nvcc compiles it.
#pragma once
#include <cstdint>
#include <cstring>

#include "tensor/host_device.h"

namespace saobp {

// A bf16 element as stored: its 16 bits.
struct bf16 {
  uint16_t bits;
};

SAOBP_HD uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // ties to even; carries into the exponent (and to inf) as IEEE does
  return static_cast<uint16_t>(u >> 16);
}

SAOBP_HD float bf16_value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace saobp
