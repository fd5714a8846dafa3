// CUDA kernels drawing from Philox: fill_random, dropout_forward / dropout_backward.
// CPU twin: src/tensor/cpu/random.cpp. Host side: random.cpp.
//
// Element i of a draw uses Philox word (or normal number) key.offset + i of (key.seed,
// key.stream), exactly as the CPU does (src/tensor/philox.h), so both devices draw the same
// numbers and keep the same dropout mask. The uniform transform uses round-to-nearest
// intrinsics so nvcc cannot fuse it into an FMA: its bits then match the CPU's.
#include "tensor/cuda/device.cuh"
#include "tensor/philox.h"

namespace saobp::cuda {

namespace {

// U_i in [0, 1): 24 random bits, exact in f32 and f64.
__device__ __forceinline__ float unit(const PhiloxKey& key, int64_t i) {
  return philox::to_unit_float(philox::word(key.seed, key.stream, key.offset + static_cast<uint64_t>(i)));
}

// out: (n)
template <class T>
__global__ void fill_random_kernel(T* out, int64_t n, bool normal, double a, double b, PhiloxKey key) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    if (normal) {
      const double z = philox::normal(key.seed, key.stream, key.offset + static_cast<uint64_t>(i));
      out[i] = static_cast<T>(__dadd_rn(a, __dmul_rn(b, z)));
    } else {
      out[i] = static_cast<T>(__dadd_rn(a, __dmul_rn(b - a, unit(key, i))));
    }
  }
}

// x, y, mask: (n)
template <class T>
__global__ void dropout_forward_kernel(const T* x, float p, T scale, PhiloxKey key, T* y, uint8_t* mask,
                                       int64_t n) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    const bool keep = unit(key, i) >= p;
    mask[i] = keep;
    y[i] = keep ? x[i] * scale : T(0);
  }
}

// gy, mask, gx: (n)
template <class T>
__global__ void dropout_backward_kernel(const T* gy, const uint8_t* mask, T scale, T* gx, int64_t n,
                                        bool accumulate) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    if (mask[i])
      gx[i] = (accumulate ? gx[i] : T(0)) + gy[i] * scale;
    else if (!accumulate)
      gx[i] = T(0);
  }
}

}  // namespace

template <class T>
cudaError_t launch_fill_random(T* out, int64_t n, bool normal, double a, double b, PhiloxKey key) {
  fill_random_kernel<<<grid_for(n), kBlock>>>(out, n, normal, a, b, key);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_dropout_forward(const T* x, float p, T scale, PhiloxKey key, T* y, uint8_t* mask,
                                   int64_t n) {
  dropout_forward_kernel<<<grid_for(n), kBlock>>>(x, p, scale, key, y, mask, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_dropout_backward(const T* gy, const uint8_t* mask, T scale, T* gx, int64_t n,
                                    bool accumulate) {
  dropout_backward_kernel<<<grid_for(n), kBlock>>>(gy, mask, scale, gx, n, accumulate);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                               \
  template cudaError_t launch_fill_random<T>(T*, int64_t, bool, double, double, PhiloxKey);             \
  template cudaError_t launch_dropout_forward<T>(const T*, float, T, PhiloxKey, T*, uint8_t*, int64_t); \
  template cudaError_t launch_dropout_backward<T>(const T*, const uint8_t*, T, T*, int64_t, bool);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
