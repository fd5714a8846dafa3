// CPU optimizer kernels. CUDA twin: src/tensor/cuda/optim.cpp + optim.cu; both run
// formula::adamw_update (src/tensor/formulas.h) on every element.
#include "tensor/cpu/common.h"
#include "tensor/formulas.h"

namespace saobp::cpu {

// p, g, m, v: contiguous, same shape. Elementwise, so any partition gives the same bits.
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  dispatch_float(p.dtype(), "adamw", [&](auto tag) {
    using T = decltype(tag);
    T* pp = p.data<T>();
    T* mp = m.data<T>();
    T* vp = v.data<T>();
    const T* gp = g.data<T>();
    const formula::AdamWStep<T> coeffs(
        formula::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step));
    parallel_for(p.numel(), 16384, [=](int64_t s, int64_t e) {
      // Four distinct buffers, as local __restrict pointers, and the coefficients in a local: the
      // loop then vectorizes (sqrt and divide included); the arithmetic per element is unchanged.
      T* __restrict P = pp;
      T* __restrict M = mp;
      T* __restrict Vv = vp;
      const T* __restrict G = gp;
      const formula::AdamWStep<T> c = coeffs;
      for (int64_t i = s; i < e; ++i) formula::adamw_update(c, G[i], P[i], M[i], Vv[i]);
    });
  });
}

// The per-tensor kernels in tensor order: the bits of the separate calls.
void multi_sum_squares(const std::vector<Tensor>& xs, Tensor& sums) {
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    Tensor sq = x.empty_like();
    binary(BinaryOp::mul, x, x, sq);
    Tensor s = Tensor::empty(Shape(static_cast<size_t>(x.dim()), 1), x.dtype(), x.device());
    reduce_sum_to(sq, s, 1.0, false);
    Tensor slot = sums.slice(0, static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);
    cast(s.view({1}), slot);
  }
}

void multi_adamw_step(std::vector<Tensor>& p, std::vector<Tensor>& g, std::vector<Tensor>& m,
                      std::vector<Tensor>& v, const std::vector<AdamWParams>& h, double grad_scale) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (grad_scale != 1.0) axpby(g[i], grad_scale, g[i], 0.0);
    adamw_step(p[i], g[i], m[i], v[i], h[i]);
  }
}

}  // namespace saobp::cpu
