// The CUDA runtime as the emulated kernels see it (tests/cuda_emu/emu.h): the launch types and
// the error calls of a launcher, nothing else (no memory: the emulated kernels work on host
// memory). It shadows the toolkit's header for the translated .cu files only, and everything in
// it lives in saobp::cuda_emu, the namespace those files' saobp::cuda becomes (-Dcuda=cuda_emu),
// so a build with the real CUDA backend links both without a clash.
#pragma once
#include <cstdint>

namespace saobp::cuda_emu {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

// The codes an emulated launch can give, with the runtime's values.
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
using cudaStream_t = struct EmuStream*;

// The error of the last launch, cleared by the call (cudaGetLastError's contract); the peek
// leaves it.
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);

}  // namespace saobp::cuda_emu
