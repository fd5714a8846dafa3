// Linear layers with bf16 GEMM inputs (train.precision = "bf16", docs/precision.md): on the CPU,
// whose bf16 GEMM is the f32 GEMM of the widened operands, the forward and every gradient must be
// the bits of the f32 layer run on operands rounded to bf16 beforehand, the output gradient
// rounded too. That pins down where the rounding happens: x and W once in the forward, the
// output gradient once in the backward, nothing else.
#include "autograd/ops.h"
#include "support.h"

using namespace saobp;
using saobp::test::bitwise_equal;
using saobp::test::randn;

namespace {

Tensor rounded(const Tensor& t) { return t.to(DType::bf16).to(DType::f32); }

struct Layer {
  bool conv, bias, weight_learns;
};

// Forward, and backward seeded with the output gradient G: y and the gradients of x, w, b.
struct Run {
  Tensor y, gx, gw, gb;
};
Run run(const Layer& l, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& G,
        GemmInputs in) {
  Var x(x0.clone(), true), w(w0.clone(), l.weight_learns), b = l.bias ? Var(b0.clone(), true) : Var();
  const Var y = l.conv ? conv1d(x, w, b, in) : linear(x, w, b, in);
  y.backward(G);
  return {y.data(), x.grad(), l.weight_learns ? w.grad() : Tensor(), l.bias ? b.grad() : Tensor()};
}

}  // namespace

TEST_CASE("linear and conv1d with bf16 GEMM inputs: the f32 layer on rounded operands, bit for bit",
          "[autograd][bf16]") {
  for (const Layer l : {Layer{false, true, true}, Layer{false, false, true}, Layer{true, true, true},
                        Layer{true, true, false}, Layer{false, true, false}}) {
    INFO((l.conv ? "conv1d" : "linear") << " bias " << l.bias << " weight learns " << l.weight_learns);
    const int64_t IN = 37, OUT = 23;
    const Tensor x = randn({3, 11, IN}, 81, DType::f32);
    const Tensor w = randn(l.conv ? Shape{IN, OUT} : Shape{OUT, IN}, 82, DType::f32, 0.2);
    const Tensor b = randn({OUT}, 83, DType::f32);
    const Tensor G = randn({3, 11, OUT}, 84, DType::f32);
    const Run h = run(l, x, w, b, G, GemmInputs::bf16);
    const Run r = run(l, rounded(x), rounded(w), b, rounded(G), GemmInputs::f32);
    CHECK(bitwise_equal(h.y, r.y));
    CHECK(bitwise_equal(h.gx, r.gx));
    if (l.weight_learns) CHECK(bitwise_equal(h.gw, r.gw));
    if (l.bias) CHECK(bitwise_equal(h.gb, r.gb));
    // And it is not the f32 layer: the rounding shows in the output.
    const Run f = run(l, x, w, b, G, GemmInputs::f32);
    CHECK_FALSE(bitwise_equal(h.y, f.y));
  }
  // bf16 operands are made from f32 only.
  const Var x(randn({2, 4}, 85)), w(randn({3, 4}, 86));
  CHECK_ERROR(linear(x, w, Var(), GemmInputs::bf16), Catch::Contains("[linear]") && Catch::Contains("f64"));
}
