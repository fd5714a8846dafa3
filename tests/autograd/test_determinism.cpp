// Bitwise reproducibility across OpenMP thread counts: every kernel cuts its work by problem
// size only, so outputs and gradients must be byte-identical with 1, 2 and 3 threads.
#include <functional>
#include <map>

#include "support.h"

using namespace saobp;
using saobp::test::bitwise_equal;
using saobp::test::randn;
using saobp::test::with_threads;

namespace {

using Outputs = std::vector<Tensor>;

// Runs `f` with 1, 2 and 3 threads and requires byte-identical results (memcmp).
void require_same_bits(const std::function<Outputs()>& f) {
  const Outputs ref = with_threads(1, f);
  REQUIRE_FALSE(ref.empty());
  for (int n : {2, 3}) {
    const Outputs got = with_threads(n, f);
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("threads " << n << ", output " << i << " " << ref[i].str());
      REQUIRE(ref[i].defined());
      REQUIRE(saobp::test::all_finite(ref[i]));
      CHECK(bitwise_equal(got[i], ref[i]));
    }
  }
}

// Forward through f, backward with a fixed seed; returns the output and every input's grad.
Outputs fwd_bwd(const std::function<Var(const std::vector<Var>&)>& f, const std::vector<Tensor>& inputs) {
  std::vector<Var> vs;
  for (const Tensor& t : inputs) vs.emplace_back(t, true);
  Var out = f(vs);
  out.backward(randn(out.shape(), 999, out.dtype()));
  Outputs r{out.data().contiguous().clone()};
  for (const Var& v : vs) r.push_back(v.grad());
  return r;
}

}  // namespace

TEST_CASE("thread-count determinism: large GEMMs forward and backward", "[determinism]") {
  // f64 too: its accumulators and results are both double, so a partition that moved with the
  // thread count would show in the last bits (f32 results often round such differences away).
  const DType dt = GENERATE(DType::f32, DType::f64);
  INFO(dtype_name(dt));
  SECTION("512 x 384 x 640") {
    const Tensor a = randn({512, 384}, 1, dt), b = randn({384, 640}, 2, dt);
    require_same_bits([&] { return fwd_bwd([](const auto& v) { return matmul(v[0], v[1]); }, {a, b}); });
  }
  SECTION("tall 2048 x 256 x 512 through linear (a scaled-down 4096 x 256 x 1024)") {
    const Tensor x = randn({2048, 256}, 3, dt), w = randn({512, 256}, 4, dt), bias = randn({512}, 5, dt);
    require_same_bits([&] {
      return fwd_bwd([](const auto& v) { return linear(v[0], v[1], v[2]); }, {x, w, bias});
    });
  }
  SECTION("conv1d (GPT-2's layers) has the bits of add(matmul(x, w), b), at depths past one block") {
    // One depth block (K <= 256) rounds the bias in the same place either way; 600 and 1024 do not
    // unless the bias is added after the whole product, as conv1d does.
    for (const int64_t IN : {96, 600, 1024}) {
      INFO("IN " << IN);
      const Tensor x = randn({3, 70, IN}, 10, dt), w = randn({IN, 130}, 11, dt), bias = randn({130}, 12, dt);
      const Outputs fused = fwd_bwd([](const auto& v) { return conv1d(v[0], v[1], v[2]); }, {x, w, bias});
      const Outputs composite =
          fwd_bwd([](const auto& v) { return add(matmul(v[0], v[1]), v[2]); }, {x, w, bias});
      REQUIRE(fused.size() == composite.size());
      for (size_t i = 0; i < fused.size(); ++i) CHECK(bitwise_equal(fused[i], composite[i]));
      require_same_bits([&] {
        return fwd_bwd([](const auto& v) { return conv1d(v[0], v[1], v[2]); }, {x, w, bias});
      });
    }
  }
  SECTION("batched, with a transposed operand") {
    const Tensor q = randn({4, 4, 128, 32}, 6, dt), k = randn({4, 4, 128, 32}, 7, dt);
    require_same_bits([&] {
      return fwd_bwd([](const auto& v) { return matmul(v[0], transpose(v[1], -1, -2)); }, {q, k});
    });
  }
  SECTION("odd sizes") {
    const Tensor a = randn({300, 200}, 8, dt), b = randn({200, 700}, 9, dt);
    require_same_bits([&] { return fwd_bwd([](const auto& v) { return matmul(v[0], v[1]); }, {a, b}); });
  }
}

