// CPU optimizer kernels. CUDA twin: src/tensor/cuda/optim.cu.
#include <cmath>

#include "tensor/cpu/common.h"

namespace saobp::cpu {

// p, g, m, v: contiguous, same shape. Elementwise, so any partition gives the same bits.
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  for (const Tensor* t : {&g, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)}) {
    check_shape(*t, p.shape(), "adamw", "gradient and moments");
    check_dtype(*t, p.dtype(), "adamw", "gradient and moments");
  }
  dispatch_float(p.dtype(), "adamw", [&](auto tag) {
    using T = decltype(tag);
    T *pp = p.data<T>(), *mp = m.data<T>(), *vp = v.data<T>();
    const T* gp = g.data<T>();
    const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), eps = static_cast<T>(h.eps);
    const T decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
    const T step_size = static_cast<T>(h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
    const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
    parallel_for(p.numel(), 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const T gi = gp[i];
        mp[i] = b1 * mp[i] + (T(1) - b1) * gi;
        vp[i] = b2 * vp[i] + (T(1) - b2) * gi * gi;
        pp[i] = pp[i] * decay - step_size * mp[i] / (std::sqrt(vp[i]) * inv_sqrt_bc2 + eps);
      }
    });
  });
}

}  // namespace saobp::cpu
