#include "tensor/tensor.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/checked.h"
#include "tensor/backend.h"
#include "tensor/kernels.h"

namespace saobp {

// ---------------------------------------------------------------- dtype / device / shapes

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::u8:
      return "u8";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda" || s == "gpu") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      return cuda(std::stoi(s.substr(5)));
    } catch (const std::exception&) {
    }
  }
  fail("device", "unknown device '{}' (expected cpu, cuda or cuda:N)", s);
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    const std::optional<int64_t> p = checked_mul(n, d);
    if (!p) fail("tensor", "shape {} has more elements than a 64-bit count holds", shape_str(s));
    n = *p;
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes {} and {} cannot be broadcast together", shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// ---------------------------------------------------------------- storage

namespace {
std::atomic<size_t> g_host_bytes{0}, g_host_peak{0};
}

size_t host_tensor_bytes() { return g_host_bytes.load(std::memory_order_relaxed); }
size_t host_tensor_peak_bytes() { return g_host_peak.load(std::memory_order_relaxed); }

Storage::Storage(size_t n, Device dev) : nbytes(n), device(dev) {
  size_t bytes = std::max<size_t>(n, 1);
  if (dev.is_cpu()) {
    // 64-byte alignment for AVX-512 loads; size rounded up as aligned_alloc requires.
    data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data) fail("alloc", "out of host memory allocating {} bytes", n);
    const size_t live = g_host_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    size_t peak = g_host_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_host_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
  } else {
    data = cuda::allocate(bytes, dev.index);
  }
}

Storage::~Storage() {
  if (device.is_cpu()) {
    std::free(data);
    g_host_bytes.fetch_sub(nbytes, std::memory_order_relaxed);
  } else
    cuda::deallocate(data, std::max<size_t>(nbytes, 1), device.index);
}

// ---------------------------------------------------------------- creation

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  Tensor t;
  t.storage_ = base.storage_;
  t.dtype_ = base.dtype_;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail("empty", "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  kern::fill(t, 0.0);
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  kern::fill(t, value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& v, const Shape& shape, Device device) {
  if (static_cast<int64_t>(v.size()) != shape_numel(shape))
    fail("from_vector", "{} values do not fill shape {}", v.size(), shape_str(shape));
  Tensor host = empty(shape, dtype_of<T>::value, Device::cpu());
  if (!v.empty()) std::memcpy(host.raw(), v.data(), v.size() * sizeof(T));
  return device.is_cpu() ? host : host.to(device);
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&, Device);

// ---------------------------------------------------------------- metadata

Device Tensor::device() const { return storage_ ? storage_->device : Device::cpu(); }

bool Tensor::is_contiguous() const {
  if (numel_ == 0) return true;  // no element to be out of place (whatever the strides)
  int64_t expect = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_str(shape_), device().str());
}

// Wraps a negative dimension index; throws naming `op` when out of range.
static int64_t wrap_dim_for(const Tensor& t, int64_t d, const char* op) {
  int64_t n = t.dim();
  if (d < -n || d >= n) fail(op, "dimension {} out of range for {}", d, t.str());
  return d < 0 ? d + n : d;
}

int64_t Tensor::wrap_dim(int64_t d) const { return wrap_dim_for(*this, d, "dim"); }

void* Tensor::raw() const {
  if (!defined()) fail("data", "access to an undefined tensor");
  return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

template <class T>
T* Tensor::data() const {
  if (dtype_ != dtype_of<T>::value)
    fail("data", "tensor {} accessed as {}", str(), dtype_name(dtype_of<T>::value));
  return static_cast<T*>(raw());
}
template float* Tensor::data() const;
template double* Tensor::data() const;
template int32_t* Tensor::data() const;
template uint8_t* Tensor::data() const;
template bf16* Tensor::data() const;

// ---------------------------------------------------------------- views

Tensor Tensor::view(const Shape& shape) const {
  if (!is_contiguous()) fail("view", "view of non-contiguous {}; use reshape()", str());
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) fail("view", "more than one -1 in {}", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      fail("view", "negative dimension in {}", shape_str(shape));
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel_ % known != 0) fail("view", "cannot view {} as {}", str(), shape_str(shape));
    s[infer] = numel_ / known;
  }
  if (shape_numel(s) != numel_) fail("view", "cannot view {} as {}", str(), shape_str(shape));
  return make_view(*this, s, contiguous_strides(s), offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  return is_contiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim_for(*this, d0, "transpose");
  d1 = wrap_dim_for(*this, d1, "transpose");
  Shape s = shape_, st = strides_;
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(*this, s, st, offset_);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  if (static_cast<int64_t>(order.size()) != dim())
    fail("permute", "order {} does not match {}", shape_str(order), str());
  Shape s(order.size()), st(order.size());
  std::vector<bool> seen(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t d = wrap_dim_for(*this, order[i], "permute");
    if (seen[d]) fail("permute", "order {} repeats dimension {}", shape_str(order), d);
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return make_view(*this, s, st, offset_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  d = wrap_dim_for(*this, d, "slice");
  if (start < 0 || end > shape_[d] || start > end)
    fail("slice", "range [{}, {}) out of bounds for dim {} of {}", start, end, d, str());
  Shape s = shape_;
  s[d] = end - start;
  return make_view(*this, s, strides_, offset_ + start * strides_[d]);
}

Tensor Tensor::expand(const Shape& shape) const {
  if (shape.size() < shape_.size()) fail("expand", "cannot expand {} to {}", str(), shape_str(shape));
  size_t lead = shape.size() - shape_.size();
  Shape st(shape.size(), 0);
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] == shape[lead + i])
      st[lead + i] = strides_[i];
    else if (shape_[i] == 1)
      st[lead + i] = 0;
    else
      fail("expand", "cannot expand {} to {}", str(), shape_str(shape));
  }
  return make_view(*this, shape, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t n = dim() + 1;
  if (d < 0) d += n;
  if (d < 0 || d >= n) fail("unsqueeze", "dimension {} out of range for {}", d, str());
  Shape s = shape_, st = strides_;
  int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return make_view(*this, s, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim_for(*this, d, "squeeze");
  if (shape_[d] != 1) fail("squeeze", "dimension {} of {} is not 1", d, str());
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, s, st, offset_);
}

