// CUDA kernels: embedding forward / backward, and the index check shared with the loss.
// CPU twin: src/tensor/cpu/nn.cpp. Host side: embedding.cpp.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// idx: (n). Every offending thread stores the same 1: the result does not depend on order.
__global__ void flag_bad_indices_kernel(const int32_t* idx, int64_t n, int64_t limit, int64_t ignore,
                                        int32_t* flag) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    const int64_t v = idx[i];
    if ((v < 0 || v >= limit) && v != ignore) *flag = 1;
  }
}

// weight: (V,C)  ids: (N)  out: (N,C). One thread per output element.
template <class T>
// An id outside [0, V) gives a row of zeros instead of a read outside the table: the index check
// of the step reports it (check_index_range, embedding.cpp), and nothing faults before.
__global__ void embedding_forward_kernel(const T* weight, const int32_t* ids, T* out, int64_t N, int64_t C,
                                         int64_t V) {
  for (int64_t i = thread_id(); i < N * C; i += thread_count()) {
    const int64_t n = i / C, c = i - n * C, v = ids[n];
    out[i] = v >= 0 && v < V ? weight[v * C + c] : T(0);
  }
}

// ids: (N)  gout: (N,C)  gweight: (V,C); ids outside [0, V) add nothing. Ownership instead of atomics: thread
// (s, c) owns column c of the vocabulary rows v with v % S == s, and walks n = 0..N-1 adding gout[n, c] to
// its rows. Each gweight element thus has one writer, which adds its gradients in increasing n: the order of
// the CPU's loop, so the result is the CPU's, bitwise. S (a function of C and V only) just spreads the
// vocabulary over more threads; threads of a warp share s, so the branch and the ids[n] load are
// warp-uniform.
template <class T>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* gout, T* gweight, int64_t N, int64_t C,
                                          int64_t V, int32_t S) {
  for (int64_t i = thread_id(); i < S * C; i += thread_count()) {
    const int32_t s = static_cast<int32_t>(i / C);
    const int64_t c = i - s * C;
    // The element being added to stays in a register while the ids repeat it (a position or
    // token-type table: every id the same row): the same additions in the same order as adding
    // into memory each time, without a chain of dependent reads and writes of global memory.
    int64_t row = -1;
    T acc = T(0);
    for (int64_t n = 0; n < N; ++n) {
      const int32_t v = ids[n];
      if (v < 0 || v >= V || v % S != s) continue;
      if (v != row) {
        if (row >= 0) gweight[row * C + c] = acc;
        row = v;
        acc = gweight[row * C + c];
      }
      acc += gout[n * C + c];
    }
    if (row >= 0) gweight[row * C + c] = acc;
  }
}

}  // namespace

cudaError_t launch_flag_bad_indices(const int32_t* idx, int64_t n, int64_t limit, int64_t ignore,
                                    int32_t* flag) {
  flag_bad_indices_kernel<<<grid_for(n), kBlock>>>(idx, n, limit, ignore, flag);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_embedding_forward(const T* weight, const int32_t* ids, T* out, int64_t N, int64_t C,
                                     int64_t V) {
  embedding_forward_kernel<<<grid_for(N * C), kBlock>>>(weight, ids, out, N, C, V);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_embedding_backward(const int32_t* ids, const T* gout, T* gweight, int64_t N, int64_t C,
                                      int64_t V) {
  // About 64K threads: S = ceil(65536 / C) vocabulary shards, at most V.
  const auto S = static_cast<int32_t>(std::clamp<int64_t>((65536 + C - 1) / C, 1, V));
  embedding_backward_kernel<<<grid_for(S * C), kBlock>>>(ids, gout, gweight, N, C, V, S);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                                    \
  template cudaError_t launch_embedding_forward<T>(const T*, const int32_t*, T*, int64_t, int64_t, int64_t); \
  template cudaError_t launch_embedding_backward<T>(const int32_t*, const T*, T*, int64_t, int64_t, int64_t);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
