// The CUDA runtime API as the emulator provides it (tests/cuda_emu/README.md), shadowing the
// toolkit's header. Everything lives in saobp::cuda, the namespace of the code that calls it:
//   - the kernel emulator of every test build compiles its copy of the kernels with
//     -Dcuda=cuda_emu, so there this is saobp::cuda_emu and links beside a real backend; it
//     uses the launch types and the error calls (emu.cpp);
//   - the emulated backend (SAOBP_CUDA=EMU) compiles the whole backend, host halves included,
//     against it: device memory is host memory, and runtime.cpp defines the rest.
#pragma once
#include <cstddef>
#include <cstdint>

namespace saobp::cuda {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
// The vector types the kernels load and store whole, with the toolkit's alignment.
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};

// The codes the emulator gives, with the runtime's values.
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaStream_t = struct EmuStream*;
using cudaEvent_t = struct EmuEvent*;
// The legacy default stream, the only one the backend uses (work runs in issue order).
inline const cudaStream_t cudaStreamLegacy = reinterpret_cast<cudaStream_t>(0x1);

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
constexpr unsigned cudaHostAllocDefault = 0, cudaHostAllocMapped = 2;
constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;

// library_types.h's data types, which the toolkit's cuda_runtime.h brings in.
enum cudaDataType_t : int { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16BF = 14 };

// The fields of cudaDeviceProp the backend reads.
struct cudaDeviceProp {
  char name[256] = {};
  size_t totalGlobalMem = 0;
  int major = 0, minor = 0;
  int multiProcessorCount = 0;
};

// The error of the last launch, cleared by the call (cudaGetLastError's contract); the peek
// leaves it (emu.cpp).
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);

// The emulated device (runtime.cpp; the emulated backend only).
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned flags);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop);

}  // namespace saobp::cuda
