// Network layers: embedding, layernorm, (log-)softmax with masks, cross-entropy. The math of
// each backward is written above its kernel in src/tensor/cpu/nn.cpp.
#include "autograd/grad_util.h"
#include "autograd/ops.h"

namespace saobp {

Var embedding(const Var& weight, const Tensor& ids) {
  if (weight.dim() != 2) fail("embedding", "weight must be (V, C), got {}", weight.data().str());
  check_dtype(ids, DType::i32, "embedding", "ids");
  const int64_t C = weight.size(1);
  const Tensor flat = ids.contiguous().view({-1});
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = weight.data().new_empty({flat.numel(), C});
  kern::embedding_forward(weight.data(), flat, out);
  return make_result(out.view(out_shape), "embedding", {weight}, [flat, C](const Tensor& g, GradSlots& gin) {
    kern::embedding_backward(flat, g.contiguous().view({-1, C}), gin[0]);
  });
}

Var layernorm(const Var& x, const Var& w, const Var& b, double eps) {
  const int64_t C = x.size(-1);
  check_shape(w.data(), {C}, "layernorm", "weight");
  check_shape(b.data(), {C}, "layernorm", "bias");
  const Tensor X = x.data().contiguous(), W = w.data();
  const int64_t N = X.numel() / std::max<int64_t>(C, 1);
  Tensor out = X.new_empty(X.shape()), mean = X.new_empty({N}), rstd = X.new_empty({N});
  kern::layernorm_forward(X, W, b.data(), eps, out, mean, rstd);
  return make_result(out, "layernorm", {x, w, b}, [X, W, mean, rstd](const Tensor& g, GradSlots& gin) {
    Tensor none;
    Tensor& gx = gin.needs(0) ? gin[0] : none;
    Tensor gw = gin.needs(1) ? gin[1] : Tensor();
    Tensor gb = gin.needs(2) ? gin[2] : Tensor();
    kern::layernorm_backward(X, W, mean, rstd, g.contiguous(), gx, gw, gb);
  });
}

namespace {
Var softmax_impl(const Var& x, const Tensor& mask, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  if (mask.defined()) {
    check_dtype(mask, DType::u8, name, "mask");
    check_same_device(x.data(), mask, name);
    broadcast_shapes(mask.shape(), x.shape(), name);
  }
  const Tensor X = x.data().contiguous();
  Tensor out = X.new_empty(X.shape());
  kern::softmax_forward(X, mask, out, log);
  return make_result(out, name, {x}, [out, mask, log](const Tensor& g, GradSlots& gin) {
    kern::softmax_backward(out, g.contiguous(), mask, gin[0], log);
  });
}
}  // namespace

Var softmax(const Var& x, const Tensor& mask) { return softmax_impl(x, mask, false); }
Var log_softmax(const Var& x, const Tensor& mask) { return softmax_impl(x, mask, true); }

Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index) {
  const int64_t V = logits.size(-1);
  const Tensor L = logits.data().contiguous().view({-1, V});
  const int64_t N = L.size(0);
  check_dtype(targets, DType::i32, "cross_entropy", "targets");
  if (targets.numel() != N)
    fail("cross_entropy", "targets {} do not match logits {}", targets.str(), logits.data().str());
  int64_t count = 0;
  const Tensor T = loss_targets(targets, N, ignore_index, L.device(), count, "cross_entropy");
  Tensor losses = L.new_empty({N}), lse = L.new_empty({N});
  kern::cross_entropy_forward(L, T, ignore_index, losses, lse);
  Tensor total = L.new_empty({1});
  kern::reduce_sum_to(losses.view({N}), total, count ? 1.0 / count : 0.0, false);
  Shape scalar_shape;
  return make_result(
      total.view(scalar_shape), "cross_entropy", {logits},
      [L, T, lse, count, ignore_index, N, shape = logits.shape()](const Tensor& g, GradSlots& gin) {
        if (count == 0) return;
        const Tensor w = mean_row_weights(g, count, N, L);  // every counted row: g / count
        bool fresh = false;                                 // a first gradient is written, not added to zeros
        Tensor gl = gin.slot(0, fresh).view({N, L.size(1)});
        kern::cross_entropy_backward(L, T, lse, w, ignore_index, gl, !fresh);
      });
}

// y = R(t θ) x per pair; the leading dims are flattened into (N,1,T,HS) for the kernel.
// Backward: gx += R(t θ)ᵀ gy = rope(gy, inverse).
Var rope(const Var& x, double base, int64_t offset) {
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    fail("rope", "expected (..., T, HS) with HS even, got {}", x.data().str());
  const int64_t T = x.size(-2), HS = x.size(-1);
  const Tensor X = x.data().contiguous().view({-1, 1, T, HS});
  Tensor out = X.new_empty(X.shape());
  kern::rope(X, base, false, out, offset);
  return make_result(out.view(x.shape()), "rope", {x},
                     [base, T, HS, offset](const Tensor& g, GradSlots& gin) {
                       const Tensor G = g.contiguous().view({-1, 1, T, HS});
                       Tensor back = G.new_empty(G.shape());
                       kern::rope(G, base, true, back, offset);
                       Tensor& gx = gin[0];
                       kern::axpby(back.view(gx.shape()), 1.0, gx, 1.0);
                     });
}

}  // namespace saobp
