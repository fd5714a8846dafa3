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

Tensor loss_targets(const Tensor& targets, int64_t N, int64_t ignore_index, Device device, int64_t& count,
                    const char* op) {
  check_dtype(targets, DType::i32, op, "targets");
  if (targets.numel() != N) fail(op, "{} targets for {} rows of logits", targets.numel(), N);
  Tensor T = targets.contiguous().view({N});
  count = 0;
  for (int32_t t : T.to_vector<int32_t>()) count += t != ignore_index;
  return T.device() == device ? T : T.to(device);
}

Tensor mean_row_weights(const Tensor& g, int64_t count, int64_t N, const Tensor& like) {
  if (like.device().is_cpu())
    return Tensor::full({N}, g.item() / static_cast<double>(count), like.dtype(), like.device());
  Tensor w = like.new_empty({N});
  kern::copy(g.contiguous().view({1}).expand({N}), w, false);
  kern::axpby(w, 1.0 / static_cast<double>(count), w, 0.0);
  return w;
}

}  // namespace saobp
