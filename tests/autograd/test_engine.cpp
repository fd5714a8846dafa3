// The backward engine: fan-out accumulation, deep graphs, grad mode, freed graphs, gradient
// accumulation across calls, zero_grad, retain_grad, seeds.
#include "support.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::randn;
using saobp::test::values;

TEST_CASE("fan-out: a variable used three times accumulates all three gradients", "[autograd]") {
  const Tensor xt = Tensor::from_vector(std::vector<double>{0.5, -1.5, 2.0});
  Var x(xt, true);
  // y = Σ (x*x + 3x + x) -> dy/dx = 2x + 4, through three uses of x (mul takes it twice).
  Var y = sum(add(add(mul(x, x), scale(x, 3.0)), x));
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{5.0, 1.0, 8.0});
  CHECK(y.data().item() == Approx(0.25 + 1.5 + 0.5 + 2.25 - 4.5 - 1.5 + 4 + 6 + 2));

  // Diamond: two paths from x to the loss through a shared intermediate.
  Var z(xt, true);
  Var h = scale(z, 2.0);
  Var out = sum(mul(h, add(h, z)));  // Σ 2z (2z + z) = Σ 6 z² -> 12 z
  out.backward();
  CHECK(values(z.grad()) == std::vector<double>{6.0, -18.0, 24.0});
}

TEST_CASE("a taken-over gradient buffer is never shared by two inputs or kept by its owner", "[autograd]") {
  // GradSlots::steal: add and reshape hand the output's gradient buffer to one input instead of
  // copying it. Two inputs of one add must still get separate buffers, the same variable twice
  // must get the sum, a retained gradient must not be taken, and later accumulation into the
  // taker must not show through anywhere else.
  const Tensor at = Tensor::from_vector(std::vector<double>{1.0, -2.0, 3.0, 0.5});
  const Tensor wt = Tensor::from_vector(std::vector<double>{0.5, 1.5, -1.0, 2.0});
  Var a(at, true), b(at.clone(), true), w(wt);
  Var s = add(a, b);
  s.retain_grad();
  Var r = reshape(add(s, a), {2, 2});  // a gets gradients from two nodes
  Var loss = sum(mul(reshape(r, {4}), w));
  loss.backward();
  CHECK(values(s.grad()) == values(wt));                                // retained: not taken over
  CHECK(values(b.grad()) == values(wt));                                // its own buffer ...
  CHECK(values(a.grad()) == std::vector<double>{1.0, 3.0, -2.0, 4.0});  // ... and a's: w + w
  CHECK(a.grad().data<double>() != b.grad().data<double>());
  CHECK(a.grad().data<double>() != s.grad().data<double>());

  Var x(at, true);
  sum(mul(add(x, x), w)).backward();  // one variable as both inputs: 2w
  CHECK(values(x.grad()) == std::vector<double>{1.0, 3.0, -2.0, 4.0});
}

TEST_CASE("a deep chain of 20000 ops runs backward without stack overflow", "[autograd]") {
  const int depth = 20000;
  Var x(Tensor::from_vector(std::vector<double>{1.0, 2.0}), true);
  const Var c(Tensor::from_vector(std::vector<double>{0.5, 0.25}));
  Var y = x;
  for (int i = 0; i < depth; ++i) y = i % 2 ? add(y, c) : scale(y, 1.0);
  Var loss = sum(y);
  loss.backward();
  CHECK(values(x.grad()) == std::vector<double>{1.0, 1.0});
  CHECK(loss.data().item() == Approx(3.0 + depth / 2 * 0.75));
}

TEST_CASE("a deep graph dropped without backward is released without stack overflow", "[autograd]") {
  const int depth = 20000;
  Var x(Tensor::from_vector(std::vector<double>{1.0}), true);
  std::weak_ptr<VarImpl> first;
  {
    Var y = x;
    for (int i = 0; i < depth; ++i) {
      y = scale(y, 1.0);
      if (i == 0) first = y.impl();
    }
    CHECK_FALSE(first.expired());
  }
  CHECK(first.expired());  // the whole chain went with its last handle
}

