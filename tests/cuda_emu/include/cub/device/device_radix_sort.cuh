// CUB's DeviceRadixSort::SortPairs as the emulated kernels see it (emu.h): a stable sort of the
// pairs by the keys' bits [begin_bit, end_bit), on the host, with CUB's two-call protocol (a
// first call with no temporary storage asks for its size). In saobp::cuda, the namespace of
// the translated files (renamed with them, as cuda_runtime.h says), so `cub::` there finds it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cuda_runtime.h"

namespace saobp::cuda::cub {

struct DeviceRadixSort {
  template <class K, class V>
  static cudaError_t SortPairs(void* temp_storage, size_t& temp_bytes, const K* keys_in, K* keys_out,
                               const V* values_in, V* values_out, int n, int begin_bit = 0,
                               int end_bit = static_cast<int>(sizeof(K) * 8), cudaStream_t = nullptr) {
    if (!temp_storage) {
      temp_bytes = 1;
      return cudaSuccess;
    }
    using U = std::make_unsigned_t<K>;
    const int width = end_bit - begin_bit;
    const U mask = width >= static_cast<int>(sizeof(U) * 8) ? static_cast<U>(~U{0})
                                                            : static_cast<U>((U{1} << width) - 1);
    auto digit = [&](K k) { return static_cast<U>(static_cast<U>(k) >> begin_bit) & mask; };
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return digit(keys_in[a]) < digit(keys_in[b]); });
    std::vector<K> keys(static_cast<size_t>(n));
    std::vector<V> values(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = keys_in[order[static_cast<size_t>(i)]];
    for (int i = 0; i < n; ++i) values[static_cast<size_t>(i)] = values_in[order[static_cast<size_t>(i)]];
    std::copy(keys.begin(), keys.end(), keys_out);
    std::copy(values.begin(), values.end(), values_out);
    return cudaSuccess;
  }
};

}  // namespace saobp::cuda::cub
