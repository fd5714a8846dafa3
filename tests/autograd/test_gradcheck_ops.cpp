// f64 finite-difference gradient checks of every differentiable op of src/autograd/ops.h, one
// composite attention block end to end, and the masked / ignored / out-of-range edge cases.
#include <cmath>
#include <limits>

#include "support.h"
#include "tensor/philox.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::ids;
using saobp::test::randn;
using saobp::test::randu;
using saobp::test::require_gradcheck;
using saobp::test::values;
using VV = std::vector<Var>;

// ------------------------------------------------------------------------------ linear algebra

TEST_CASE("gradcheck matmul", "[gradcheck]") {
  SECTION("2D weight, batched rows") {
    require_gradcheck([](const VV& v) { return matmul(v[0], v[1]); },
                      {randn({2, 3, 4}, 1), randn({4, 5}, 2)});
  }
  SECTION("2D weight given as a transposed view (trans flag on b)") {
    require_gradcheck([](const VV& v) { return matmul(v[0], transpose(v[1], 0, 1)); },
                      {randn({2, 3, 4}, 3), randn({5, 4}, 4)});
  }
  SECTION("2D, lhs a transposed view") {
    require_gradcheck([](const VV& v) { return matmul(transpose(v[0], 0, 1), v[1]); },
                      {randn({4, 3}, 5), randn({4, 5}, 6)});
  }
  SECTION("batched 3D and 4D") {
    require_gradcheck([](const VV& v) { return matmul(v[0], v[1]); },
                      {randn({2, 3, 4}, 7), randn({2, 4, 5}, 8)});
    require_gradcheck([](const VV& v) { return matmul(v[0], v[1]); },
                      {randn({2, 2, 3, 4}, 9), randn({2, 2, 4, 5}, 10)});
  }
  SECTION("batched q kᵀ: transpose(k, -1, -2) of a contiguous k (trans flag on b)") {
    require_gradcheck([](const VV& v) { return matmul(v[0], transpose(v[1], -1, -2)); },
                      {randn({2, 2, 3, 4}, 11), randn({2, 2, 5, 4}, 12)});
  }
  SECTION("batched, lhs transposed (trans flag on a) and both transposed") {
    require_gradcheck([](const VV& v) { return matmul(transpose(v[0], -1, -2), v[1]); },
                      {randn({2, 4, 3}, 13), randn({2, 4, 5}, 14)});
    require_gradcheck([](const VV& v) { return matmul(transpose(v[0], -1, -2), transpose(v[1], -1, -2)); },
                      {randn({2, 4, 3}, 15), randn({2, 5, 4}, 16)});
  }
  SECTION("batched, an operand that is neither contiguous nor a transpose (copied)") {
    require_gradcheck([](const VV& v) { return matmul(slice(v[0], 2, 1, 5), v[1]); },
                      {randn({2, 3, 6}, 17), randn({2, 4, 5}, 18)});
    require_gradcheck([](const VV& v) { return matmul(v[0], transpose(split_heads(v[1], 2), -1, -2)); },
                      {randn({2, 2, 3, 2}, 19), randn({2, 4, 4}, 20)});
  }
  SECTION("the same variable on both sides") {
    require_gradcheck([](const VV& v) { return matmul(v[0], v[0]); }, {randn({3, 3}, 21)});
    require_gradcheck([](const VV& v) { return matmul(v[0], transpose(v[0], -1, -2)); },
                      {randn({2, 3, 4}, 22)});
  }
}

TEST_CASE("matmul rejects bad operands", "[autograd]") {
  const Var a(Tensor::zeros({2, 3}, DType::f64)), b(Tensor::zeros({4, 5}, DType::f64));
  CHECK_ERROR(matmul(a, b), Contains("[matmul]") && Contains("[2, 3]") && Contains("[4, 5]"));
  CHECK_ERROR(matmul(Var(Tensor::zeros({3}, DType::f64)), b), Contains("[matmul]"));
  CHECK_ERROR(matmul(Var(Tensor::zeros({2, 2, 3}, DType::f64)), Var(Tensor::zeros({3, 2, 3, 4}, DType::f64))),
              Contains("[matmul]"));
  CHECK_ERROR(matmul(Var(Tensor::zeros({2, 2, 3}, DType::f64)), Var(Tensor::zeros({3, 3, 4}, DType::f64))),
              Contains("[matmul]"));
}

