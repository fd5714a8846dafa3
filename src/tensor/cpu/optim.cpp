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
    T* pp = p.data<T>();
    T* mp = m.data<T>();
    T* vp = v.data<T>();
    const T* gp = g.data<T>();
    const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), eps = static_cast<T>(h.eps);
    const T decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
    const T step_size = static_cast<T>(h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
    const T inv_sqrt_bc2 =
        static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
    parallel_for(p.numel(), 16384, [=](int64_t s, int64_t e) {
      // Four distinct buffers, as local __restrict pointers: the loop then vectorizes (sqrt and
      // divide included); the arithmetic per element is unchanged.
      T* __restrict P = pp;
      T* __restrict M = mp;
      T* __restrict Vv = vp;
      const T* __restrict G = gp;
      for (int64_t i = s; i < e; ++i) {
        const T gi = G[i];
        const T mi = b1 * M[i] + (T(1) - b1) * gi;
        const T vi = b2 * Vv[i] + (T(1) - b2) * gi * gi;
        M[i] = mi;
        Vv[i] = vi;
        P[i] = P[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
      }
    });
  });
}

}  // namespace saobp::cpu
