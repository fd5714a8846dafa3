// CPU kernels drawing from Philox: fill_random, dropout_forward / dropout_backward.
// CUDA twin: src/tensor/cuda/random.cu. Both number values identically (src/tensor/philox.h).
#include "tensor/cpu/common.h"
#include "tensor/philox.h"

namespace saobp::cpu {

// out: contiguous. Value i is U[a, b) from word offset+i, or N(a, b^2) from normal offset+i.
void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  if (!out.is_contiguous()) fail("fill_random", "output {} must be contiguous", out.str());
  dispatch_float(out.dtype(), "fill_random", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    parallel_for(out.numel(), 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const uint64_t idx = key.offset + static_cast<uint64_t>(i);
        if (kind == RandomKind::uniform) {
          const double u = philox::to_unit_float(philox::word(key.seed, key.stream, idx));
          p[i] = static_cast<T>(a + (b - a) * u);
        } else {
          p[i] = static_cast<T>(a + b * philox::normal(key.seed, key.stream, idx));
        }
      }
    });
  });
}

// x, y: contiguous (same shape); mask: u8, same shape. Keep element i when U_i >= p.
void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  if (!(p >= 0.0 && p < 1.0)) fail("dropout", "probability {} must be in [0, 1)", p);
  check_shape(y, x.shape(), "dropout", "output");
  check_shape(mask, x.shape(), "dropout", "mask");
  check_dtype(mask, DType::u8, "dropout", "mask");
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    uint8_t* mp = mask.data<uint8_t>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    const float pf = static_cast<float>(p);
    parallel_for(x.numel(), 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const uint64_t idx = key.offset + static_cast<uint64_t>(i);
        const bool keep = philox::to_unit_float(philox::word(key.seed, key.stream, idx)) >= pf;
        mp[i] = keep;
        yp[i] = keep ? xp[i] * scale : T(0);
      }
    });
  });
}

// gx += gy * mask / (1 - p).
void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx) {
  check_shape(mask, gy.shape(), "dropout_backward", "mask");
  dispatch_float(gy.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    const uint8_t* m = mask.data<uint8_t>();
    T* out = gx.data<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    parallel_for(gy.numel(), 32768, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i)
        if (m[i]) out[i] += g[i] * scale;
    });
  });
}

}  // namespace saobp::cpu
