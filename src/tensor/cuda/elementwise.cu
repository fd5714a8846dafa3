// CUDA kernels: fill, copy, cast, axpby, binary, unary. One thread per element in grid-stride
// loops.
// CPU twin: src/tensor/cpu/elementwise.cpp. Host side: elementwise.cpp.
#include "tensor/bf16.h"
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// out: strided (ix). I: the index type (device.cuh offsets_as).
template <class T, class I>
__global__ void fill_kernel(T* out, Indexer<1> ix, int64_t n, T value) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    I off[1];
    offsets_as<I, 1>(ix, static_cast<I>(i), off);
    out[off[0]] = value;
  }
}

// dst, src: strided (ix: dst, src)
template <class T, class I>
__global__ void copy_kernel(const T* src, T* dst, Indexer<2> ix, int64_t n, bool accumulate) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    I off[2];
    offsets_as<I, 2>(ix, static_cast<I>(i), off);
    dst[off[0]] = accumulate ? static_cast<T>(dst[off[0]] + src[off[1]]) : src[off[1]];
  }
}

// src, dst: (n)
template <class S, class D>
__global__ void cast_kernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) dst[i] = static_cast<D>(src[i]);
}

// src, dst: (n). bf16 as its bits; bf16_bits / bf16_value are the CPU's conversions. Four
// elements a thread (one 16-byte float4 and one 8-byte uint2 access for the four) where both
// pointers allow it, which launch_to_bf16 / launch_from_bf16 check; the last n % 4 one at a
// time. The bits are the same either way: each element is converted on its own.
__global__ void to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) dst[i] = bf16_bits(src[i]);
}
__global__ void from_bf16_kernel(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) dst[i] = bf16_value(src[i]);
}
__device__ __forceinline__ unsigned bf16_pair(float lo, float hi) {
  return static_cast<unsigned>(bf16_bits(lo)) | (static_cast<unsigned>(bf16_bits(hi)) << 16);
}
__global__ void to_bf16_x4_kernel(const float* src, uint16_t* dst, int64_t n) {
  const int64_t n4 = n / 4;
  const auto* s4 = reinterpret_cast<const float4*>(src);
  auto* d4 = reinterpret_cast<uint2*>(dst);
  for (int64_t i = thread_id(); i < n4; i += thread_count()) {
    const float4 v = s4[i];
    d4[i] = uint2{bf16_pair(v.x, v.y), bf16_pair(v.z, v.w)};
  }
  if (thread_id() < n - 4 * n4) dst[4 * n4 + thread_id()] = bf16_bits(src[4 * n4 + thread_id()]);
}
__global__ void from_bf16_x4_kernel(const uint16_t* src, float* dst, int64_t n) {
  const int64_t n4 = n / 4;
  const auto* s4 = reinterpret_cast<const uint2*>(src);
  auto* d4 = reinterpret_cast<float4*>(dst);
  for (int64_t i = thread_id(); i < n4; i += thread_count()) {
    const uint2 v = s4[i];
    d4[i] = float4{bf16_value(static_cast<uint16_t>(v.x)), bf16_value(static_cast<uint16_t>(v.x >> 16)),
                   bf16_value(static_cast<uint16_t>(v.y)), bf16_value(static_cast<uint16_t>(v.y >> 16))};
  }
  if (thread_id() < n - 4 * n4) dst[4 * n4 + thread_id()] = bf16_value(src[4 * n4 + thread_id()]);
}

// x, y: (n)
template <class T>
__global__ void axpby_kernel(const T* x, T alpha, T* y, T beta, bool ignore_y, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count())
    y[i] = ignore_y ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

// out, a, b: strided (ix: out, a, b)
template <class T, Arith OP, class I>
__global__ void binary_kernel(const T* a, const T* b, T* out, Indexer<3> ix, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    I off[3];
    offsets_as<I, 3>(ix, static_cast<I>(i), off);
    out[off[0]] = formula::arith<T, OP>(a[off[1]], b[off[2]]);
  }
}