TEST_CASE("gradcheck linear", "[gradcheck]") {
  SECTION("with bias") {
    require_gradcheck([](const VV& v) { return linear(v[0], v[1], v[2]); },
                      {randn({2, 3, 4}, 31), randn({5, 4}, 32), randn({5}, 33)});
  }
  SECTION("without bias") {
    require_gradcheck([](const VV& v) { return linear(v[0], v[1]); }, {randn({3, 4}, 34), randn({5, 4}, 35)});
  }
  SECTION("non-contiguous input") {
    require_gradcheck([](const VV& v) { return linear(transpose(v[0], 0, 1), v[1], v[2]); },
                      {randn({4, 3}, 36), randn({2, 4}, 37), randn({2}, 38)});
  }
  const Var x(Tensor::zeros({2, 4}, DType::f64)), w(Tensor::zeros({5, 4}, DType::f64));
  CHECK_ERROR(linear(x, Var(Tensor::zeros({5, 3}, DType::f64))), Contains("[linear]"));
  CHECK_ERROR(linear(x, w, Var(Tensor::zeros({4}, DType::f64))), Contains("[linear]") && Contains("bias"));
}

TEST_CASE("gradcheck conv1d", "[gradcheck]") {
  SECTION("with bias") {
    require_gradcheck([](const VV& v) { return conv1d(v[0], v[1], v[2]); },
                      {randn({2, 3, 4}, 131), randn({4, 5}, 132), randn({5}, 133)});
  }
  SECTION("without bias") {
    require_gradcheck([](const VV& v) { return conv1d(v[0], v[1]); },
                      {randn({3, 4}, 134), randn({4, 5}, 135)});
  }
  SECTION("only the bias learns") {
    const Var x(randn({3, 4}, 136)), w(randn({4, 2}, 137));
    require_gradcheck([&](const VV& v) { return conv1d(x, w, v[0]); }, {randn({2}, 138)});
  }
  const Var x(Tensor::zeros({2, 4}, DType::f64)), w(Tensor::zeros({4, 5}, DType::f64));
  CHECK_ERROR(conv1d(x, Var(Tensor::zeros({3, 5}, DType::f64))),
              Contains("[conv1d]") && Contains("(IN, OUT)"));
  CHECK_ERROR(conv1d(x, w, Var(Tensor::zeros({4}, DType::f64))), Contains("[conv1d]") && Contains("bias"));
}

// ------------------------------------------------------------------------------ elementwise

TEST_CASE("gradcheck add/sub/mul/div with broadcasting", "[gradcheck]") {
  const std::vector<std::pair<Shape, Shape>> patterns = {
      {{2, 3}, {3}}, {{3}, {2, 3}},    {{2, 1, 4}, {3, 1}}, {{2, 3}, {1}},
      {{1}, {2, 3}}, {{1, 3}, {2, 1}}, {{2, 3}, {2, 3}},    {{2, 3}, {}},
  };
  using Op = Var (*)(const Var&, const Var&);
  const std::vector<std::pair<const char*, Op>> ops = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}};
  SECTION("every op in every broadcast pattern") {
    uint64_t seed = 100;
    for (const auto& [name, op] : ops)
      for (const auto& [sa, sb] : patterns) {
        INFO(name << " " << shape_str(sa) << " " << shape_str(sb));
        // Divisors kept in [0.5, 1.5] (away from 0); signs from the numerators.
        const Tensor b = std::string(name) == "div" ? randu(sb, seed + 1, 0.5, 1.5) : randn(sb, seed + 1);
        require_gradcheck([op = op](const VV& v) { return op(v[0], v[1]); }, {randn(sa, seed), b});
        seed += 2;
      }
  }
  SECTION("the same variable as both operands") {
    require_gradcheck([](const VV& v) { return mul(v[0], v[0]); }, {randn({2, 3}, 150)});
    require_gradcheck([](const VV& v) { return div(v[0], mul(v[0], v[0])); }, {randu({2, 3}, 151, 0.5, 2.0)});
    require_gradcheck([](const VV& v) { return sub(v[0], transpose(v[0], 0, 1)); }, {randn({3, 3}, 152)});
  }
  SECTION("strided operands") {
    require_gradcheck([](const VV& v) { return mul(transpose(v[0], 0, 1), slice(v[1], 0, 1, 2)); },
                      {randn({4, 3}, 153), randn({3, 4}, 154)});
  }
  const Var a(Tensor::zeros({2, 3}, DType::f64));
  CHECK_ERROR(add(a, Var(Tensor::zeros({4}, DType::f64))), Contains("[add]") && Contains("[2, 3]"));
  CHECK_ERROR(mul(a, Var(Tensor::zeros({2, 3}, DType::f32))), Contains("[mul]") && Contains("dtype"));
}

