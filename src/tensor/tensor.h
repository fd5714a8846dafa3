// Tensor: a cheap value handle (one shared_ptr copy) over device storage, with a shape, strides
// (in elements), an offset, a dtype and a device. Views (reshape of contiguous data, transpose,
// permute, slice, expand, split) share storage; contiguous() and clone() copy.
//
// A Tensor knows nothing about autograd (src/autograd/var.h wraps it) and nothing about CUDA:
// memory comes from the allocator of its device (src/tensor/backend.h).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "tensor/dtype.h"

namespace saobp {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
// Broadcast two shapes numpy-style (aligned at the right); throws naming both for `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// A block of device memory. Freed through its device's allocator when the last Tensor goes.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// The bytes of host (CPU) tensor storage alive now, and the most alive at once in this process:
// the CPU's twin of the GPU caching allocator's memory_peak_bytes (device_info.h), exact where
// the process's resident peak also counts the allocator's and the libraries' own memory. Counted
// for every Storage on the CPU, whatever thread allocates it.
size_t host_tensor_bytes();
size_t host_tensor_peak_bytes();

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // ---- creation (contents of empty() are unspecified) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
  // Copies host values into a new tensor (on `device`); numel must match the shape.
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, const Shape& shape, Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& v) {
    return from_vector(v, Shape{static_cast<int64_t>(v.size())});
  }
  // Like empty()/zeros() with this tensor's dtype and device.
  Tensor new_empty(const Shape& shape) const { return empty(shape, dtype_, device()); }
  Tensor new_zeros(const Shape& shape) const { return zeros(shape, dtype_, device()); }
  Tensor empty_like() const { return empty(shape_, dtype_, device()); }
  Tensor zeros_like() const { return zeros(shape_, dtype_, device()); }

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const { return shape_[wrap_dim(d)]; }
  int64_t stride(int64_t d) const { return strides_[wrap_dim(d)]; }
  int64_t numel() const { return numel_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  bool is_contiguous() const;
  std::string str() const;  // "f32[2, 3] cpu"
  // Shares storage with `other` (the same allocation, whatever the views).
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }
  // Wraps negative dimension indices; throws if out of range.
  int64_t wrap_dim(int64_t d) const;

  // Typed pointer to element [0,...,0] (device memory on a GPU tensor). Checks the dtype.
  template <class T>
  T* data() const;
  void* raw() const;

  // ---- views (share storage) ----
  Tensor view(const Shape& shape) const;     // contiguous only; one -1 allowed
  Tensor reshape(const Shape& shape) const;  // view if contiguous, else copies
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;  // [start, end) along dim
  Tensor expand(const Shape& shape) const;                      // broadcast view: size-1 dims get stride 0
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  std::vector<Tensor> split(int64_t dim, int64_t piece) const;  // views of `piece` along dim
  // (B,T,C) -> (B,NH,T,HS): the attention head view, no copy.
  Tensor split_heads(int64_t nh) const;

  // ---- copies ----
  Tensor contiguous() const;  // self if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  void copy_from(const Tensor& src);  // same shape (src may broadcast); any strides

  // ---- host access (copies from the device when needed) ----
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  T item() const;
  double item() const;  // any floating or integer dtype, converted to double
  // item() of each one-element tensor, read together: tensors on a GPU are gathered into one
  // buffer there and copied over at once (one wait for the GPU instead of one each).
  static std::vector<double> items(const std::vector<Tensor>& scalars);

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0, numel_ = 0;
  DType dtype_ = DType::f32;
  friend Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
};

// A view of `base`'s storage with the given geometry (no bounds re-checked: callers validate).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

// Throws Error("[op] <what> must be <want>, got <shape>") unless t has exactly `want`.
void check_shape(const Tensor& t, const Shape& want, const char* op, const char* what);
void check_dtype(const Tensor& t, DType want, const char* op, const char* what);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);

}  // namespace saobp