// y = f(x):  exp, log, log1p, softplus(x) = max(x,0) + log1p(e^-|x|) (the CPU's form).
template <class T, Unary OP>
__device__ __forceinline__ T unary_value(T x) {
  if constexpr (OP == Unary::exp) return dmath::exp(x);
  if constexpr (OP == Unary::log) return dmath::log(x);
  if constexpr (OP == Unary::log1p) return dmath::log1p(x);
  if constexpr (OP == Unary::softplus)
    return (x < T(0) ? T(0) : x) + dmath::log1p(dmath::exp(-dmath::abs(x)));
}

// gy f'(x):  exp → gy y,  log → gy / x,  log1p → gy / (1 + x),  softplus → gy / (1 + e^-x).
template <class T, Unary OP>
__device__ __forceinline__ T unary_grad(T x, T y, T gy) {
  if constexpr (OP == Unary::exp) return gy * y;
  if constexpr (OP == Unary::log) return gy / x;
  if constexpr (OP == Unary::log1p) return gy / (T(1) + x);
  if constexpr (OP == Unary::softplus) return gy / (T(1) + dmath::exp(-x));
}

// x, y: (n)
template <class T, Unary OP>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) y[i] = unary_value<T, OP>(x[i]);
}

// x, y, gy, gx: (n)
template <class T, Unary OP>
__global__ void unary_backward_kernel(const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) gx[i] += unary_grad<T, OP>(x[i], y[i], gy[i]);
}

}  // namespace