TEST_CASE("gradcheck scale and gelu (erf and tanh)", "[gradcheck]") {
  require_gradcheck([](const VV& v) { return scale(v[0], -2.5); }, {randn({2, 3}, 201)});
  require_gradcheck([](const VV& v) { return gelu(v[0], false); }, {randn({3, 5}, 202, DType::f64, 2.0)});
  require_gradcheck([](const VV& v) { return gelu(v[0], true); }, {randn({3, 5}, 203, DType::f64, 2.0)});
  require_gradcheck([](const VV& v) { return gelu(transpose(v[0], 0, 1), true); }, {randn({3, 4}, 204)});
}

TEST_CASE("gradcheck add_scalar, exp, log, log1p, softplus", "[gradcheck]") {
  require_gradcheck([](const VV& v) { return add_scalar(v[0], 1.25); }, {randn({2, 3}, 221)});
  require_gradcheck([](const VV& v) { return saobp::exp(v[0]); }, {randn({2, 3}, 222)});
  require_gradcheck([](const VV& v) { return saobp::log(v[0]); }, {randu({2, 3}, 223, 0.5, 3.0)});
  require_gradcheck([](const VV& v) { return saobp::log1p(v[0]); }, {randu({2, 3}, 224, -0.5, 3.0)});
  require_gradcheck([](const VV& v) { return softplus(v[0]); }, {randn({3, 4}, 225, DType::f64, 3.0)});
  // Values against libm.
  const Tensor x = Tensor::from_vector(std::vector<double>{-30.0, -1.0, 0.0, 2.0, 40.0});
  const auto sp = values(softplus(Var(x)).data());
  for (size_t i = 0; i < 5; ++i) CHECK(sp[i] == Approx(std::log1p(std::exp(values(x)[i]))).epsilon(1e-15));
  CHECK(values(add_scalar(Var(x), 1.25).data()) == std::vector<double>{-28.75, 0.25, 1.25, 3.25, 41.25});
}

TEST_CASE("gradcheck dropout, its gradient is the mask scaled by 1/(1-p)", "[gradcheck]") {
  const RngKey key{42, 17, 5};
  const double p = 0.4;
  require_gradcheck([&](const VV& v) { return dropout(v[0], p, key); }, {randn({4, 6}, 211)});

  const Tensor x = randn({4, 6}, 212), R = randn({4, 6}, 213);
  Var xv(x, true);
  Var y = dropout(xv, p, key);
  y.backward(R);
  const auto g = values(xv.grad()), r = values(R), yv = values(y.data()), xs = values(x);
  int kept = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool keep = philox::to_unit_float(philox::word(42, 17, 5 + i)) >= static_cast<float>(p);
    kept += keep;
    CHECK(yv[i] == (keep ? xs[i] * (1.0 / (1.0 - p)) : 0.0));
    CHECK(g[i] == (keep ? r[i] * (1.0 / (1.0 - p)) : 0.0));
  }
  CHECK(kept > 0);
  CHECK(kept < 24);
  // The same key gives the same mask; identity when not training or p == 0.
  CHECK(saobp::test::bitwise_equal(dropout(Var(x), p, key).data(), y.data()));
  CHECK(dropout(xv, p, key, false).impl() == xv.impl());
  CHECK(dropout(xv, 0.0, key).impl() == xv.impl());
}

