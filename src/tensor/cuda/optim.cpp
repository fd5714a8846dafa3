// saobp::cuda adamw_step: checks and AdamW's coefficients, then optim.cu.
// CPU twin: src/tensor/cpu/optim.cpp (same checks, messages and coefficients).
#include <cmath>

#include "tensor/cuda/common.h"

namespace saobp::cuda {

// p, g, m, v: contiguous, same shape.
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  prepare("adamw", p, g, m, v);
  for (const Tensor* t : {&g, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)}) {
    check_shape(*t, p.shape(), "adamw", "gradient and moments");
    check_dtype(*t, p.dtype(), "adamw", "gradient and moments");
  }
  require_contiguous("adamw", p, g, m, v);
  if (p.numel() == 0) return;
  const double steps = static_cast<double>(h.step);
  const AdamWCoeffs c{h.beta1,
                      h.beta2,
                      h.eps,
                      1.0 - h.lr * h.weight_decay,
                      h.lr / (1.0 - std::pow(h.beta1, steps)),
                      1.0 / std::sqrt(1.0 - std::pow(h.beta2, steps))};
  dispatch_float(p.dtype(), "adamw", [&](auto tag) {
    using T = decltype(tag);
    check(launch_adamw<T>(p.data<T>(), g.data<T>(), m.data<T>(), v.data<T>(), c, p.numel()), "adamw");
  });
}

}  // namespace saobp::cuda
