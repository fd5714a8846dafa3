// CUDA kernels: cross-entropy forward / backward. CPU twin: src/tensor/cpu/loss.cpp.
// Host side: loss.cpp.
#include <type_traits>

#include "tensor/bf16.h"
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// The log-sum-exp of a row in one read (the online softmax, docs/references.md): each
// thread keeps the largest value m it has seen and s = the sum of exp(x - m) over its values,
// rescaling s when m grows; the threads' pairs are then combined in a fixed order. Where the
// two-pass form (the CPU's) reads the row twice, for the max and then for the sum, this reads it
// once: the logits of a language model's head are its largest tensor (GPT-2 at B·T = 16384: 3.3
// GB in f32). s is a double, as the CPU's sum is; the terms are the same exp(x - m) in T except
// for the rescaling, so lse agrees with the CPU's to f32 rounding, not bitwise.
//
// Non-finite values give what the two-pass form gives: NaN for a row holding a NaN or +inf
// (exp(inf - inf)) and for a row all -inf; -inf entries of a finite row add nothing.
template <class T>
struct OnlineLse {
  T m = dmath::neg_inf<T>();
  double s = 0;

  __device__ __forceinline__ void add(T x) {
    if (x > m) {
      // exp(m - x) is 0 while m is -inf; exp(x - x) is 1, or NaN for x = +inf.
      s = s * ::exp(static_cast<double>(m - x)) + static_cast<double>(dmath::exp(x - x));
      m = x;
    } else if (x != x) {
      s = static_cast<double>(x);  // NaN
    } else if (m != dmath::neg_inf<T>()) {
      s += static_cast<double>(dmath::exp(x - m));
    }  // else x = m = -inf: nothing
  }
  // Folds in another thread's pair; a pair that saw nothing (m = -inf, s = 0) changes nothing.
  __device__ __forceinline__ void merge(T om, double os) {
    const T mx = om > m ? om : m;
    if (mx == dmath::neg_inf<T>()) {
      s += os;
      return;
    }
    s = s * ::exp(static_cast<double>(m - mx)) + os * ::exp(static_cast<double>(om - mx));
    m = mx;
  }
  __device__ __forceinline__ T lse() const {
    return m == dmath::neg_inf<T>() ? static_cast<T>(NAN) : m + static_cast<T>(::log(s));
  }
};

// Combines the pairs of a block of kBlock threads in a fixed order (a butterfly in each warp,
// then the warps in order); every thread gets the result. All threads must call it.
template <class T>
__device__ __forceinline__ OnlineLse<T> block_lse(OnlineLse<T> v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2)
    v.merge(__shfl_xor_sync(kFullMask, v.m, o), __shfl_xor_sync(kFullMask, v.s, o));
  __shared__ T pm[kBlock / kWarp];
  __shared__ double ps[kBlock / kWarp];
  __syncthreads();  // a previous row's readers are done with pm, ps
  if (lane() == 0) {
    pm[threadIdx.x / kWarp] = v.m;
    ps[threadIdx.x / kWarp] = v.s;
  }
  __syncthreads();
  OnlineLse<T> r;
  r.m = pm[0];
  r.s = ps[0];
#pragma unroll
  for (int w = 1; w < kBlock / kWarp; ++w) r.merge(pm[w], ps[w]);
  return r;
}

// logits: (N,V), rows ld apart  targets: (N)  losses, lse: (N). One block per row (V is a
// vocabulary), the row read once (OnlineLse).
template <class T>
__global__ void cross_entropy_forward_kernel(const T* logits, int64_t ld, const int32_t* targets,
                                             int64_t ignore, T* losses, T* lse, int64_t N, int64_t V) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = logits + n * ld;
    OnlineLse<T> acc;
    for (int64_t v = threadIdx.x; v < V; v += kBlock) acc.add(xr[v]);
    acc = block_lse(acc);
    if (threadIdx.x == 0) {
      const T l = acc.lse();
      // t is in [0, V) or ignore (check_index_range reports any other at the step's end); an
      // out-of-range t reads nothing.
      const int32_t t = targets[n];
      lse[n] = l;
      losses[n] = t == ignore || t < 0 || t >= V ? T(0) : l - xr[t];
    }
  }
}