// ------------------------------------------------------------------------------ shape ops

TEST_CASE("gradcheck shape ops", "[gradcheck]") {
  SECTION("reshape (contiguous and copied)") {
    require_gradcheck([](const VV& v) { return reshape(v[0], {3, -1}); }, {randn({2, 3, 2}, 301)});
    require_gradcheck(
        [](const VV& v) {
          return reshape(transpose(v[0], 0, 2), {6, 2});
        },
        {randn({2, 3, 2}, 302)});
  }
  SECTION("transpose and permute") {
    require_gradcheck([](const VV& v) { return transpose(v[0], 0, 2); }, {randn({2, 3, 4}, 303)});
    require_gradcheck([](const VV& v) { return permute(v[0], {2, 0, 1}); }, {randn({2, 3, 4}, 304)});
    require_gradcheck(
        [](const VV& v) {
          return mul(permute(v[0], {1, 2, 0}), v[1]);
        },
        {randn({2, 3, 4}, 305), randn({3, 4, 2}, 306)});
  }
  SECTION("slice") {
    require_gradcheck([](const VV& v) { return slice(v[0], 1, 1, 3); }, {randn({2, 4, 3}, 307)});
    require_gradcheck([](const VV& v) { return add(slice(v[0], -1, 0, 2), slice(v[0], -1, 1, 3)); },
                      {randn({2, 3}, 308)});
  }
  SECTION("split and concat") {
    require_gradcheck(
        [](const VV& v) {
          const auto p = split(v[0], 1, 2);  // (2,2) (2,2) (2,1)
          REQUIRE(p.size() == 3);
          return concat({mul(p[0], p[1]), p[2], scale(p[0], 3.0)}, 1);
        },
        {randn({2, 5}, 309)});
    require_gradcheck(
        [](const VV& v) {
          return concat({v[0], v[1], v[2]}, 0);
        },
        {randn({1, 3}, 310), randn({2, 3}, 311), randn({3, 3}, 312)});
    require_gradcheck(
        [](const VV& v) {
          return concat({v[0], transpose(v[1], 0, 1)}, -1);
        },
        {randn({3, 2}, 313), randn({4, 3}, 314)});
  }
  SECTION("contiguous") {
    require_gradcheck([](const VV& v) { return contiguous(transpose(v[0], 0, 1)); }, {randn({3, 4}, 315)});
    require_gradcheck([](const VV& v) { return contiguous(v[0]); }, {randn({3, 4}, 316)});
  }
  SECTION("split_heads and merge_heads") {
    require_gradcheck([](const VV& v) { return split_heads(v[0], 2); }, {randn({2, 3, 4}, 317)});
    require_gradcheck([](const VV& v) { return merge_heads(v[0]); }, {randn({2, 2, 3, 2}, 318)});
    require_gradcheck([](const VV& v) { return merge_heads(mul(split_heads(v[0], 2), v[1])); },
                      {randn({2, 3, 4}, 319), randn({2, 1, 3, 2}, 320)});
  }
  const Var x(Tensor::zeros({2, 3}, DType::f64));
  CHECK_ERROR(concat({x, Var(Tensor::zeros({2, 4}, DType::f64))}, 0), Contains("[concat]"));
  CHECK_ERROR(concat({}, 0), Contains("[concat]"));
  CHECK_ERROR(split_heads(x, 2), Contains("[split_heads]"));
  CHECK_ERROR(merge_heads(x), Contains("[merge_heads]"));
  CHECK_ERROR(split(x, 0, 0), Contains("[split]"));
}

TEST_CASE("split_heads/merge_heads are inverses and split_heads is a view", "[autograd]") {
  const Tensor x = randn({2, 3, 6}, 330);
  const Var h = split_heads(Var(x), 3);
  CHECK(h.shape() == Shape{2, 3, 3, 2});
  CHECK(h.data().shares_storage(x));
  CHECK(saobp::test::bitwise_equal(merge_heads(h).data(), x));
}

// ------------------------------------------------------------------------------ network layers

