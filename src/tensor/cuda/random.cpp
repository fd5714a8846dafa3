// saobp::cuda fill_random, dropout_forward / dropout_backward: checks, then random.cu.
// CPU twin: src/tensor/cpu/random.cpp (same checks and messages).
#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {
PhiloxKey philox_key(const RngKey& k) { return {k.seed, k.stream, k.offset}; }
}  // namespace

// out: contiguous. Value i is U[a, b) from word offset+i, or N(a, b^2) from normal offset+i.
void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  prepare("fill_random", out);
  if (!out.is_contiguous()) fail("fill_random", "output {} must be contiguous", out.str());
  if (out.numel() == 0) return;
  dispatch_float(out.dtype(), "fill_random", [&](auto tag) {
    using T = decltype(tag);
    check(
        launch_fill_random<T>(out.data<T>(), out.numel(), kind == RandomKind::normal, a, b, philox_key(key)),
        "fill_random");
  });
}

// x, y: contiguous (same shape); mask: u8, same shape. Keep element i when U_i >= p.
void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  prepare("dropout", y, x, mask);
  if (!(p >= 0.0 && p < 1.0)) fail("dropout", "probability {} must be in [0, 1)", p);
  check_shape(y, x.shape(), "dropout", "output");
  check_shape(mask, x.shape(), "dropout", "mask");
  check_dtype(mask, DType::u8, "dropout", "mask");
  require_contiguous("dropout", x, y, mask);
  if (x.numel() == 0) return;
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    check(launch_dropout_forward<T>(x.data<T>(), static_cast<float>(p), static_cast<T>(1.0 / (1.0 - p)),
                                    philox_key(key), y.data<T>(), mask.data<uint8_t>(), x.numel()),
          "dropout");
  });
}

// gx += gy * mask / (1 - p), or gx = gy * mask / (1 - p) when !accumulate.
void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx, bool accumulate) {
  prepare("dropout_backward", gx, gy, mask);
  check_shape(mask, gy.shape(), "dropout_backward", "mask");
  check_shape(gx, gy.shape(), "dropout_backward", "gx");
  require_contiguous("dropout_backward", gy, mask, gx);
  if (gy.numel() == 0) return;
  dispatch_float(gy.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    check(launch_dropout_backward<T>(gy.data<T>(), mask.data<uint8_t>(), static_cast<T>(1.0 / (1.0 - p)),
                                     gx.data<T>(), gy.numel(), accumulate),
          "dropout_backward");
  });
}

}  // namespace saobp::cuda
