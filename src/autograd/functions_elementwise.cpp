// Broadcasting arithmetic, scale, GELU and dropout.
// For z = a ∘ b with broadcasting, each input's gradient is the output gradient times the local
// derivative, summed over the dims that input was broadcast along (accumulate_broadcast).
#include "autograd/grad_util.h"
#include "autograd/ops.h"

namespace saobp {

namespace {

Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_same_device(a, b, name);
  if (a.dtype() != b.dtype()) fail(name, "dtypes differ: {} and {}", a.str(), b.str());
  Tensor out = a.new_empty(broadcast_shapes(a.shape(), b.shape(), name));
  kern::binary(op, a, b, out);
  return out;
}

// g * other (broadcast), then reduced into grad.
void accumulate_product(const Tensor& g, const Tensor& other, Tensor& grad) {
  Tensor t = g.new_empty(g.shape());
  kern::binary(BinaryOp::mul, g, other, t);
  accumulate_broadcast(t, grad);
}

}  // namespace

Var add(const Var& a, const Var& b) {
  Tensor out = binary_forward(BinaryOp::add, a.data(), b.data(), "add");
  return make_result(out, "add", {a, b}, [](const Tensor& g, GradSlots& gin) {
    if (gin.needs(0)) accumulate_broadcast(g, gin, 0);
    if (gin.needs(1)) accumulate_broadcast(g, gin, 1);
  });
}

Var sub(const Var& a, const Var& b) {
  Tensor out = binary_forward(BinaryOp::sub, a.data(), b.data(), "sub");
  return make_result(out, "sub", {a, b}, [](const Tensor& g, GradSlots& gin) {
    if (gin.needs(0)) accumulate_broadcast(g, gin[0]);
    if (gin.needs(1)) {
      Tensor neg = g.new_empty(g.shape());
      kern::axpby(g.contiguous(), -1.0, neg, 0.0);
      accumulate_broadcast(neg, gin[1]);
    }
  });
}

Var mul(const Var& a, const Var& b) {
  const Tensor A = a.data(), B = b.data();
  Tensor out = binary_forward(BinaryOp::mul, A, B, "mul");
  return make_result(out, "mul", {a, b}, [A, B](const Tensor& g, GradSlots& gin) {
    if (gin.needs(0)) accumulate_product(g, B, gin[0]);  // ∂(ab)/∂a = b
    if (gin.needs(1)) accumulate_product(g, A, gin[1]);  // ∂(ab)/∂b = a
  });
}

Var div(const Var& a, const Var& b) {
  const Tensor A = a.data(), B = b.data();
  Tensor out = binary_forward(BinaryOp::div, A, B, "div");
  return make_result(out, "div", {a, b}, [A, B, out](const Tensor& g, GradSlots& gin) {
    if (gin.needs(0)) {  // ∂(a/b)/∂a = 1/b
      Tensor t = g.new_empty(g.shape());
      kern::binary(BinaryOp::div, g, B, t);
      accumulate_broadcast(t, gin[0]);
    }
    if (gin.needs(1)) {  // ∂(a/b)/∂b = -(a/b)/b
      Tensor t = g.new_empty(g.shape());
      kern::binary(BinaryOp::mul, g, out, t);
      kern::binary(BinaryOp::div, t, B, t);
      kern::axpby(t, -1.0, t, 0.0);
      accumulate_broadcast(t, gin[1]);
    }
  });
}

Var scale(const Var& x, double alpha) {
  const Tensor X = x.data().contiguous();
  Tensor out = X.new_empty(X.shape());
  kern::axpby(X, alpha, out, 0.0);
  return make_result(out, "scale", {x}, [alpha](const Tensor& g, GradSlots& gin) {
    kern::axpby(g.contiguous(), alpha, gin[0], 1.0);
  });
}

Var add_scalar(const Var& x, double alpha) {
  const Tensor X = x.data().contiguous();
  Tensor out = X.clone();
  Tensor a = Tensor::full({1}, alpha, X.dtype(), X.device());
  kern::binary(BinaryOp::add, X, a, out);
  return make_result(out, "add_scalar", {x},
                     [](const Tensor& g, GradSlots& gin) { kern::axpby(g.contiguous(), 1.0, gin[0], 1.0); });
}

namespace {
Var unary_op(const Var& x, UnaryOp op, const char* name) {
  const Tensor X = x.data().contiguous();
  Tensor out = X.new_empty(X.shape());
  kern::unary(op, X, out);
  return make_result(out, name, {x}, [X, out, op](const Tensor& g, GradSlots& gin) {
    kern::unary_backward(op, X, out, g.contiguous(), gin[0]);
  });
}
}  // namespace

Var exp(const Var& x) { return unary_op(x, UnaryOp::exp, "exp"); }
Var log(const Var& x) { return unary_op(x, UnaryOp::log, "log"); }
Var log1p(const Var& x) { return unary_op(x, UnaryOp::log1p, "log1p"); }
Var softplus(const Var& x) { return unary_op(x, UnaryOp::softplus, "softplus"); }

Var gelu(const Var& x, bool tanh_approx) {
  const Tensor X = x.data().contiguous();
  Tensor out = X.new_empty(X.shape());
  kern::gelu_forward(X, out, tanh_approx);
  return make_result(out, "gelu", {x}, [X, tanh_approx](const Tensor& g, GradSlots& gin) {
    bool fresh = false;  // a first gradient is written, not added to zeros
    Tensor& gx = gin.slot(0, fresh);
    kern::gelu_backward(X, g.contiguous(), gx, tanh_approx, !fresh);
  });
}

Var dropout(const Var& x, double p, const RngKey& key, bool training) {
  if (!training || p == 0.0) return x;
  const Tensor X = x.data().contiguous();
  Tensor out = X.new_empty(X.shape());
  Tensor mask = Tensor::empty(X.shape(), DType::u8, X.device());
  kern::dropout_forward(X, p, key, out, mask);
  return make_result(out, "dropout", {x}, [mask, p](const Tensor& g, GradSlots& gin) {
    bool fresh = false;
    Tensor& gx = gin.slot(0, fresh);
    kern::dropout_backward(g.contiguous(), mask, p, gx, !fresh);
  });
}

}  // namespace saobp