TEST_CASE("gradcheck embedding with repeated ids", "[gradcheck]") {
  const Tensor id = ids({1, 3, 1, 4, 1, 0}, {2, 3});
  require_gradcheck([&](const VV& v) { return embedding(v[0], id); }, {randn({5, 3}, 401)});
  // Row 2 is absent: exactly zero gradient. Row 1 appears three times: the sum of three rows of R.
  const Tensor R = randn({2, 3, 3}, 402);
  Var w(randn({5, 3}, 403), true);
  embedding(w, id).backward(R);
  const auto g = values(w.grad()), r = values(R);
  for (int c = 0; c < 3; ++c) {
    CHECK(g[static_cast<size_t>(2 * 3 + c)] == 0.0);
    CHECK(g[static_cast<size_t>(1 * 3 + c)] ==
          Approx(r[static_cast<size_t>(c)] + r[static_cast<size_t>(6 + c)] + r[static_cast<size_t>(12 + c)]));
  }
}

TEST_CASE("gradcheck layernorm: x, weight and bias", "[gradcheck]") {
  require_gradcheck([](const VV& v) { return layernorm(v[0], v[1], v[2], 1e-5); },
                    {randn({2, 3, 5}, 411, DType::f64, 2.0, 0.5), randn({5}, 412), randn({5}, 413)});
  require_gradcheck([](const VV& v) { return layernorm(transpose(v[0], 0, 1), v[1], v[2], 1e-3); },
                    {randn({4, 3}, 414), randn({4}, 415), randn({4}, 416)});
}

TEST_CASE("gradcheck softmax and log_softmax, with and without masks", "[gradcheck]") {
  using Fn = Var (*)(const Var&, const Tensor&);
  for (Fn f : {static_cast<Fn>(softmax), static_cast<Fn>(log_softmax)}) {
    const bool log = f == static_cast<Fn>(log_softmax);
    INFO((log ? "log_softmax" : "softmax"));
    // No mask.
    require_gradcheck([f](const VV& v) { return f(v[0], Tensor()); },
                      {randn({2, 3, 5}, 421, DType::f64, 2.0)});
    // Causal (1,1,T,T) mask over (B,NH,T,T), with query row 0 fully masked.
    const int64_t T = 4;
    std::vector<uint8_t> m(T * T);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) m[static_cast<size_t>(i * T + j)] = i > 0 && j <= i;
    const Tensor causal = saobp::test::mask_of(m, {1, 1, T, T});
    require_gradcheck([f, causal](const VV& v) { return f(v[0], causal); },
                      {randn({2, 2, T, T}, 422, DType::f64, 2.0)});
    // Key-padding mask (B,1,1,T): batch 1 is fully masked.
    const Tensor pad = saobp::test::mask_of({1, 1, 0, 1, 0, 0, 0, 0}, {2, 1, 1, T});
    require_gradcheck([f, pad](const VV& v) { return f(v[0], pad); },
                      {randn({2, 2, 3, T}, 423, DType::f64, 2.0)});
    // Same-shape mask on a non-contiguous input.
    const Tensor full = saobp::test::mask_of({1, 0, 1, 1, 1, 0}, {3, 2});
    require_gradcheck([f, full](const VV& v) { return f(transpose(v[0], 0, 1), full); },
                      {randn({2, 3}, 424)});
  }
  const Var x(Tensor::zeros({2, 3}, DType::f64));
  CHECK_ERROR(softmax(x, Tensor::zeros({2, 3}, DType::f32)), Contains("[softmax]") && Contains("mask"));
  CHECK_ERROR(log_softmax(x, Tensor::zeros({4}, DType::u8)), Contains("[log_softmax]"));
}

