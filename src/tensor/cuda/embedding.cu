// CUDA kernels: embedding forward / backward, and the index check shared with the loss.
// CPU twin: src/tensor/cpu/nn.cpp. Host side: embedding.cpp.
#include <cub/device/device_radix_sort.cuh>

#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// Bits the radix sort looks at: enough for the keys 0..V (V marks an id outside the table).
int key_bits(int64_t V) {
  int b = 1;
  while (b < 31 && (int64_t{1} << b) <= V) ++b;
  return b;
}

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

// The backward, gweight[ids[n]] += gout[n] for n = 0..N-1, without atomics and with the CPU's
// bits. The ids are sorted stably by value (CUB's radix sort, which is stable), carrying their
// positions n along; ids outside [0, V) get the key V and sort last. The rows of one id are then
// one run of the sorted keys, its positions in increasing n. Thread (i, c) of the second kernel
// acts when i starts a run: it finds the run's end (a binary search of the sorted keys) and adds
// gout[n, c] for the run's n in order into a register that started from gweight[row, c], then
// stores it. Each gweight element has one writer, and its additions come in increasing n: the
// order of the CPU's loop, so the result is the CPU's, bitwise. The work is one pass over gout
// plus the sort, where walking all N ids for every (row shard, column) was N times that.
__global__ void embedding_sort_keys_kernel(const int32_t* ids, int32_t* keys, int32_t* pos, int64_t N,
                                           int64_t V) {
  for (int64_t n = thread_id(); n < N; n += thread_count()) {
    const int32_t v = ids[n];
    keys[n] = v >= 0 && v < V ? v : static_cast<int32_t>(V);
    pos[n] = static_cast<int32_t>(n);
  }
}

// keys, pos: (N) sorted by key. Threads of a warp share i (consecutive c) when C >= 32.
template <class T>
__global__ void embedding_backward_runs_kernel(const int32_t* keys, const int32_t* pos, const T* gout,
                                               T* gweight, int64_t N, int64_t C, int64_t V) {
  for (int64_t t = thread_id(); t < N * C; t += thread_count()) {
    const int64_t i = t / C, c = t - i * C;
    const int32_t row = keys[i];
    if (row >= V || (i > 0 && keys[i - 1] == row)) continue;
    int64_t lo = i + 1, hi = N;  // the run's end: the first key > row in keys[i+1, N)
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] == row)
        lo = mid + 1;
      else
        hi = mid;
    }
    T acc = gweight[row * C + c];
#pragma unroll 8
    for (int64_t j = i; j < lo; ++j) acc += gout[static_cast<int64_t>(pos[j]) * C + c];
    gweight[row * C + c] = acc;
  }
}

// Scratch: keys and positions before and after the sort (4 N int32), then CUB's temporary storage
// from the next multiple of 256 bytes.
size_t sort_area_bytes(int64_t N) { return (4 * sizeof(int32_t) * static_cast<size_t>(N) + 255) / 256 * 256; }

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

size_t embedding_backward_scratch_bytes(int64_t N, int64_t V) {
  size_t temp = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, temp, static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), N, 0, key_bits(V));
  return sort_area_bytes(N) + temp;
}

template <class T>
cudaError_t launch_embedding_backward(const int32_t* ids, const T* gout, T* gweight, int64_t N, int64_t C,
                                      int64_t V, void* scratch, size_t scratch_bytes) {
  auto* keys = static_cast<int32_t*>(scratch);
  int32_t *pos = keys + N, *keys_sorted = pos + N, *pos_sorted = keys_sorted + N;
  size_t temp = scratch_bytes - sort_area_bytes(N);
  void* temp_storage = static_cast<char*>(scratch) + sort_area_bytes(N);
  embedding_sort_keys_kernel<<<grid_for(N), kBlock>>>(ids, keys, pos, N, V);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(temp_storage, temp, keys, keys_sorted, pos,
                                                            pos_sorted, N, 0, key_bits(V));
      e != cudaSuccess)
    return e;
  embedding_backward_runs_kernel<<<grid_for(N * C), kBlock>>>(keys_sorted, pos_sorted, gout, gweight, N, C,
                                                              V);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                                    \
  template cudaError_t launch_embedding_forward<T>(const T*, const int32_t*, T*, int64_t, int64_t, int64_t); \
  template cudaError_t launch_embedding_backward<T>(const int32_t*, const T*, T*, int64_t, int64_t, int64_t, \
                                                    void*, size_t);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