std::vector<Tensor> Tensor::split(int64_t d, int64_t piece) const {
  d = wrap_dim_for(*this, d, "split");
  if (piece <= 0) fail("split", "piece size {} must be positive", piece);
  std::vector<Tensor> out;
  for (int64_t s = 0; s < shape_[d]; s += piece) out.push_back(slice(d, s, std::min(s + piece, shape_[d])));
  return out;
}

Tensor Tensor::split_heads(int64_t nh) const {
  if (dim() != 3 || shape_[2] % nh != 0)
    fail("split_heads", "expected (B,T,C) with C divisible by {} heads, got {}", nh, str());
  return view({shape_[0], shape_[1], nh, shape_[2] / nh}).transpose(1, 2);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  kern::copy(*this, out, false);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.device() != device()) {
    copy_from(src.to(device()));
    return;
  }
  if (src.dtype() != dtype_) {
    copy_from(src.contiguous().to(dtype_));
    return;
  }
  Tensor s = src.shape() == shape_ ? src : src.expand(shape_);
  kern::copy(s, *this, false);
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, dev);
  size_t n = static_cast<size_t>(numel_) * dtype_size(dtype_);
  if (n == 0) return out;
  if (dev.is_cpu())
    cuda::memcpy_to_host(out.raw(), src.raw(), n, src.device().index);
  else if (src.device().is_cpu())
    cuda::memcpy_to_device(out.raw(), src.raw(), n, dev.index);
  else
    fail("to", "copy between two GPUs ({} -> {}) is not supported", src.device().str(), dev.str());
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype_) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape_, t, device());
  kern::cast(src, out);
  return out;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor h = to(Device::cpu()).contiguous();
  const T* p = h.data<T>();
  return std::vector<T>(p, p + numel_);
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;

template <class T>
T Tensor::item() const {
  if (numel_ != 1) fail("item", "item() of {} with {} elements", str(), numel_);
  return to_vector<T>()[0];
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template uint8_t Tensor::item<uint8_t>() const;

std::vector<double> Tensor::items(const std::vector<Tensor>& scalars) {
  std::vector<double> out(scalars.size());
  std::vector<size_t> on_gpu;
  for (size_t i = 0; i < scalars.size(); ++i) {
    if (scalars[i].numel() != 1)
      fail("item", "items(): {} has {} elements", scalars[i].str(), scalars[i].numel());
    if (scalars[i].device().is_cpu())
      out[i] = scalars[i].item();
    else
      on_gpu.push_back(i);
  }
  if (on_gpu.empty()) return out;
  // Slot k of one f64 buffer on the first one's GPU (the values widen exactly).
  Tensor all = empty({static_cast<int64_t>(on_gpu.size())}, DType::f64, scalars[on_gpu.front()].device());
  for (size_t k = 0; k < on_gpu.size(); ++k) {
    Tensor slot = all.slice(0, static_cast<int64_t>(k), static_cast<int64_t>(k) + 1);
    const Tensor& x = scalars[on_gpu[k]];
    kern::cast(x.device() == all.device() ? x.contiguous().view({1}) : x.to(all.device()).view({1}), slot);
  }
  const std::vector<double> read = all.to_vector<double>();
  for (size_t k = 0; k < on_gpu.size(); ++k) out[on_gpu[k]] = read[k];
  return out;
}

double Tensor::item() const {
  switch (dtype_) {
    case DType::f32:
      return item<float>();
    case DType::f64:
      return item<double>();
    case DType::i32:
      return item<int32_t>();
    case DType::u8:
      return item<uint8_t>();
    case DType::bf16:
      break;
  }
  fail("item", "item() of {} is not supported", str());
}

// ---------------------------------------------------------------- checks

void check_shape(const Tensor& t, const Shape& want, const char* op, const char* what) {
  if (!t.defined() || t.shape() != want)
    fail(op, "{} must have shape {}, got {}", what, shape_str(want), t.defined() ? t.str() : "undefined");
}

void check_dtype(const Tensor& t, DType want, const char* op, const char* what) {
  if (t.dtype() != want) fail(op, "{} must be {}, got {}", what, dtype_name(want), t.str());
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device()) fail(op, "tensors on different devices: {} and {}", a.str(), b.str());
}

}  // namespace saobp
