// Kernels that check the CUDA kernel emulator itself (emu.h), for the [emu] test of
// tests/tensor/test_cuda_emulated.cpp: a block reduction through device.cuh's warp_reduce and
// block_reduce, a read of another thread's write without a barrier (a race: its result follows
// the order the threads run in), and a deadlock. Written as any kernel of src/ and translated
// the same way; only the emulator compiles it.
#include "bridge.h"
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// out[block] = the sum of in over the block's kBlock elements, by block_reduce; any_negative[block] =
// whether any thread saw a negative input (__any_sync, then the block's warps in order).
__global__ void reduce_kernel(const double* in, double* out, int* any_negative) {
  const double v = in[blockIdx.x * blockDim.x + threadIdx.x];
  const double total = block_reduce(v, Sum{});
  const int neg = __any_sync(kFullMask, v < 0);
  const int any = block_reduce(neg, Max{});
  if (threadIdx.x == 0) out[blockIdx.x] = total, any_negative[blockIdx.x] = any;
}

// Each thread writes its index, then (without a barrier when `barrier` is false) reads its
// right neighbour's: with the barrier, out[t] = t + 1 for every thread but the last.
__global__ void neighbour_kernel(bool barrier, int* out) {
  __shared__ int cell[kBlock];
  const int t = static_cast<int>(threadIdx.x);
  cell[t] = -1;
  __syncthreads();
  cell[t] = t;
  if (barrier) __syncthreads();
  out[t] = t + 1 < kBlock ? cell[t + 1] : -2;
}

// Lanes 0-15 of warp 0 wait at __syncthreads while lanes 16-31 wait in a shuffle for them.
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x >= kWarp) return;
  if (threadIdx.x < kWarp / 2) {
    __syncthreads();
    return;
  }
  out[threadIdx.x] = __shfl_sync(kFullMask, static_cast<int>(threadIdx.x), 0);
}

__global__ void nothing_kernel() {}

}  // namespace

}  // namespace saobp::cuda

namespace saobp::emu_bridge {

namespace cu = saobp::cuda;
using namespace saobp::cuda;  // the kernels above

std::string selftest_reduce(const double* in, int blocks, double* out, int* any_negative) {
  reduce_kernel<<<blocks, cu::kBlock>>>(in, out, any_negative);
  const cu::cudaError_t e = cu::cudaGetLastError();
  return e == cu::cudaSuccess ? "" : cu::emu::last_failure();
}

std::string selftest_neighbours(bool barrier, int* out) {
  neighbour_kernel<<<1, cu::kBlock>>>(barrier, out);
  return cu::cudaGetLastError() == cu::cudaSuccess ? "" : cu::emu::last_failure();
}

std::string selftest_deadlock(int* out) {
  deadlock_kernel<<<1, cu::kBlock>>>(out);
  const cu::cudaError_t e = cu::cudaGetLastError();
  return e == cu::cudaErrorLaunchFailure ? cu::emu::last_failure() : "";
}

std::string selftest_bad_configuration() {
  nothing_kernel<<<1, 2048>>>();
  const cu::cudaError_t e = cu::cudaGetLastError();
  return e == cu::cudaErrorInvalidConfiguration ? cu::emu::last_failure() : "";
}

}  // namespace saobp::emu_bridge
