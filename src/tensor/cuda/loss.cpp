// saobp::cuda cross_entropy_forward / cross_entropy_backward: the host halves of loss.cu.
// CPU twin: src/tensor/cpu/loss.cpp.
#include "tensor/checks.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

// logits: (N,V)  targets: (N) i32  losses, lse: (N)
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  use_device_of(losses, "cross_entropy");
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  if (logits.numel() == 0) return;
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    check(launch_cross_entropy_forward<T>(logits.data<T>(), row_pitch(logits), targets.data<int32_t>(),
                                          ignore_index, losses.data<T>(), lse.data<T>(), N, V),
          "cross_entropy");
  });
}

// glogits[n] += gloss[n] (softmax(logits[n]) - onehot(t_n)); ignored rows get nothing. With
// !accumulate glogits is overwritten (ignored rows 0). Rows row_pitch apart; bf16 glogits rounded.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  use_device_of(glogits, "cross_entropy_backward");
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  if (logits.numel() == 0) return;
  const int64_t ld = row_pitch(logits), ldo = row_pitch(glogits);
  if (glogits.dtype() == DType::bf16) {  // rounded once, written (tensor/kernels.inc)
    check(launch_cross_entropy_backward_bf16(logits.data<float>(), ld, targets.data<int32_t>(),
                                             lse.data<float>(), gloss.data<float>(), ignore_index,
                                             &glogits.data<bf16>()->bits, ldo, N, V),
          "cross_entropy_backward");
    return;
  }
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    check(launch_cross_entropy_backward<T>(logits.data<T>(), ld, targets.data<int32_t>(), lse.data<T>(),
                                           gloss.data<T>(), ignore_index, glogits.data<T>(), ldo, N, V,
                                           accumulate),
          "cross_entropy_backward");
  });
}

}  // namespace saobp::cuda
