#include "autograd/grad_util.h"

namespace saobp {

void accumulate_broadcast(const Tensor& g, Tensor& grad) {
  if (g.shape() == grad.shape()) {
    kern::axpby(g.contiguous(), 1.0, grad, 1.0);
    return;
  }
  Shape padded(static_cast<size_t>(g.dim() - grad.dim()), 1);
  padded.insert(padded.end(), grad.shape().begin(), grad.shape().end());
  Tensor dst = grad.view(padded);
  kern::reduce_sum_to(g.contiguous(), dst, 1.0, true);
}

void accumulate_broadcast(const Tensor& g, GradSlots& gin, size_t i) {
  if (gin.steal(i, g)) return;  // same shape, first gradient of the input: g's buffer itself
  bool fresh = false;
  Tensor& grad = gin.slot(i, fresh);
  if (!fresh) {
    accumulate_broadcast(g, grad);
    return;
  }
  if (g.shape() == grad.shape()) {
    kern::copy(g, grad, false);
    return;
  }
  Shape padded(static_cast<size_t>(g.dim() - grad.dim()), 1);
  padded.insert(padded.end(), grad.shape().begin(), grad.shape().end());
  Tensor dst = grad.view(padded);
  kern::reduce_sum_to(g.contiguous(), dst, 1.0, false);
}

Tensor gemm_operand(const Tensor& t, bool& trans) {
  trans = false;
  if (t.is_contiguous()) return t;
  if (t.dim() >= 2) {
    Tensor tt = t.transpose(-1, -2);
    if (tt.is_contiguous()) {
      trans = true;
      return tt;
    }
  }
  return t.contiguous();
}

}  // namespace saobp
