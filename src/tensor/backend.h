// The two backends behind the kernels of src/tensor/kernels.inc, the device runtime, and what
// both backends' kernels share: the dtype dispatch and the collapsing of strided dims.
// saobp::cpu is always built; saobp::cuda is src/tensor/cuda/ when CMake finds nvcc. A CPU-only
// build compiles no CUDA twin: the dispatchers answer a CUDA tensor with "[op] built without
// CUDA" (SAOBP_ON_DEVICE), and src/tensor/no_cuda/runtime.cpp is the device runtime that has no
// device.
//
// Kernel code only: src/tensor/ and the kernel files of src/attention/ (cpu/, cuda/,
// dispatch.cpp, checks.cpp) include this file; every other layer calls saobp::kern
// (kernels.h). tools/check_layering.sh checks the rule.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/device_info.h"
#include "tensor/kernels.h"

namespace saobp {

// The twins assume valid arguments: the saobp::kern dispatchers (src/tensor/dispatch.cpp,
// src/attention/dispatch.cpp) check shapes, dtypes, contiguity and devices once, for both.
namespace cpu {
#include "tensor/kernels.inc"

// Throws "[op] <what> <value> at position <n> is outside [0, limit)" for the first entry of the
// contiguous i32 tensor idx outside [0, limit) that is not `ignore` (check_indices, checks.h).
void check_index_range(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what);
}  // namespace cpu

namespace cuda {
#include "tensor/kernels.inc"

void check_index_range(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what);

// Device runtime (src/tensor/cuda/runtime.cpp and allocator.cpp; in a CPU-only build
// src/tensor/no_cuda/runtime.cpp, where these throw). available() and built() are in
// device_info.h.
void* allocate(size_t nbytes, int index);
void deallocate(void* p, size_t nbytes, int index);
// Copies between host and device memory; host pointers are plain CPU memory.
void memcpy_to_device(void* dst, const void* src, size_t nbytes, int index);
void memcpy_to_host(void* dst, const void* src, size_t nbytes, int index);
void memcpy_device(void* dst, const void* src, size_t nbytes, int index);
void synchronize(int index);

// Times the CUDA twin of kernel `op` by events on the default stream while profiling is on
// (set_profiling, device_info.h); does nothing otherwise.
bool profiling();
class OpTimer {
 public:
  explicit OpTimer(const char* op) : op_(profiling() ? op : nullptr) {
    if (op_) slot_ = begin(op_);
  }
  ~OpTimer() {
    if (op_) end(slot_);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  static size_t begin(const char* op);
  static void end(size_t slot);
  const char* op_;
  size_t slot_ = 0;
};
// Times one library call inside an op (a cuBLAS GEMM) as a detail entry of the profile
// (OpTime::detail) under the label `label()` returns, with its FLOPs; the label is made only
// while profiling is on.
class DetailTimer {
 public:
  template <class Label>
  DetailTimer(Label label, double flops) : on_(profiling()) {
    if (on_) slot_ = begin(label(), flops);
  }
  ~DetailTimer() {
    if (on_) end(slot_);
  }
  DetailTimer(const DetailTimer&) = delete;
  DetailTimer& operator=(const DetailTimer&) = delete;

 private:
  static size_t begin(const std::string& label, double flops);
  static void end(size_t slot);
  bool on_;
  size_t slot_ = 0;
};
}  // namespace cuda

// Throws "[op] built without CUDA": a CPU-only build's answer to a CUDA tensor (dispatch.cpp).
[[noreturn]] void no_cuda(const char* op);

// The body of a dispatcher (src/tensor/dispatch.cpp, src/attention/dispatch.cpp): calls
// fn(args...) in saobp::cpu or saobp::cuda by the device of `tensor`. SAOBP_CUDA (set by CMake
// with the CUDA backend) is the one switch between the two builds; op code has no #ifdef.
#ifdef SAOBP_CUDA
#define SAOBP_CUDA_TWIN(fn, ...)        \
  {                                     \
    const cuda::OpTimer op_timer_(#fn); \
    return cuda::fn(__VA_ARGS__);       \
  }
#else
#define SAOBP_CUDA_TWIN(fn, ...) no_cuda(#fn);
#endif
#define SAOBP_ON_DEVICE(tensor, fn, ...) \
  switch ((tensor).device().type) {      \
    case DeviceType::cpu:                \
      return cpu::fn(__VA_ARGS__);       \
    case DeviceType::cuda:               \
      SAOBP_CUDA_TWIN(fn, __VA_ARGS__)   \
  }

// Calls f(T{}) with T = float or double according to `t`; other dtypes are an error for `op`.
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      f(float{});
      return;
    case DType::f64:
      f(double{});
      return;
    default:
      fail(op, "expected f32 or f64, got {}", dtype_name(t));
  }
}

// Calls f(T{}) for any dtype the kernels store (f32, f64, i32, u8).
template <class F>
void dispatch_any(DType t, const char* op, F&& f) {
  if (t == DType::i32) return f(int32_t{});
  if (t == DType::u8) return f(uint8_t{});
  if (t == DType::f32 || t == DType::f64) return dispatch_float(t, op, f);
  fail(op, "dtype {} is not supported by the kernels", dtype_name(t));
}

// N operands over `shape`, operand k with strides *strides[k], as few dims as possible,
// outermost first: size-1 dims are dropped and a dim is merged into the next inner one when
// every operand is contiguous across the two (contiguous operands give one dim). A single
// element gives no dims. Both backends walk strided operands through it (cpu/common.h
// strided_for, cuda/common.h make_indexer).
template <int N>
struct CollapsedDims {
  Shape size;
  std::array<Shape, N> stride;
};
template <int N>
CollapsedDims<N> collapse_dims(const Shape& shape, const std::array<const Shape*, N>& strides) {
  CollapsedDims<N> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !c.size.empty();
    for (int k = 0; k < N && merge; ++k) merge = c.stride[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      c.size.back() *= shape[d];
      for (int k = 0; k < N; ++k) c.stride[k].back() = (*strides[k])[d];
      continue;
    }
    c.size.push_back(shape[d]);
    for (int k = 0; k < N; ++k) c.stride[k].push_back((*strides[k])[d]);
  }
  return c;
}

}  // namespace saobp
