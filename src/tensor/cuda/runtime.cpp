// The CUDA device runtime behind saobp::cuda: device queries, copies, synchronization. Memory
// comes from allocator.cpp. Every kernel and copy runs on the legacy default stream, so they
// execute in issue order and a copy to the host waits for the kernels before it.
#include "tensor/cuda/common.h"

namespace saobp::cuda {

bool built() { return true; }

bool available() {
  static const bool present = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: clear the error, report "not available"
      return false;
    }
    return n > 0;
  }();
  return present;
}

void use_device(int index, const char* op) { check(cudaSetDevice(index), op); }

std::string device_name(int index) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cuda.device_name");
  return prop.name;
}

void memcpy_to_device(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "cuda.memcpy");
}

void memcpy_to_host(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "cuda.memcpy");
}

void memcpy_device(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice), "cuda.memcpy");
}

void synchronize(int index) {
  use_device(index, "cuda.synchronize");
  check(cudaDeviceSynchronize(), "cuda.synchronize");
}

}  // namespace saobp::cuda