// logits, glogits: (N,V), rows ld and ldo apart  targets, lse, gloss: (N). glogits += gloss
// (softmax - onehot), in the CPU's two steps; ignored rows get nothing. O: T, or uint16_t for a
// bf16 glogits (T = float, written: each f32 value rounded once, bf16_bits).
// I: the index type, uint32_t where N V < 2^32 (a 32-bit division per element instead of a 64-bit
// one, which bounds this kernel otherwise).
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(uint16_t* p, float v) { *p = bf16_bits(v); }
template <class T, class O>
__device__ __forceinline__ T loaded(const O* p) {
  if constexpr (std::is_same_v<O, T>) return *p;
  return T(0);  // a bf16 output is never accumulated (checked by the dispatcher)
}

template <class T, class O, class I>
__global__ void cross_entropy_backward_kernel(const T* logits, int64_t ld, const int32_t* targets,
                                              const T* lse, const T* gloss, int64_t ignore, O* glogits,
                                              int64_t ldo, int64_t N, int64_t V, bool accumulate) {
  for (int64_t i = thread_id(); i < N * V; i += thread_count()) {
    const int64_t n = static_cast<I>(i) / static_cast<I>(V), v = i - n * V;
    O* out = glogits + n * ldo + v;
    const int32_t t = targets[n];
    if (t == ignore) {
      if (!accumulate) store(out, T(0));
      continue;
    }
    const T g = gloss[n];
    T o = (accumulate ? loaded<T>(out) : T(0)) + g * dmath::exp(logits[n * ld + v] - lse[n]);
    if (v == t) o -= g;
    store(out, o);
  }
}

}  // namespace

template <class T>
cudaError_t launch_cross_entropy_forward(const T* logits, int64_t ld, const int32_t* targets, int64_t ignore,
                                         T* losses, T* lse, int64_t N, int64_t V) {
  cross_entropy_forward_kernel<<<grid_for(N, 1), kBlock>>>(logits, ld, targets, ignore, losses, lse, N, V);
  return cudaGetLastError();
}

namespace {
template <class T, class O>
cudaError_t backward_into(const T* logits, int64_t ld, const int32_t* targets, const T* lse, const T* gloss,
                          int64_t ignore, O* glogits, int64_t ldo, int64_t N, int64_t V, bool accumulate) {
  if (N * V < (int64_t{1} << 32))
    cross_entropy_backward_kernel<T, O, uint32_t><<<grid_for(N * V), kBlock>>>(
        logits, ld, targets, lse, gloss, ignore, glogits, ldo, N, V, accumulate);
  else
    cross_entropy_backward_kernel<T, O, int64_t><<<grid_for(N * V), kBlock>>>(
        logits, ld, targets, lse, gloss, ignore, glogits, ldo, N, V, accumulate);
  return cudaGetLastError();
}
}  // namespace

template <class T>
cudaError_t launch_cross_entropy_backward(const T* logits, int64_t ld, const int32_t* targets, const T* lse,
                                          const T* gloss, int64_t ignore, T* glogits, int64_t ldo, int64_t N,
                                          int64_t V, bool accumulate) {
  return backward_into(logits, ld, targets, lse, gloss, ignore, glogits, ldo, N, V, accumulate);
}

cudaError_t launch_cross_entropy_backward_bf16(const float* logits, int64_t ld, const int32_t* targets,
                                               const float* lse, const float* gloss, int64_t ignore,
                                               uint16_t* glogits, int64_t ldo, int64_t N, int64_t V) {
  return backward_into(logits, ld, targets, lse, gloss, ignore, glogits, ldo, N, V, false);
}

#define SAOBP_FLOATING(T)                                                                                  \
  template cudaError_t launch_cross_entropy_forward<T>(const T*, int64_t, const int32_t*, int64_t, T*, T*, \
                                                       int64_t, int64_t);                                  \
  template cudaError_t launch_cross_entropy_backward<T>(                                                   \
      const T*, int64_t, const int32_t*, const T*, const T*, int64_t, T*, int64_t, int64_t, int64_t, bool);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