TEST_CASE("gradcheck cross_entropy with ignored rows", "[gradcheck]") {
  const Tensor tg = ids({1, -100, 4, 0, -100, 2}, {2, 3});
  require_gradcheck([&](const VV& v) { return cross_entropy(v[0], tg); },
                    {randn({2, 3, 5}, 431, DType::f64, 2.0)});
  const Tensor all = ids({1, 3, 4, 0}, {4});
  require_gradcheck([&](const VV& v) { return cross_entropy(v[0], all); }, {randn({4, 5}, 432)});
  const Tensor custom = ids({3, 1, 3, 0}, {4});  // ignore_index 3: a valid class id ignored
  require_gradcheck([&](const VV& v) { return cross_entropy(v[0], custom, 3); }, {randn({4, 5}, 433)});
  // The loss is the mean over counted rows.
  const Tensor L = randn({4, 5}, 434);
  const double got = cross_entropy(Var(L), custom, 3).data().item();
  const auto lv = values(L);
  double want = 0;
  for (int n : {1, 3}) {
    double s = 0;
    for (int v = 0; v < 5; ++v) s += std::exp(lv[static_cast<size_t>(n * 5 + v)]);
    want += std::log(s) - lv[static_cast<size_t>(n * 5 + (n == 1 ? 1 : 0))];
  }
  CHECK(got == Approx(want / 2).epsilon(1e-13));
  CHECK_ERROR(cross_entropy(Var(L), ids({1, 2, 3}, {3})), Contains("[cross_entropy]"));
  CHECK_ERROR(cross_entropy(Var(L), Tensor::zeros({4}, DType::f32)), Contains("[cross_entropy]"));
}

// ------------------------------------------------------------------------------ reductions

TEST_CASE("gradcheck sum and mean", "[gradcheck]") {
  const Tensor x = randn({2, 3, 4}, 441);
  require_gradcheck([](const VV& v) { return sum(v[0]); }, {x});
  require_gradcheck([](const VV& v) { return mean(v[0]); }, {x});
  for (int64_t d : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      INFO("dim " << d << " keepdim " << keep);
      require_gradcheck([=](const VV& v) { return sum(v[0], d, keep); }, {x});
      require_gradcheck([=](const VV& v) { return mean(v[0], d, keep); }, {x});
    }
  require_gradcheck([](const VV& v) { return mean(transpose(v[0], 0, 2), 1); }, {x});
  // Shapes.
  const Var xv(x);
  CHECK(sum(xv).shape() == Shape{});
  CHECK(sum(xv, 1).shape() == Shape{2, 4});
  CHECK(sum(xv, 1, true).shape() == Shape{2, 1, 4});
  CHECK(mean(xv, -1).shape() == Shape{2, 3});
  CHECK(mean(xv).data().item() == Approx(sum(xv).data().item() / 24));
  CHECK_ERROR(sum(xv, 3), Contains("out of range") && Contains("3"));
}

// ------------------------------------------------------------------------------ composite

TEST_CASE("gradcheck a tiny attention block end to end", "[gradcheck]") {
  // x: (B,T,C) -> qkv = linear -> split -> heads -> softmax(q kᵀ / √HS, causal) v -> merge ->
  // linear -> layernorm -> gelu -> cross_entropy over C classes (one target ignored).
  const int64_t B = 2, T = 3, C = 4, NH = 2, HS = C / NH;
  const Tensor mask = saobp::test::causal_mask(T);
  const Tensor targets = ids({1, 3, -100, 0, 2, 2}, {B, T});
  auto block = [&](const VV& v) {
    const Var& x = v[0];
    const Var qkv = linear(x, v[1], v[2]);  // (B,T,3C)
    const auto parts = split(qkv, -1, C);
    const Var q = split_heads(parts[0], NH), k = contiguous(split_heads(parts[1], NH)),
              vv = split_heads(parts[2], NH);
    const Var att = softmax(scale(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(double(HS))), mask);
    const Var y = merge_heads(matmul(att, vv));  // (B,T,C)
    const Var h = gelu(layernorm(linear(y, v[3], v[4]), v[5], v[6], 1e-5), true);
    return cross_entropy(add(h, x), targets);
  };
  require_gradcheck(block, {randn({B, T, C}, 501), randn({3 * C, C}, 502, DType::f64, 0.5),
                            randn({3 * C}, 503, DType::f64, 0.1), randn({C, C}, 504, DType::f64, 0.5),
                            randn({C}, 505, DType::f64, 0.1), randn({C}, 506, DType::f64, 0.3, 1.0),
                            randn({C}, 507, DType::f64, 0.1)});
}

// ------------------------------------------------------------------------------ edge cases

