// saobp::kern: the device-agnostic tensor kernels (src/tensor/kernels.inc, one declaration each)
// and the types of their arguments. Each call dispatches on the device of its output tensor in one
// place, src/tensor/dispatch.cpp. This is the header that the layers above src/tensor/ include;
// the backends themselves are behind src/tensor/backend.h.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace saobp {

enum class BinaryOp : uint8_t { add, sub, mul, div };
enum class RandomKind : uint8_t { uniform, normal };
enum class UnaryOp : uint8_t { exp, log, log1p, softplus };
struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;  // 1-based, for the bias corrections
};

// Where a stream of random numbers comes from: value i of a draw is a pure function of
// (seed, stream, offset + i), so no result depends on thread count or device.
struct RngKey {
  uint64_t seed = 42;
  uint64_t stream = 0;
  uint64_t offset = 0;
};

namespace kern {
#include "tensor/kernels.inc"
}  // namespace kern

}  // namespace saobp
