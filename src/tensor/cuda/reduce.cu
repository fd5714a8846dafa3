// CUDA kernels of the deterministic column sums behind reduce_sum_to (and LayerNorm's gw, gb).
// CPU twin: reduce_sum_to in src/tensor/cpu/elementwise.cpp. Host side: reduce.cpp.
//
// No atomics: the reduced index range is cut into fixed chunks (split_rows, launch.h). Pass 1
// gives each (chunk, output) pair to one thread, which adds its chunk in index order in double;
// pass 2 gives each output to one thread, which adds its chunk partials in chunk order. Every
// sum therefore has one fixed order, whatever the GPU schedules.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// src: strided, (O kept) x (R reduced) -> partial: (chunks.count, O)
template <class T>
__global__ void sum_chunks_kernel(const T* src, Indexer<1> kept, Indexer<1> reduced, int64_t O, int64_t R,
                                  Chunks chunks, double* partial) {
  for (int64_t i = thread_id(); i < chunks.count * O; i += thread_count()) {
    const int64_t p = i / O, o = i - p * O;
    const T* base = src + offset(kept, o);
    const int64_t end = imin(R, (p + 1) * chunks.per);
    double acc = 0;
    for (int64_t r = p * chunks.per; r < end; ++r) acc += base[offset(reduced, r)];
    partial[i] = acc;
  }
}

// partial: (chunks.count, cols) -> out: (cols)
template <class T>
__global__ void finish_chunks_kernel(const double* partial, Chunks chunks, int64_t cols, double alpha, T* out,
                                     bool accumulate) {
  for (int64_t o = thread_id(); o < cols; o += thread_count()) {
    double s = 0;
    for (int64_t p = 0; p < chunks.count; ++p) s += partial[p * cols + o];
    out[o] = accumulate ? static_cast<T>(out[o] + alpha * s) : static_cast<T>(alpha * s);
  }
}

}  // namespace

template <class T>
cudaError_t launch_sum_chunks(const T* src, const Indexer<1>& kept, const Indexer<1>& reduced, int64_t O,
                              int64_t R, Chunks chunks, double* partial) {
  sum_chunks_kernel<<<grid_for(chunks.count * O), kBlock>>>(src, kept, reduced, O, R, chunks, partial);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_finish_chunks(const double* partial, Chunks chunks, int64_t cols, double alpha, T* out,
                                 bool accumulate) {
  finish_chunks_kernel<<<grid_for(cols), kBlock>>>(partial, chunks, cols, alpha, out, accumulate);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                            \
  template cudaError_t launch_sum_chunks<T>(const T*, const Indexer<1>&, const Indexer<1>&, int64_t, \
                                            int64_t, Chunks, double*);                               \
  template cudaError_t launch_finish_chunks<T>(const double*, Chunks, int64_t, double, T*, bool);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
