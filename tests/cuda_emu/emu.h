// The CUDA kernel emulator: the device side of CUDA C++ on the host, so the project's kernels run
// and are tested on a machine without a GPU (README.md beside it says what it checks and what it
// cannot).
//
// A translated .cu file (translate.cmake rewrites each `kernel<<<grid, block>>>(args);` into
// `emu::Launch(grid, block).run([=] { kernel(args); });`) is compiled by the host compiler with
// this header forced in front (-include) and the shadow cuda_runtime.h of include/ on the path.
// Everything here is written in saobp::cuda, the backend's namespace: the kernel emulator of the
// test builds adds -Dcuda=cuda_emu, so its copy becomes saobp::cuda_emu and links beside the real
// backend; the emulated backend (SAOBP_CUDA=EMU) keeps the name, being the only backend there.
//
// What the kernels see:
//   __global__, __device__, __host__       nothing: plain host functions;
//   __shared__                             static: one copy per variable, which the threads of a
//                                          block share, and blocks run one after another;
//   threadIdx, blockIdx, blockDim, gridDim the running thread's;
//   __syncthreads                          a barrier of the block's live threads (a thread that
//                                          returned no longer counts, as on the GPU);
//   __shfl_sync, __shfl_xor_sync, __any_sync  a barrier of the warp's lanes with an exchange;
//                                          full warps only (every mask the kernels pass).
// Each thread of a block is a fiber (Boost.Context) with a stack of its own; the block's fibers run
// one at a time until each returns or waits at a barrier. The order in which they run is set by
// set_order: a kernel whose result changes with it reads memory another thread writes without a
// barrier between them (a race the GPU may or may not show). A deadlock (threads waiting at
// barriers no other thread will reach), a shuffle with a lane that has returned, or a bad launch
// configuration fails the launch: cudaGetLastError gives the error and last_failure() says why.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

#include "cuda_runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict

namespace saobp::cuda::emu {

const uint3& thread_idx();
const uint3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();

void syncthreads();
// The warp exchange under every shuffle and vote: each lane of the running thread's warp
// deposits `bits`, and once all have, gets lane `src`'s (src outside the warp: its own).
uint64_t warp_exchange(unsigned mask, uint64_t bits, int src);
// Whether any lane of the warp passed a non-zero `pred`.
bool warp_any(unsigned mask, bool pred);
int lane();

// Runs body once per thread of grid × block, a block at a time; the error, if any, becomes the
// last error (cudaGetLastError).
void launch(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body);

struct Launch {
  dim3 grid, block;
  size_t shared = 0;
  explicit Launch(dim3 g, dim3 b, size_t s = 0, cudaStream_t = nullptr) : grid(g), block(b), shared(s) {}
  template <class F>
  void run(F&& body) const {
    launch(grid, block, shared, std::function<void()>(std::forward<F>(body)));
  }
};

// Makes e (unless cudaSuccess) the last error, as a failing runtime call does; returns e.
cudaError_t set_last_error(cudaError_t e);

// The order the fibers of a block run in (forward: thread 0 first).
enum class Order { forward, reverse };
void set_order(Order o);
// Why the last failed launch failed ("" after a good one).
std::string last_failure();

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

}  // namespace saobp::cuda::emu

#define threadIdx (::saobp::cuda::emu::thread_idx())
#define blockIdx (::saobp::cuda::emu::block_idx())
#define blockDim (::saobp::cuda::emu::block_dim())
#define gridDim (::saobp::cuda::emu::grid_dim())

inline void __syncthreads() { ::saobp::cuda::emu::syncthreads(); }

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  namespace e = ::saobp::cuda::emu;
  const int base = e::lane() / width * width;
  return e::from_bits<T>(e::warp_exchange(mask, e::to_bits(v), base + src % width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  namespace e = ::saobp::cuda::emu;
  const int src = e::lane() ^ lane_mask;
  return e::from_bits<T>(
      e::warp_exchange(mask, e::to_bits(v), src / width == e::lane() / width ? src : e::lane()));
}
inline int __any_sync(unsigned mask, int pred) { return ::saobp::cuda::emu::warp_any(mask, pred != 0); }

// The arithmetic intrinsics that keep nvcc from contracting a product into an FMA: on the host
// (-ffp-contract=off) the plain operations round the same way.
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
// Device code calls the classification functions unqualified.
using std::isfinite;
using std::isinf;
using std::isnan;
