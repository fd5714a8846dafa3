// Host-side helpers of the CUDA backend (*.cpp only): error checks, device checks, dtype
// dispatch and strided geometry for the launchers of launch.h.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cstdint>

#include "tensor/backend.h"
#include "tensor/cuda/launch.h"

namespace saobp::cuda {

// Throws "[op] CUDA error: <description> (<name>)" unless e is cudaSuccess. Errors raised inside
// a kernel surface at the next synchronizing call (a copy to the host, synchronize()).
inline void check(cudaError_t e, const char* op) {
  if (e != cudaSuccess) fail(op, "CUDA error: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

// Makes device `index` current on this host thread (runtime.cpp).
void use_device(int index, const char* op);

inline void require_same_device(const char* op, const Tensor& out, const Tensor& t) {
  if (t.defined() && t.device() != out.device())
    fail(op, "tensors on different devices: {} and {}", out.str(), t.str());
}

// Checks that `out` is a CUDA tensor and that every defined input lives on the same device,
// then makes that device current.
template <class... In>
void prepare(const char* op, const Tensor& out, const In&... in) {
  if (!out.device().is_cuda()) fail(op, "{} is not a CUDA tensor", out.str());
  (require_same_device(op, out, in), ...);
  use_device(out.device().index, op);
}

// Throws "[op] <tensor> must be contiguous" for the first defined tensor that is not.
template <class... Ts>
void require_contiguous(const char* op, const Ts&... ts) {
  auto one = [op](const Tensor& t) {
    if (t.defined() && !t.is_contiguous()) fail(op, "{} must be contiguous", t.str());
  };
  (one(ts), ...);
}

// Calls f(T{}) with T = float or double according to `t` (the CPU's dispatch_float).
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      f(float{});
      return;
    case DType::f64:
      f(double{});
      return;
    case DType::bf16:
      fail(op, "bf16 is not supported by the CUDA backend yet");
    default:
      fail(op, "expected f32 or f64, got {}", dtype_name(t));
  }
}

// Calls f(T{}) for any storable dtype (f32, f64, i32, u8).
template <class F>
void dispatch_any(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      f(float{});
      return;
    case DType::f64:
      f(double{});
      return;
    case DType::i32:
      f(int32_t{});
      return;
    case DType::u8:
      f(uint8_t{});
      return;
    case DType::bf16:
      fail(op, "bf16 is not supported by the CUDA backend yet");
  }
  fail(op, "unknown dtype");
}

// Geometry of N operands over `shape`, operand k with strides *strides[k]. Size-1 dims are
// dropped and a dim is merged into the next inner one when every operand is contiguous across
// the two, so contiguous operands give one dim. Throws when more than kMaxDims remain.
template <int N>
Indexer<N> make_indexer(const Shape& shape, const std::array<const Shape*, N>& strides, const char* op) {
  Shape sizes;  // innermost first
  std::array<Shape, N> st;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < N && merge; ++k) merge = (*strides[k])[d] == st[k].back() * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (int k = 0; k < N; ++k) st[k].push_back((*strides[k])[d]);
  }
  if (sizes.size() > static_cast<size_t>(kMaxDims))
    fail(op, "shape {} with these strides needs {} dims; the CUDA backend handles {}", shape_str(shape),
         sizes.size(), kMaxDims);
  Indexer<N> ix;
  ix.dims = static_cast<int>(sizes.size());
  for (int d = 0; d < ix.dims; ++d) {
    const size_t from = sizes.size() - 1 - static_cast<size_t>(d);
    ix.size[d] = sizes[from];
    for (int k = 0; k < N; ++k) ix.stride[k][d] = st[k][from];
  }
  return ix;
}

// `ignore` value of check_indices under which no index is exempt.
constexpr int64_t kNoIgnore = INT64_MIN;

// Throws "[op] <what> <value> at position <n> is outside [0, limit)" (the CPU's message) for the
// first entry of the contiguous i32 tensor idx that is outside [0, limit) and is not `ignore`.
// Synchronizes with the device. Defined in embedding.cpp.
void check_indices(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what);

}  // namespace saobp::cuda
