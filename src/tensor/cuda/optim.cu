// CUDA optimizer kernels: one AdamW step (formula::adamw_update, src/tensor/formulas.h).
// CPU twin: src/tensor/cpu/optim.cpp. Host: optim.cpp.
// Elementwise, one thread per parameter: no reduction, so nothing to order.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// p, g, m, v: (n)
template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, formula::AdamWCoeffs h, int64_t n) {
  const formula::AdamWStep<T> c(h);
  for (int64_t i = thread_id(); i < n; i += thread_count()) formula::adamw_update(c, g[i], p[i], m[i], v[i]);
}

// The tensor of block b: the last t with first_block[t] <= b (binary search over the table).
__device__ __forceinline__ int tensor_of_block(const int32_t* first_block, int count, int32_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_block[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// One block a chunk: the chunk's squares (in T) added in double, in a fixed tree (block_reduce).
template <class T>
__global__ void multi_sum_squares_kernel(const MultiSquares<T> list, double* partial) {
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  const int t = tensor_of_block(list.first_block, list.count, b);
  const int64_t begin = static_cast<int64_t>(b - list.first_block[t]) * kMultiChunk;
  const int64_t end = imin(list.n[t], begin + kMultiChunk);
  const T* x = list.x[t];
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlock) {
    const T sq = x[i] * x[i];
    acc += static_cast<double>(sq);
  }
  acc = block_reduce(acc, Sum{});
  if (threadIdx.x == 0) partial[b] = acc;
}

// Tensor t's chunk sums in chunk order, rounded to T (as reduce_sum_to's result), widened.
template <class T>
__global__ void multi_sum_squares_finish(const MultiSquares<T> list, const double* partial, double* sums) {
  for (int t = static_cast<int>(thread_id()); t < list.count; t += static_cast<int>(thread_count())) {
    double s = 0;
    for (int32_t b = list.first_block[t]; b < list.first_block[t + 1]; ++b) s += partial[b];
    sums[t] = static_cast<double>(static_cast<T>(s));
  }
}

template <class T>
__global__ void multi_adamw_kernel(const MultiAdamW<T> list) {
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  const int t = tensor_of_block(list.first_block, list.count, b);
  const int64_t begin = static_cast<int64_t>(b - list.first_block[t]) * kMultiChunk;
  const int64_t end = imin(list.n[t], begin + kMultiChunk);
  const formula::AdamWStep<T> c(list.coeffs[list.coeff[t]]);
  const bool scaled = list.grad_scale != 1.0;
  const T scale = static_cast<T>(list.grad_scale);
  T* p = list.p[t];
  T* g = list.g[t];
  T* m = list.m[t];
  T* v = list.v[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlock) {
    if (scaled) g[i] = scale * g[i];  // axpby(g, scale, g, 0): alpha x in T
    formula::adamw_update(c, g[i], p[i], m[i], v[i]);
  }
}

}  // namespace

template <class T>
cudaError_t launch_multi_sum_squares(const MultiSquares<T>& list, double* partial, double* sums) {
  if (list.count == 0) return cudaSuccess;
  multi_sum_squares_kernel<T><<<list.first_block[list.count], kBlock>>>(list, partial);
  multi_sum_squares_finish<T><<<grid_for(list.count), kBlock>>>(list, partial, sums);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_multi_adamw(const MultiAdamW<T>& list) {
  if (list.count == 0) return cudaSuccess;
  multi_adamw_kernel<T><<<list.first_block[list.count], kBlock>>>(list);
  return cudaGetLastError();
}

template cudaError_t launch_multi_sum_squares<float>(const MultiSquares<float>&, double*, double*);
template cudaError_t launch_multi_sum_squares<double>(const MultiSquares<double>&, double*, double*);
template cudaError_t launch_multi_adamw<float>(const MultiAdamW<float>&);
template cudaError_t launch_multi_adamw<double>(const MultiAdamW<double>&);

template <class T>
cudaError_t launch_adamw(T* p, const T* g, T* m, T* v, const formula::AdamWCoeffs& h, int64_t n) {
  adamw_kernel<<<grid_for(n), kBlock>>>(p, g, m, v, h, n);
  return cudaGetLastError();
}

template cudaError_t launch_adamw<float>(float*, const float*, float*, float*, const formula::AdamWCoeffs&,
                                         int64_t);
template cudaError_t launch_adamw<double>(double*, const double*, double*, double*,
                                          const formula::AdamWCoeffs&, int64_t);

}  // namespace saobp::cuda
