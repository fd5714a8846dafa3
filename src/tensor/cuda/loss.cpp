// saobp::cuda cross_entropy_forward / cross_entropy_backward: checks, then loss.cu.
// CPU twin: src/tensor/cpu/nn.cpp (same checks and messages).
#include "tensor/cuda/common.h"

namespace saobp::cuda {

// logits: (N,V)  targets: (N) i32  losses, lse: (N)
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  prepare("cross_entropy", losses, logits, targets, lse);
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  if (targets.numel() != N)
    fail("cross_entropy", "{} targets for {} rows of logits {}", targets.numel(), N, logits.str());
  if (losses.numel() != N || lse.numel() != N) fail("cross_entropy", "losses/lse must hold {} rows", N);
  require_contiguous("cross_entropy", logits, losses, lse);
  check_indices(targets, V, ignore_index, "cross_entropy", "target");
  if (logits.numel() == 0) return;
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    check(launch_cross_entropy_forward<T>(logits.data<T>(), targets.data<int32_t>(), ignore_index,
                                          losses.data<T>(), lse.data<T>(), N, V),
          "cross_entropy");
  });
}

// glogits[n] += gloss[n] (softmax(logits[n]) - onehot(t_n)); ignored rows get nothing. With
// !accumulate glogits is overwritten (ignored rows 0).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  prepare("cross_entropy_backward", glogits, logits, targets, lse, gloss);
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  check_shape(glogits, logits.shape(), "cross_entropy_backward", "glogits");
  if (targets.numel() != N || lse.numel() != N || gloss.numel() != N)
    fail("cross_entropy_backward", "targets/lse/gloss must hold {} rows", N);
  check_dtype(targets, DType::i32, "cross_entropy_backward", "target");
  require_contiguous("cross_entropy_backward", logits, targets, lse, gloss, glogits);
  if (logits.numel() == 0) return;
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    check(
        launch_cross_entropy_backward<T>(logits.data<T>(), targets.data<int32_t>(), lse.data<T>(),
                                         gloss.data<T>(), ignore_index, glogits.data<T>(), N, V, accumulate),
        "cross_entropy_backward");
  });
}

}  // namespace saobp::cuda