TEST_CASE("NoGradGuard records nothing and restores grad mode", "[autograd]") {
  Var x(randn({2, 3}, 1), true);
  CHECK(grad_enabled());
  {
    NoGradGuard ng;
    CHECK_FALSE(grad_enabled());
    Var y = mul(x, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK(y.impl()->node == nullptr);
    CHECK_ERROR(sum(y).backward(), Contains("[backward]"));
    {
      NoGradGuard nested;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  Var y = mul(x, x);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  // An op whose inputs need no gradient records nothing either.
  Var c(randn({2, 3}, 2));
  Var z = mul(c, c);
  CHECK_FALSE(z.requires_grad());
  CHECK(z.is_leaf());
}

TEST_CASE("a second backward through a freed graph throws", "[autograd]") {
  Var x(randn({3}, 3), true);
  Var y = sum(mul(x, x));
  y.backward();
  const std::vector<double> g = values(x.grad());
  CHECK_ERROR(y.backward(), Contains("[backward]") && Contains("freed"));
  CHECK(values(x.grad()) == g);  // the leaf did not change
}

TEST_CASE("leaf gradients accumulate across backward calls, zero_grad resets", "[autograd]") {
  const Tensor xt = Tensor::from_vector(std::vector<double>{1.0, -2.0, 3.0});
  Var x(xt, true);
  auto loss = [&] { return sum(mul(x, scale(x, 0.5))); };  // Σ x²/2 -> x
  loss().backward();
  CHECK(values(x.grad()) == std::vector<double>{1.0, -2.0, 3.0});
  loss().backward();
  CHECK(values(x.grad()) == std::vector<double>{2.0, -4.0, 6.0});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  loss().backward();
  CHECK(values(x.grad()) == std::vector<double>{1.0, -2.0, 3.0});
  // A leaf that does not require grad gets none.
  Var c(xt);
  Var x2(xt, true);
  sum(mul(c, x2)).backward();
  CHECK_FALSE(c.grad().defined());
  CHECK(values(x2.grad()) == std::vector<double>{1.0, -2.0, 3.0});
}

TEST_CASE("retain_grad keeps a non-leaf gradient, others are released", "[autograd]") {
  Var x(Tensor::from_vector(std::vector<double>{1.0, 2.0}), true);
  Var h = scale(x, 3.0);
  Var k = scale(x, 5.0);
  h.retain_grad();
  Var loss = sum(mul(h, k));  // Σ 15 x²
  loss.backward();
  REQUIRE(h.grad().defined());
  CHECK(values(h.grad()) == std::vector<double>{5.0, 10.0});  // dL/dh = k
  CHECK_FALSE(k.grad().defined());
  CHECK(values(x.grad()) == std::vector<double>{30.0, 60.0});
  // The root keeps its seed.
  CHECK(loss.grad().defined());
  CHECK(loss.grad().item() == 1.0);
}

TEST_CASE("backward seeds: scalar default, explicit seed for non-scalars", "[autograd]") {
  Var x(randn({2, 3}, 4), true);
  Var y = scale(x, 2.0);
  CHECK_ERROR(y.backward(), Contains("[backward]") && Contains("scalar"));
  CHECK_ERROR(y.backward(Tensor::zeros({3, 2}, DType::f64)), Contains("[backward]") && Contains("seed"));
  const Tensor seed = randn({2, 3}, 5);
  y.backward(seed);
  const auto s = values(seed), g = values(x.grad());
  for (size_t i = 0; i < s.size(); ++i) CHECK(g[i] == 2.0 * s[i]);
  Var c(randn({2}, 6));
  CHECK_ERROR(sum(c).backward(), Contains("[backward]") && Contains("require"));
  // A one-element non-0-d output is a scalar too.
  Var z(Tensor::from_vector(std::vector<double>{3.0}), true);
  scale(z, 4.0).backward();
  CHECK(z.grad().item() == 4.0);
}

TEST_CASE("views of a variable get their gradient routed back to the right elements", "[autograd]") {
  // x (2,3); y = slice + transpose + reshape; gradient lands where each element came from.
  Var x(Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3}), true);
  Var y = reshape(transpose(slice(x, 1, 1, 3), 0, 1), {4});  // [1, 4, 2, 5]
  CHECK(values(y.data()) == std::vector<double>{1, 4, 2, 5});
  y.backward(Tensor::from_vector(std::vector<double>{10, 20, 30, 40}));
  CHECK(values(x.grad()) == std::vector<double>{0, 10, 30, 0, 20, 40});
}

TEST_CASE("detach cuts the graph", "[autograd]") {
  Var x(randn({3}, 7), true);
  Var h = scale(x, 2.0);
  Var d = h.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data().shares_storage(h.data()));
  Var loss = sum(add(mul(d, x), h));  // d x + 2 x, d constant -> grad = d + 2
  loss.backward();
  const auto dv = values(d.data()), g = values(x.grad());
  for (size_t i = 0; i < 3; ++i) CHECK(g[i] == Approx(dv[i] + 2.0));
}