TEST_CASE("thread-count determinism: layernorm, softmax, embedding, reductions", "[determinism]") {
  // f64 too: its accumulators and results are both double, so a partition that moved with the
  // thread count would show in the last bits (f32 results often round such differences away).
  const DType dt = GENERATE(DType::f32, DType::f64);
  INFO(dtype_name(dt));
  SECTION("layernorm forward and backward over many rows") {
    const Tensor x = randn({8192, 64}, 11, dt, 2.0), w = randn({64}, 12, dt), b = randn({64}, 13, dt);
    require_same_bits([&] {
      return fwd_bwd([](const auto& v) { return layernorm(v[0], v[1], v[2], 1e-5); }, {x, w, b});
    });
  }
  SECTION("softmax and log_softmax with a causal mask") {
    const Tensor x = randn({4, 4, 96, 96}, 14, dt, 3.0);
    const Tensor mask = saobp::test::causal_mask(96);
    require_same_bits([&] { return fwd_bwd([&](const auto& v) { return softmax(v[0], mask); }, {x}); });
    require_same_bits([&] { return fwd_bwd([&](const auto& v) { return log_softmax(v[0]); }, {x}); });
  }
  SECTION("embedding backward with repeated ids") {
    std::vector<int32_t> id(20000);
    for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<int32_t>((i * 7919) % 97);
    const Tensor ids = saobp::test::ids(id, {40, 500});
    const Tensor w = randn({100, 320}, 15, dt);
    require_same_bits([&] { return fwd_bwd([&](const auto& v) { return embedding(v[0], ids); }, {w}); });
  }
  SECTION("cross_entropy") {
    std::vector<int32_t> t(4096);
    for (size_t i = 0; i < t.size(); ++i) t[i] = i % 11 == 0 ? -100 : static_cast<int32_t>((i * 31) % 500);
    const Tensor targets = saobp::test::ids(t, {4096});
    const Tensor logits = randn({4096, 500}, 16, dt, 2.0);
    require_same_bits(
        [&] { return fwd_bwd([&](const auto& v) { return cross_entropy(v[0], targets); }, {logits}); });
  }
  SECTION("reduce_sum_to: full and bias-style, through sum and broadcast add") {
    const Tensor x = randn({1000, 700}, 17, dt);
    const Tensor bias = randn({700}, 18, dt);
    require_same_bits([&] { return fwd_bwd([](const auto& v) { return sum(v[0]); }, {x}); });
    require_same_bits([&] { return fwd_bwd([](const auto& v) { return add(v[0], v[1]); }, {x, bias}); });
    require_same_bits([&] { return fwd_bwd([](const auto& v) { return mean(v[0], 0, true); }, {x}); });
    require_same_bits([&] {
      Tensor full = Tensor::empty({1, 1}, dt), cols = Tensor::empty({1, 700}, dt),
             mid = Tensor::empty({10, 1, 700}, dt);
      kern::reduce_sum_to(x, full, 1.0, false);
      kern::reduce_sum_to(x, cols, 0.5, false);
      kern::reduce_sum_to(x.view({10, 100, 700}), mid, 1.0, false);
      return Outputs{full, cols, mid};
    });
  }
}

TEST_CASE("thread-count determinism: dropout and fill_random", "[determinism]") {
  const DType dt = GENERATE(DType::f32, DType::f64);
  INFO(dtype_name(dt));
  const Tensor x = randn({300, 1000}, 21, dt);
  require_same_bits([&] {
    return fwd_bwd([](const auto& v) { return dropout(v[0], 0.25, RngKey{42, 3, 1000}); }, {x});
  });
  require_same_bits([] {
    Outputs r;
    for (DType t : {DType::f32, DType::f64})
      for (RandomKind k : {RandomKind::uniform, RandomKind::normal}) {
        Tensor out = Tensor::empty({250000}, t);
        kern::fill_random(out, k, -1.0, 2.0, RngKey{42, 0, 17});
        r.push_back(out);
      }
    return r;
  });
}