TEST_CASE("fully masked rows give exact zeros and zero gradients, never NaN", "[autograd]") {
  for (DType dt : {DType::f32, DType::f64})
    for (bool log : {false, true}) {
      INFO(dtype_name(dt) << (log ? " log_softmax" : " softmax"));
      const Tensor mask = saobp::test::mask_of({0, 0, 0, 0, 1, 1, 0, 1}, {2, 4});
      Var x(randn({2, 4}, 601, dt, 3.0), true);
      Var y = log ? log_softmax(x, mask) : softmax(x, mask);
      const auto yv = values(y.data());
      for (int c = 0; c < 4; ++c) CHECK(yv[static_cast<size_t>(c)] == 0.0);
      CHECK(yv[6] == 0.0);
      CHECK(saobp::test::all_finite(y.data()));
      y.backward(randn({2, 4}, 602, dt));
      const auto g = values(x.grad());
      CHECK(saobp::test::all_finite(x.grad()));
      for (int c = 0; c < 4; ++c) CHECK(g[static_cast<size_t>(c)] == 0.0);
      CHECK(g[6] == 0.0);
      CHECK(g[4] != 0.0);
    }
}

TEST_CASE("softmax: -inf logits among allowed entries get zero probability, finite gradients", "[autograd]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::f64, DType::f32})
    for (bool log : {false, true}) {
      INFO(dtype_name(dt) << (log ? " log_softmax" : " softmax"));
      // f64 is exact up to rounding; f32 goes through a vectorized exp (about 2 ulp), and its
      // e^-inf is clamped to about FLT_MIN instead of 0.
      const double rel = dt == DType::f64 ? 1e-13 : 2e-6, zero = dt == DType::f64 ? 0.0 : 1e-37;
      // Row 0: one -inf among finite logits. Row 1: every allowed entry -inf (the masked-out
      // entry is finite): the row is dead, like a fully masked one.
      const Tensor xt =
          Tensor::from_vector(std::vector<double>{1.0, -inf, 2.0, 0.5, -inf, -inf, 3.0, -inf}, {2, 4}).to(dt);
      const Tensor mask = saobp::test::mask_of({1, 1, 1, 1, 1, 1, 0, 1}, {2, 4});
      Var x(xt, true);
      Var y = log ? log_softmax(x, mask) : softmax(x, mask);
      const auto yv = values(y.data());
      const double s = std::exp(1.0) + std::exp(2.0) + std::exp(0.5);
      const double want0[4] = {1.0, -inf, 2.0, 0.5};
      if (log)
        CHECK(yv[1] == -inf);
      else
        CHECK(yv[1] == Approx(0.0).margin(zero));
      for (int c : {0, 2, 3})
        CHECK(yv[static_cast<size_t>(c)] ==
              Approx(log ? want0[c] - std::log(s) : std::exp(want0[c]) / s).epsilon(rel));
      for (int c = 4; c < 8; ++c) CHECK(yv[static_cast<size_t>(c)] == 0.0);
      const Tensor R =
          Tensor::from_vector(std::vector<double>{0.3, -1.2, 0.7, 2.0, 1.5, -0.4, 0.9, 0.25}, {2, 4}).to(dt);
      y.backward(R);
      const auto g = values(x.grad());
      CHECK(saobp::test::all_finite(x.grad()));
      // Row 0 against the analytic gradient: p_-inf = 0; for log_softmax the -inf entry's own
      // output (-inf) still depends on the others through the logsumexp, so Σ gy includes it.
      const double r[4] = {0.3, -1.2, 0.7, 2.0};
      const double p[4] = {std::exp(1.0) / s, 0.0, std::exp(2.0) / s, std::exp(0.5) / s};
      double dot = 0, rs = 0;
      for (int c = 0; c < 4; ++c) dot += r[c] * p[c], rs += r[c];
      for (int c : {0, 2, 3}) {
        const double want = log ? r[c] - p[c] * rs : p[c] * (r[c] - dot);
        CHECK(g[static_cast<size_t>(c)] == Approx(want).epsilon(rel).margin(rel));
      }
      // The dead row receives no gradient.
      for (int c = 4; c < 8; ++c) CHECK(g[static_cast<size_t>(c)] == 0.0);
    }
}

