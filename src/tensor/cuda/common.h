// Host-side helpers of the CUDA backend (*.cpp only): error checks, the current device and
// strided geometry for the launchers of launch.h (the dtype dispatch is backend.h's).
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tensor/backend.h"
#include "tensor/cuda/launch.h"

namespace saobp::cuda {

// Throws "[op] CUDA error: <description> (<name>)" unless e is cudaSuccess. Errors raised inside
// a kernel surface at the next synchronizing call (a copy to the host, synchronize()).
inline void check(cudaError_t e, const char* op) {
  if (e != cudaSuccess) fail(op, "CUDA error: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

// An opt-in switch of the CUDA backend: true when environment variable `name` is "1". Read at
// every call, so a test can run both paths in one process.
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

// Makes device `index` current on this host thread (runtime.cpp).
void use_device(int index, const char* op);
// After the host waited for device `index` (runtime.cpp): throws the first index of the
// deferred checks of check_index_range (embedding.cpp) that was out of range.
void check_deferred_indices(int index);
// Makes the device of `out` current: the first thing every CUDA twin does (the dispatcher has
// checked that every tensor of the call lives there).
inline void use_device_of(const Tensor& out, const char* op) { use_device(out.device().index, op); }

// Geometry of N operands over `shape` (collapse_dims, backend.h), outermost dim first as the
// Indexer's offsets() reads it (and as collapse_dims returns them). Throws when more than
// kMaxDims remain.
template <int N>
Indexer<N> make_indexer(const Shape& shape, const std::array<const Shape*, N>& strides, const char* op) {
  const CollapsedDims<N> c = collapse_dims<N>(shape, strides);
  if (c.size.size() > static_cast<size_t>(kMaxDims))
    fail(op, "shape {} with these strides needs {} dims; the CUDA backend handles {}", shape_str(shape),
         c.size.size(), kMaxDims);
  Indexer<N> ix;
  ix.dims = static_cast<int>(c.size.size());
  for (int d = 0; d < ix.dims; ++d) {
    ix.size[d] = c.size[static_cast<size_t>(d)];
    for (int k = 0; k < N; ++k) ix.stride[k][d] = c.stride[k][static_cast<size_t>(d)];
  }
  return ix;
}

}  // namespace saobp::cuda
