// CUDA kernels: cross-entropy forward / backward. CPU twin: src/tensor/cpu/nn.cpp.
// Host side: loss.cpp.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// logits: (N,V)  targets: (N)  losses, lse: (N). One block per row (V is a vocabulary): max and
// sum of exponentials over the row through block_reduce, the sum in double as on the CPU.
template <class T>
__global__ void cross_entropy_forward_kernel(const T* logits, const int32_t* targets, int64_t ignore,
                                             T* losses, T* lse, int64_t N, int64_t V) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = logits + n * V;
    T mx = dmath::neg_inf<T>();
    for (int64_t v = threadIdx.x; v < V; v += kBlock) mx = Max{}(mx, xr[v]);
    mx = block_reduce(mx, Max{});
    double sum = 0;
    for (int64_t v = threadIdx.x; v < V; v += kBlock) sum += dmath::exp(xr[v] - mx);
    sum = block_reduce(sum, Sum{});
    if (threadIdx.x == 0) {
      const T l = mx + static_cast<T>(::log(sum));
      // t is in [0, V) or ignore (check_index_range reports any other at the step's end); an
      // out-of-range t reads nothing.
      const int32_t t = targets[n];
      lse[n] = l;
      losses[n] = t == ignore || t < 0 || t >= V ? T(0) : l - xr[t];
    }
  }
}

// logits, glogits: (N,V)  targets, lse, gloss: (N). glogits += gloss (softmax - onehot), in the
// CPU's two steps; ignored rows get nothing.
// I: the index type, uint32_t where N V < 2^32 (a 32-bit division per element instead of a 64-bit
// one, which bounds this kernel otherwise).
template <class T, class I>
__global__ void cross_entropy_backward_kernel(const T* logits, const int32_t* targets, const T* lse,
                                              const T* gloss, int64_t ignore, T* glogits, int64_t N,
                                              int64_t V, bool accumulate) {
  for (int64_t i = thread_id(); i < N * V; i += thread_count()) {
    const int64_t n = static_cast<I>(i) / static_cast<I>(V);
    const int32_t t = targets[n];
    if (t == ignore) {
      if (!accumulate) glogits[i] = T(0);
      continue;
    }
    const T g = gloss[n];
    T o = (accumulate ? glogits[i] : T(0)) + g * dmath::exp(logits[i] - lse[n]);
    if (i - n * V == t) o -= g;
    glogits[i] = o;
  }
}

}  // namespace

template <class T>
cudaError_t launch_cross_entropy_forward(const T* logits, const int32_t* targets, int64_t ignore, T* losses,
                                         T* lse, int64_t N, int64_t V) {
  cross_entropy_forward_kernel<<<grid_for(N, 1), kBlock>>>(logits, targets, ignore, losses, lse, N, V);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_cross_entropy_backward(const T* logits, const int32_t* targets, const T* lse,
                                          const T* gloss, int64_t ignore, T* glogits, int64_t N, int64_t V,
                                          bool accumulate) {
  if (N * V < (int64_t{1} << 32))
    cross_entropy_backward_kernel<T, uint32_t>
        <<<grid_for(N * V), kBlock>>>(logits, targets, lse, gloss, ignore, glogits, N, V, accumulate);
  else
    cross_entropy_backward_kernel<T, int64_t>
        <<<grid_for(N * V), kBlock>>>(logits, targets, lse, gloss, ignore, glogits, N, V, accumulate);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                                  \
  template cudaError_t launch_cross_entropy_forward<T>(const T*, const int32_t*, int64_t, T*, T*, int64_t, \
                                                       int64_t);                                           \
  template cudaError_t launch_cross_entropy_backward<T>(const T*, const int32_t*, const T*, const T*,      \
                                                        int64_t, T*, int64_t, int64_t, bool);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