template <class T>
cudaError_t launch_fill(T* out, const Indexer<1>& ix, int64_t n, T value) {
  if (fits_u32(ix, n))
    fill_kernel<T, uint32_t><<<grid_for(n), kBlock>>>(out, ix, n, value);
  else
    fill_kernel<T, int64_t><<<grid_for(n), kBlock>>>(out, ix, n, value);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_copy(const T* src, T* dst, const Indexer<2>& ix, int64_t n, bool accumulate) {
  if (fits_u32(ix, n))
    copy_kernel<T, uint32_t><<<grid_for(n), kBlock>>>(src, dst, ix, n, accumulate);
  else
    copy_kernel<T, int64_t><<<grid_for(n), kBlock>>>(src, dst, ix, n, accumulate);
  return cudaGetLastError();
}

template <class S, class D>
cudaError_t launch_cast(const S* src, D* dst, int64_t n) {
  cast_kernel<<<grid_for(n), kBlock>>>(src, dst, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_axpby(const T* x, T alpha, T* y, T beta, bool ignore_y, int64_t n) {
  axpby_kernel<<<grid_for(n), kBlock>>>(x, alpha, y, beta, ignore_y, n);
  return cudaGetLastError();
}

namespace {
template <class T, class I>
void binary_as(Arith op, const T* a, const T* b, T* out, const Indexer<3>& ix, int64_t n) {
  switch (op) {
    case Arith::add:
      binary_kernel<T, Arith::add, I><<<grid_for(n), kBlock>>>(a, b, out, ix, n);
      break;
    case Arith::sub:
      binary_kernel<T, Arith::sub, I><<<grid_for(n), kBlock>>>(a, b, out, ix, n);
      break;
    case Arith::mul:
      binary_kernel<T, Arith::mul, I><<<grid_for(n), kBlock>>>(a, b, out, ix, n);
      break;
    case Arith::div:
      binary_kernel<T, Arith::div, I><<<grid_for(n), kBlock>>>(a, b, out, ix, n);
      break;
  }
}
}  // namespace

template <class T>
cudaError_t launch_binary(Arith op, const T* a, const T* b, T* out, const Indexer<3>& ix, int64_t n) {
  if (fits_u32(ix, n))
    binary_as<T, uint32_t>(op, a, b, out, ix, n);
  else
    binary_as<T, int64_t>(op, a, b, out, ix, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_unary(Unary op, const T* x, T* y, int64_t n) {
  switch (op) {
    case Unary::exp:
      unary_kernel<T, Unary::exp><<<grid_for(n), kBlock>>>(x, y, n);
      break;
    case Unary::log:
      unary_kernel<T, Unary::log><<<grid_for(n), kBlock>>>(x, y, n);
      break;
    case Unary::log1p:
      unary_kernel<T, Unary::log1p><<<grid_for(n), kBlock>>>(x, y, n);
      break;
    case Unary::softplus:
      unary_kernel<T, Unary::softplus><<<grid_for(n), kBlock>>>(x, y, n);
      break;
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_unary_backward(Unary op, const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  switch (op) {
    case Unary::exp:
      unary_backward_kernel<T, Unary::exp><<<grid_for(n), kBlock>>>(x, y, gy, gx, n);
      break;
    case Unary::log:
      unary_backward_kernel<T, Unary::log><<<grid_for(n), kBlock>>>(x, y, gy, gx, n);
      break;
    case Unary::log1p:
      unary_backward_kernel<T, Unary::log1p><<<grid_for(n), kBlock>>>(x, y, gy, gx, n);
      break;
    case Unary::softplus:
      unary_backward_kernel<T, Unary::softplus><<<grid_for(n), kBlock>>>(x, y, gy, gx, n);
      break;
  }
  return cudaGetLastError();
}

namespace {
// float4 wants 16-byte alignment, uint2 8: a tensor's storage is 256-aligned, a view may not be.
bool aligned_x4(const float* f, const uint16_t* h) {
  return reinterpret_cast<uintptr_t>(f) % 16 == 0 && reinterpret_cast<uintptr_t>(h) % 8 == 0;
}
}  // namespace

cudaError_t launch_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  if (aligned_x4(src, dst))
    to_bf16_x4_kernel<<<grid_for((n + 3) / 4), kBlock>>>(src, dst, n);
  else
    to_bf16_kernel<<<grid_for(n), kBlock>>>(src, dst, n);
  return cudaGetLastError();
}
cudaError_t launch_from_bf16(const uint16_t* src, float* dst, int64_t n) {
  if (aligned_x4(dst, src))
    from_bf16_x4_kernel<<<grid_for((n + 3) / 4), kBlock>>>(src, dst, n);
  else
    from_bf16_kernel<<<grid_for(n), kBlock>>>(src, dst, n);
  return cudaGetLastError();
}

#define SAOBP_CAST_TO(S, D) template cudaError_t launch_cast<S, D>(const S*, D*, int64_t);
#define SAOBP_STORABLE(T)                                                              \
  template cudaError_t launch_fill<T>(T*, const Indexer<1>&, int64_t, T);              \
  template cudaError_t launch_copy<T>(const T*, T*, const Indexer<2>&, int64_t, bool); \
  SAOBP_CAST_TO(T, float) SAOBP_CAST_TO(T, double) SAOBP_CAST_TO(T, int32_t) SAOBP_CAST_TO(T, uint8_t)
#define SAOBP_FLOATING(T)                                                                           \
  template cudaError_t launch_axpby<T>(const T*, T, T*, T, bool, int64_t);                          \
  template cudaError_t launch_binary<T>(Arith, const T*, const T*, T*, const Indexer<3>&, int64_t); \
  template cudaError_t launch_unary<T>(Unary, const T*, T*, int64_t);                               \
  template cudaError_t launch_unary_backward<T>(Unary, const T*, const T*, const T*, T*, int64_t);
SAOBP_STORABLE(float)
SAOBP_STORABLE(double)
SAOBP_STORABLE(int32_t)
SAOBP_STORABLE(uint8_t)
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)
// bf16 tensors are copied as their bits (never accumulated).
template cudaError_t launch_copy<uint16_t>(const uint16_t*, uint16_t*, const Indexer<2>&, int64_t, bool);

}  // namespace saobp::cuda