TEST_CASE("thread-count determinism: a small transformer block forward and backward", "[determinism]") {
  // f64 too: its accumulators and results are both double, so a partition that moved with the
  // thread count would show in the last bits (f32 results often round such differences away).
  const DType dt = GENERATE(DType::f32, DType::f64);
  INFO(dtype_name(dt));
  // Embedding -> pre-LN attention (causal, dropout) -> pre-LN MLP (GELU, dropout) -> LN ->
  // tied output head -> cross-entropy. All parameters' gradients and the loss must match.
  const int64_t B = 4, T = 64, C = 128, NH = 4, V = 300;
  std::map<std::string, Tensor> init;
  uint64_t seed = 100;
  auto param = [&](const std::string& name, const Shape& s, double std, double mean = 0.0) {
    init[name] = randn(s, seed++, dt, std, mean);
  };
  param("wte", {V, C}, 0.02);
  param("ln1.w", {C}, 0.1, 1.0), param("ln1.b", {C}, 0.1);
  param("attn.w", {3 * C, C}, 0.02), param("attn.b", {3 * C}, 0.02);
  param("proj.w", {C, C}, 0.02), param("proj.b", {C}, 0.02);
  param("ln2.w", {C}, 0.1, 1.0), param("ln2.b", {C}, 0.1);
  param("fc.w", {4 * C, C}, 0.02), param("fc.b", {4 * C}, 0.02);
  param("fc2.w", {C, 4 * C}, 0.02), param("fc2.b", {C}, 0.02);
  param("lnf.w", {C}, 0.1, 1.0), param("lnf.b", {C}, 0.1);
  std::vector<int32_t> tok(static_cast<size_t>(B * T)), tgt(tok.size());
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = static_cast<int32_t>((i * 37 + 11) % V);
    tgt[i] = i % 13 == 0 ? -100 : static_cast<int32_t>((i * 53 + 5) % V);
  }
  const Tensor tokens = saobp::test::ids(tok, {B, T}), targets = saobp::test::ids(tgt, {B, T});
  const Tensor mask = saobp::test::causal_mask(T);

  require_same_bits([&] {
    std::map<std::string, Var> p;
    for (const auto& [name, t] : init) p[name] = Var(t, true, name);
    uint64_t stream = 0;
    auto drop = [&](const Var& v) { return dropout(v, 0.1, RngKey{42, stream++, 0}); };
    Var x = embedding(p["wte"], tokens);  // (B,T,C)
    {
      Var h = layernorm(x, p["ln1.w"], p["ln1.b"], 1e-5);
      const auto qkv = split(linear(h, p["attn.w"], p["attn.b"]), -1, C);
      Var q = split_heads(qkv[0], NH), k = contiguous(split_heads(qkv[1], NH)), v = split_heads(qkv[2], NH);
      Var att = softmax(scale(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(double(C / NH))), mask);
      Var y = merge_heads(matmul(drop(att), v));
      x = add(x, drop(linear(y, p["proj.w"], p["proj.b"])));
    }
    {
      Var h = layernorm(x, p["ln2.w"], p["ln2.b"], 1e-5);
      Var m = linear(gelu(linear(h, p["fc.w"], p["fc.b"]), true), p["fc2.w"], p["fc2.b"]);
      x = add(x, drop(m));
    }
    Var logits = linear(layernorm(x, p["lnf.w"], p["lnf.b"], 1e-5), p["wte"]);  // tied head
    Var loss = cross_entropy(logits, targets);
    loss.backward();
    Outputs r{loss.data().clone(), logits.data().clone()};
    for (const auto& [name, v] : p) {
      INFO(name);
      REQUIRE(v.grad().defined());
      r.push_back(v.grad());
    }
    return r;
  });
}
