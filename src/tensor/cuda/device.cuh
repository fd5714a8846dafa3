// Device-side helpers of the CUDA kernels (*.cu only): launch geometry, grid-stride indexing,
// strided offsets, math overloads, and warp/block reductions whose order is fixed, so a result
// never depends on scheduling (no atomics anywhere).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/cuda/launch.h"

namespace saobp::cuda {

constexpr int kBlock = 256;  // threads per block of every kernel
constexpr int kWarp = 32;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover larger problems
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for `items` work items of which one block takes `per_block`: in [1, kMaxBlocks].
inline unsigned grid_for(int64_t items, int64_t per_block = kBlock) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, kMaxBlocks));
}

// Grid-stride loops: for (i = thread_id(); i < n; i += thread_count()). The warp versions hand
// one work item (a row) to all 32 lanes of a warp, so the loop is warp-uniform.
__device__ __forceinline__ int64_t thread_id() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t warp_id() { return thread_id() / kWarp; }
__device__ __forceinline__ int64_t warp_count() { return thread_count() / kWarp; }
__device__ __forceinline__ int lane() { return static_cast<int>(threadIdx.x % kWarp); }

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

// Element offsets of linear index i for each operand of ix (innermost dim first; the outermost
// digit needs no division). Unrolled over kMaxDims so the strides stay in parameter space.
// I: int64_t, or uint32_t where fits_u32(ix, n) (launch.h): a 32-bit division is a few
// instructions, a 64-bit one a long emulated sequence, and strided copies are bound by them.
template <class I, int N>
__device__ __forceinline__ void offsets_as(const Indexer<N>& ix, I i, I (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d > 0; --d) {
    if (d < ix.dims) {
      const I size = static_cast<I>(ix.size[d]), q = i / size, digit = i - q * size;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += digit * static_cast<I>(ix.stride[k][d]);
      i = q;
    }
  }
  if (ix.dims > 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += i * static_cast<I>(ix.stride[k][0]);
  }
}
template <int N>
__device__ __forceinline__ void offsets(const Indexer<N>& ix, int64_t i, int64_t (&off)[N]) {
  offsets_as<int64_t, N>(ix, i, off);
}
__device__ __forceinline__ int64_t offset(const Indexer<1>& ix, int64_t i) {
  int64_t off[1];
  offsets(ix, i, off);
  return off[0];
}

// Math in the element type (the CPU twins call std:: on T).
namespace dmath {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs(double x) { return ::fabs(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
template <class T>
__device__ __forceinline__ T neg_inf() {
  return static_cast<T>(-INFINITY);
}
}  // namespace dmath

// Row r of a MaskView: allowed(c) says whether column c is allowed (launch.h).
struct RowMask {
  const uint8_t* m;
  int64_t step, last;
  __device__ __forceinline__ bool operator()(int64_t c) const { return c <= last && (!m || m[c * step]); }
};
__device__ __forceinline__ RowMask row_mask(const MaskView& mask, int64_t r, int64_t C) {
  return {mask.base ? mask.base + offset(mask.rows, r) : nullptr, mask.step,
          mask.causal > 0 ? r % mask.causal : C - 1};
}

struct Sum {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
// b > a ? b : a, like the CPU's `if (x > mx) mx = x` (callers never feed it NaN).
struct Max {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};

// Reduces v over the 32 lanes of a warp (all lanes active) by a butterfly of fixed shape, then
// hands every lane lane 0's result, so control flow that depends on it stays warp-uniform.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  return __shfl_sync(kFullMask, v, 0);
}

// Reduces v over a block of kBlock threads; every thread gets the same result, combined in warp
// order. All threads of the block must call it (it synchronizes).
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op) {
  __shared__ T partial[kBlock / kWarp];
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with `partial`
  if (lane() == 0) partial[threadIdx.x / kWarp] = v;
  __syncthreads();
  v = partial[0];
#pragma unroll
  for (int w = 1; w < kBlock / kWarp; ++w) v = op(v, partial[w]);
  return v;
}

}  // namespace saobp::cuda
