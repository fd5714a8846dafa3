// The two backends behind the kernels of src/tensor/kernels.inc, and the device runtime.
// saobp::cpu is always built; saobp::cuda is src/tensor/cuda/ when CMake finds nvcc, else the
// stubs of src/tensor/no_cuda/ that throw "[op] built without CUDA".
//
// Kernel code only: src/tensor/ and the device folders of src/attention/ (cpu/, cuda/, no_cuda/
// and its dispatch.cpp) include this file; every other layer calls saobp::kern (kernels.h).
// tests/core/test_layering.sh checks the rule.
#pragma once
#include <cstddef>
#include <string>

#include "tensor/device_info.h"
#include "tensor/kernels.h"

namespace saobp {

namespace cpu {
#include "tensor/kernels.inc"
}  // namespace cpu

namespace cuda {
#include "tensor/kernels.inc"

// Device runtime. In a CPU-only build the rest throw (available() and built() are in
// device_info.h).
void* allocate(size_t nbytes, int index);
void deallocate(void* p, size_t nbytes, int index);
// Copies between host and device memory; host pointers are plain CPU memory.
void memcpy_to_device(void* dst, const void* src, size_t nbytes, int index);
void memcpy_to_host(void* dst, const void* src, size_t nbytes, int index);
void memcpy_device(void* dst, const void* src, size_t nbytes, int index);
void synchronize(int index);
// CPU-only build: throws "[op] built without CUDA" (the stubs of src/tensor/no_cuda/ and
// src/attention/no_cuda/).
[[noreturn]] void no_cuda(const char* op);
}  // namespace cuda

// The body of a dispatcher (src/tensor/dispatch.cpp, src/attention/dispatch.cpp): the call
// `call` in saobp::cpu or saobp::cuda, by the device of `tensor`.
#define SAOBP_ON_DEVICE(tensor, call) \
  switch ((tensor).device().type) {   \
    case DeviceType::cpu:             \
      return cpu::call;               \
    case DeviceType::cuda:            \
      return cuda::call;              \
  }

}  // namespace saobp
