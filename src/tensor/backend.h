// The two backends behind the kernel API of kernel_list.h, and the device runtime.
// saobp::cpu is always built; saobp::cuda is src/tensor/cuda/ when CMake finds nvcc, else the
// stubs of src/tensor/no_cuda/ that throw "[op] built without CUDA". Only src/tensor/ includes
// this file: everything above calls saobp::kern (kernels.h).
#pragma once
#include <cstddef>
#include <string>

#include "tensor/kernel_list.h"
#include "tensor/tensor.h"

namespace saobp {

enum class BinaryOp : uint8_t { add, sub, mul, div };
enum class RandomKind : uint8_t { uniform, normal };
struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;  // 1-based, for the bias corrections
};
enum class UnaryOp : uint8_t { exp, log, log1p, softplus };

// Attention variants (src/attention/): plain softmax, SAOBP with the repulsive (BP-High) or
// attractive (BP-Low) Potts factor, and the non-Potts BP-ElemMul baseline.
enum class AttnVariant : uint8_t { original, bp_high, bp_low, bp_elemmul };
struct AttnParams {
  AttnVariant variant = AttnVariant::original;
  bool causal = false;  // decoder: keys k <= query j, senders i < j
  int steps = 1;        // BP steps (each refines the previous beliefs)
  double scale = 1.0;   // score scale, 1/sqrt(HS)
};

// Where a stream of random numbers comes from: value i of a draw is a pure function of
// (seed, stream, offset + i), so no result depends on thread count or device.
struct RngKey {
  uint64_t seed = 42;
  uint64_t stream = 0;
  uint64_t offset = 0;
};

#define SAOBP_DECLARE_KERNEL(name, dev, params, args) void name params;

namespace cpu {
SAOBP_KERNELS(SAOBP_DECLARE_KERNEL)
}  // namespace cpu

namespace cuda {
SAOBP_KERNELS(SAOBP_DECLARE_KERNEL)

// Device runtime. In a CPU-only build available() is false and the rest throw.
bool available();  // built with CUDA and a device is present
bool built();      // built with CUDA (whether or not a device is present)
std::string device_name(int index);
void* allocate(size_t nbytes, int index);
void deallocate(void* p, size_t nbytes, int index);
// Copies between host and device memory; host pointers are plain CPU memory.
void memcpy_to_device(void* dst, const void* src, size_t nbytes, int index);
void memcpy_to_host(void* dst, const void* src, size_t nbytes, int index);
void memcpy_device(void* dst, const void* src, size_t nbytes, int index);
void synchronize(int index);
}  // namespace cuda

}  // namespace saobp