TEST_CASE("very large logits stay finite in softmax, log_softmax and cross_entropy", "[autograd]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const Tensor xt =
        Tensor::from_vector(std::vector<double>{1e4, 1e4 - 1, -1e4, 0, -1e4, 1e4, 1e4, 1e4}, {2, 4}).to(dt);
    for (bool log : {false, true}) {
      Var x(xt, true);
      Var y = log ? log_softmax(x) : softmax(x);
      CHECK(saobp::test::all_finite(y.data()));
      y.backward(randn({2, 4}, 611, dt));
      CHECK(saobp::test::all_finite(x.grad()));
      const auto yv = values(y.data());
      const double e = std::exp(-1.0);
      if (log) {
        CHECK(yv[0] == Approx(-std::log(1 + e)).epsilon(1e-6));
        CHECK(yv[7] == Approx(-std::log(3.0)).epsilon(1e-6));
      } else {
        CHECK(yv[0] == Approx(1 / (1 + e)).epsilon(1e-6));
        CHECK(yv[1] == Approx(e / (1 + e)).epsilon(1e-6));
        CHECK(yv[2] == Approx(0.0).margin(1e-37));  // e^-2e4: f32's vectorized exp flushes to ~FLT_MIN
        CHECK(yv[5] == Approx(1.0 / 3).epsilon(1e-6));
      }
    }
    Var x(xt, true);
    Var loss = cross_entropy(x, ids({1, 0}, {2}));
    CHECK(std::isfinite(loss.data().item()));
    // Row 0: lse = 1e4 + log(1 + e^-1), target logit 1e4 - 1. Row 1: lse = 1e4 + log 3, target -1e4.
    const double want = ((1 + std::log(1 + std::exp(-1.0))) + (2e4 + std::log(3.0))) / 2;
    CHECK(loss.data().item() == Approx(want).epsilon(1e-6));
    loss.backward();
    CHECK(saobp::test::all_finite(x.grad()));
  }
}

TEST_CASE("cross_entropy with every row ignored: loss 0, zero gradient", "[autograd]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Var x(randn({3, 5}, 621, dt), true);
    Var loss = cross_entropy(x, ids({-100, -100, -100}, {3}));
    CHECK(loss.data().item() == 0.0);
    loss.backward();
    // Undefined (nothing reached it) or all zeros; never NaN.
    if (x.grad().defined())
      for (double g : values(x.grad())) CHECK(g == 0.0);
    // Through an upstream op as well.
    Var w(randn({5, 5}, 622, dt), true);
    Var l2 = cross_entropy(linear(x, w), ids({7, 7, 7}, {3}), 7);
    CHECK(l2.data().item() == 0.0);
    l2.backward();
    if (w.grad().defined())
      for (double g : values(w.grad())) CHECK(g == 0.0);
  }
}

TEST_CASE("out-of-range embedding ids and targets throw naming the value", "[autograd]") {
  const Var w(randn({5, 3}, 631), true);
  CHECK_ERROR(embedding(w, ids({0, 5, 1}, {3})), Contains("[embedding]") && Contains("5"));
  CHECK_ERROR(embedding(w, ids({0, 1, 9}, {3})), Contains("[embedding]") && Contains("9"));
  CHECK_ERROR(embedding(w, ids({-1, 1}, {2})), Contains("[embedding]") && Contains("-1"));
  CHECK_ERROR(embedding(w, ids({2, -7}, {2})), Contains("[embedding]") && Contains("-7"));
  CHECK_ERROR(embedding(w, Tensor::zeros({2}, DType::f32)), Contains("[embedding]"));
  const Var L(randn({3, 4}, 632), true);
  CHECK_ERROR(cross_entropy(L, ids({0, 4, 1}, {3})), Contains("[cross_entropy]") && Contains("4"));
  CHECK_ERROR(cross_entropy(L, ids({0, 1, -3}, {3})), Contains("[cross_entropy]") && Contains("-3"));
  CHECK_ERROR(cross_entropy(L, ids({0, 1, -100}, {3}), 2), Contains("[cross_entropy]") && Contains("-100"));
  CHECK_NOTHROW(cross_entropy(L, ids({0, 3, -100}, {3})));
}