TEST_CASE("the graph keeps an unsaved activation's geometry and frees its data", "[autograd]") {
  // loss = Σ (gelu(x W1ᵀ) W2ᵀ + x): gelu saves its input h1 and the second linear its input g;
  // no backward saves h2 = g W2ᵀ or the sum's input, so their data goes with their last Var
  // while the nodes keep them for their gradients (the engine's "Memory", var.h).
  const int64_t N = 48, D = 24;
  const size_t act = static_cast<size_t>(N * D) * sizeof(float);
  Var x(randn({N, D}, 1, DType::f32), true), w1(randn({D, D}, 2, DType::f32), true);
  Var w2(randn({D, D}, 3, DType::f32), true);
  std::vector<Var> kept;  // when set, holds every intermediate as a caller that keeps them would
  const auto forward = [&](bool keep) {
    const Var h1 = linear(x, w1), g = gelu(h1), h2 = linear(g, w2), s = add(h2, x);
    if (keep) kept = {h1, g, h2, s};
    return sum(s);
  };
  const size_t before = host_tensor_bytes();
  Var loss = forward(false);
  CHECK(host_tensor_bytes() - before == 2 * act + sizeof(float));  // h1, g and the loss
  loss.backward();  // the sum's and the add's gradients are built from the kept geometry
  const std::vector<double> gx = values(x.grad()), gw1 = values(w1.grad()), gw2 = values(w2.grad());
  for (Var* p : {&x, &w1, &w2}) p->zero_grad();
  loss = forward(true);
  CHECK(host_tensor_bytes() - before == 4 * act + sizeof(float));
  loss.backward();
  CHECK(values(x.grad()) == gx);  // the same bits whether or not the caller kept the activations
  CHECK(values(w1.grad()) == gw1);
  CHECK(values(w2.grad()) == gw2);
}

TEST_CASE("under bf16 GEMM inputs a linear layer's f32 input is freed and its bf16 copy kept", "[autograd]") {
  // loss = Σ linear(gelu(x), W, b) with bf16 operands: the linear layer's backward keeps the bf16
  // copies of gelu(x) and W; the f32 gelu(x) and the layer's output are saved by no backward.
  const int64_t N = 40, D = 32;
  Var x(randn({N, D}, 4, DType::f32), true), w(randn({D, D}, 5, DType::f32), true);
  Var b(randn({D}, 6, DType::f32), true);
  const size_t before = host_tensor_bytes();
  const Var loss = sum(linear(gelu(x), w, b, GemmInputs::bf16));
  CHECK(host_tensor_bytes() - before == static_cast<size_t>(N * D + D * D) * 2 + sizeof(float));
  loss.backward();
  CHECK(x.grad().defined());
  CHECK(w.grad().defined());
}
