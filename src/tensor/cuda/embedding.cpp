// saobp::cuda embedding_forward / embedding_backward and check_indices: checks, then
// embedding.cu. CPU twin: src/tensor/cpu/nn.cpp (same checks and messages).
#include <vector>

#include "tensor/cuda/common.h"

namespace saobp::cuda {

void check_indices(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what) {
  check_dtype(idx, DType::i32, op, what);
  require_contiguous(op, idx);
  if (idx.numel() == 0) return;
  const Tensor flag = Tensor::zeros({1}, DType::i32, idx.device());
  check(launch_flag_bad_indices(idx.data<int32_t>(), idx.numel(), limit, ignore, flag.data<int32_t>()), op);
  if (flag.item<int32_t>() == 0) return;
  // Error path: find the first offender on the host, for the CPU's message.
  const std::vector<int32_t> v = idx.to_vector<int32_t>();
  for (size_t n = 0; n < v.size(); ++n)
    if ((v[n] < 0 || v[n] >= limit) && v[n] != ignore)
      fail(op, "{} {} at position {} is outside [0, {})", what, v[n], n, limit);
}

// weight: (V,C)  ids: (N) i32  out: (N,C)
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  prepare("embedding", out, weight, ids);
  if (weight.dim() != 2) fail("embedding", "weight must be (V,C), got {}", weight.str());
  const int64_t V = weight.size(0), C = weight.size(1), N = ids.numel();
  check_shape(out, {N, C}, "embedding", "output");
  require_contiguous("embedding", weight, out);
  check_indices(ids, V, kNoIgnore, "embedding", "id");
  if (out.numel() == 0) return;
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    check(launch_embedding_forward<T>(weight.data<T>(), ids.data<int32_t>(), out.data<T>(), N, C),
          "embedding");
  });
}

// gweight[ids[n]] += gout[n]; deterministic (one writer per element, n in order).
void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  prepare("embedding_backward", gweight, ids, gout);
  if (gweight.dim() != 2) fail("embedding_backward", "gweight must be (V,C), got {}", gweight.str());
  const int64_t V = gweight.size(0), C = gweight.size(1), N = ids.numel();
  check_shape(gout, {N, C}, "embedding_backward", "gout");
  require_contiguous("embedding_backward", gout, gweight);
  check_indices(ids, V, kNoIgnore, "embedding_backward", "id");
  if (gout.numel() == 0) return;
  dispatch_float(gweight.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    check(launch_embedding_backward<T>(ids.data<int32_t>(), gout.data<T>(), gweight.data<T>(), N, C, V),
          "embedding_backward");
  });
}

}  // namespace saobp::cuda
