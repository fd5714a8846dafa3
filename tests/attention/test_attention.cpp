// SAOBP attention: gradients, the composite reference, eq. 11 multiplied out over the senders, and the
// masking semantics of the attention issue (no future leak, padding invariance, λ = 0).
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "attention/attention.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

using namespace saobp;

namespace {

const AttnVariant kVariants[] = {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low,
                                 AttnVariant::bp_elemmul};

Tensor randn(const Shape& s, uint64_t stream, DType dt = DType::f64, double sd = 1.0) {
  Tensor t = Tensor::empty(s, DType::f64);
  kern::fill_random(t, RandomKind::normal, 0.0, sd, RngKey{42, stream, 0});
  return t.to(dt);
}

Tensor key_mask_with_padding(int64_t B, int64_t T, int64_t pad_last) {
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t t = T - pad_last; t < T; ++t) km[static_cast<size_t>((B - 1) * T + t)] = 0;
  return Tensor::from_vector(km, {B, T});
}

Var lambdas(AttnVariant v, int64_t NH, DType dt, double base = 0.3) {
  if (!uses_lambda(v)) return Var();
  std::vector<double> l(static_cast<size_t>(NH));
  for (int64_t h = 0; h < NH; ++h) l[static_cast<size_t>(h)] = base * (1 + h);
  return Var(Tensor::from_vector(l, {NH}).to(dt));
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::f64).to_vector<double>(),
                            y = b.to(DType::f64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::string label(AttnVariant v, bool causal) {
  return fmt::format("{} {}", variant_name(v), causal ? "decoder" : "encoder");
}

}  // namespace

TEST_CASE("attention: f64 gradcheck of every variant, encoder and decoder, with padding",
          "[attention][gradcheck]") {
  const int64_t B = 2, NH = 2, T = 5, HS = 3;
  const Tensor km = key_mask_with_padding(B, T, 2);
  for (AttnVariant v : kVariants)
    for (bool causal : {false, true})
      for (int steps : {1, 3}) {
        if (steps > 1 && !uses_lambda(v)) continue;
        AttentionConfig cfg{v, causal, steps};
        std::vector<Tensor> in = {randn({B, NH, T, HS}, 1), randn({B, NH, T, HS}, 2),
                                  randn({B, NH, T, HS}, 3)};
        if (uses_lambda(v)) in.push_back(Tensor::from_vector(std::vector<double>{0.2, 0.7}, {NH}));
        auto f = [&](const std::vector<Var>& x) {
          return attention(x[0], x[1], x[2], km, uses_lambda(v) ? x[3] : Var(), cfg);
        };
        const GradcheckResult r = gradcheck(f, in);
        INFO(label(v, causal) << " steps " << steps << ": " << r.worst);
        CHECK(r.max_error < 1e-6);
      }
}

TEST_CASE("attention: learnable λ = softplus(rho) and per-layer λ gradcheck", "[attention][gradcheck]") {
  const int64_t B = 2, NH = 2, T = 4, HS = 2;
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low})
    for (bool causal : {false, true}) {
      AttentionConfig cfg{v, causal, 2};
      const std::vector<Tensor> in = {
          randn({B, NH, T, HS}, 4), randn({B, NH, T, HS}, 5), randn({B, NH, T, HS}, 6),
          Tensor::from_vector(std::vector<double>{lambda_to_rho(0.2), lambda_to_rho(0.5)}, {NH})};
      // Two stacked attention "layers" with their own λ: a per-layer λ list.
      auto f = [&](const std::vector<Var>& x) {
        Var l1 = lambda_learnable(x[3]);
        Var h = attention(x[0], x[1], x[2], Tensor(), l1, cfg);
        Var l2 = lambda_constant(0.05, NH, DType::f64);
        return attention(h, x[1], h, Tensor(), l2, cfg);
      };
      const GradcheckResult r = gradcheck(f, in);
      INFO(label(v, causal) << ": " << r.worst);
      CHECK(r.max_error < 1e-6);
      CHECK(r.analytic[3][0] != 0.0);  // rho really receives a gradient
    }
}

TEST_CASE("attention: fused kernel equals the composite reference, forward and gradients", "[attention]") {
  const int64_t B = 2, NH = 3, T = 7, HS = 4;
  const Tensor km = key_mask_with_padding(B, T, 3);
  for (DType dt : {DType::f64, DType::f32})
    for (AttnVariant v : kVariants)
      for (bool causal : {false, true}) {
        AttentionConfig cfg{v, causal, uses_lambda(v) ? 2 : 1};
        const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
        auto run = [&](bool fused) {
          Var q(randn({B, NH, T, HS}, 7, dt), true), k(randn({B, NH, T, HS}, 8, dt), true),
              vv(randn({B, NH, T, HS}, 9, dt), true);
          Var lam = lambdas(v, NH, dt);
          if (lam.defined()) lam.set_requires_grad(true);
          Var out = fused ? attention(q, k, vv, km, lam, cfg) : attention_reference(q, k, vv, km, lam, cfg);
          out.backward(randn(out.shape(), 10, dt));
          std::vector<Tensor> r = {out.data(), q.grad(), k.grad(), vv.grad()};
          if (lam.defined()) r.push_back(lam.grad());
          return r;
        };
        const auto a = run(true), b = run(false);
        for (size_t i = 0; i < a.size(); ++i) {
          INFO(label(v, causal) << " " << dtype_name(dt) << " tensor " << i);
          CHECK(max_abs_diff(a[i], b[i]) < tol * (i == 4 ? 10 : 1));
        }
      }
}

TEST_CASE("attention: eq. 11 multiplied out over the senders equals the log-space result (f64)",
          "[attention]") {
  const int64_t B = 2, NH = 2, T = 6, HS = 3;
  const Tensor km = key_mask_with_padding(B, T, 2);
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low})
    for (bool causal : {false, true}) {
      AttentionConfig cfg{v, causal, 1};
      const Tensor q = randn({B, NH, T, HS}, 11), k = randn({B, NH, T, HS}, 12),
                   vv = randn({B, NH, T, HS}, 13);
      const std::vector<double> lam = {0.4, 1.1};
      AttentionMaps maps;
      attention(Var(q), Var(k), Var(vv), km, Var(Tensor::from_vector(lam, {NH})), cfg, &maps);
      const Tensor literal = literal_bp_probs(q, k, km, lam, cfg);
      INFO(label(v, causal));
      CHECK(max_abs_diff(maps.probs, literal) < 1e-13);
    }
}

TEST_CASE("attention: no future leak in the decoder", "[attention]") {
  // Changing the token at position t changes nothing at positions < t, bitwise, for a whole
  // block: x -> QKV projection -> split heads -> attention -> merge heads.
  const int64_t B = 1, NH = 2, T = 9, C = 8;
  for (DType dt : {DType::f32, DType::f64})
    for (AttnVariant v : kVariants)
      for (int steps : {1, 2}) {
        if (steps > 1 && !uses_lambda(v)) continue;
        AttentionConfig cfg{v, true, steps};
        const Tensor w = randn({3 * C, C}, 14, dt, 0.5);
        auto block = [&](const Tensor& x) {
          std::vector<Var> qkv = split(linear(Var(x), Var(w)), 2, C);
          return merge_heads(attention(split_heads(qkv[0], NH), split_heads(qkv[1], NH),
                                       split_heads(qkv[2], NH), Tensor(), lambdas(v, NH, dt, 0.5), cfg))
              .data();
        };
        const Tensor x = randn({B, T, C}, 15, dt);
        const Tensor base = block(x);
        for (int64_t t : {int64_t{1}, int64_t{4}, T - 1}) {
          Tensor x2 = x.clone();
          Tensor row = x2.slice(1, t, t + 1);
          row.copy_from(randn({B, 1, C}, 16 + static_cast<uint64_t>(t), dt));
          const Tensor changed = block(x2);
          INFO(variant_name(v) << " steps " << steps << " " << dtype_name(dt) << " change at " << t);
          CHECK(bitwise_equal(base.slice(1, 0, t), changed.slice(1, 0, t)));
          CHECK_FALSE(bitwise_equal(base.slice(1, t, T), changed.slice(1, t, T)));
        }
      }
}

TEST_CASE("attention: a sequence gives the same outputs alone and inside a padded batch", "[attention]") {
  const int64_t NH = 2, L = 5, T = 9, HS = 4;
  for (DType dt : {DType::f64, DType::f32})
    for (AttnVariant v : kVariants)
      for (bool causal : {false, true}) {
        AttentionConfig cfg{v, causal, uses_lambda(v) ? 2 : 1};
        // Alone: (1, NH, L, HS). Batched: row 1 of (2, NH, T, HS), real tokens in [0, L), the rest
        // padding filled with large garbage that must not matter.
        const Tensor q = randn({1, NH, L, HS}, 20, dt), k = randn({1, NH, L, HS}, 21, dt),
                     vv = randn({1, NH, L, HS}, 22, dt);
        auto pack = [&](const Tensor& x, uint64_t stream) {
          Tensor big = randn({2, NH, T, HS}, stream, dt, 50.0);
          Tensor dst = big.slice(0, 1, 2).slice(2, 0, L);
          dst.copy_from(x);
          return big;
        };
        std::vector<uint8_t> km(2 * T, 1);
        for (int64_t t = L; t < T; ++t) km[static_cast<size_t>(T + t)] = 0;
        const Tensor mask = Tensor::from_vector(km, {2, T});
        Var lam = lambdas(v, NH, dt);
        const Tensor alone = attention(Var(q), Var(k), Var(vv), Tensor(), lam, cfg).data();
        const Tensor batched =
            attention(Var(pack(q, 23)), Var(pack(k, 24)), Var(pack(vv, 25)), mask, lam, cfg).data();
        INFO(label(v, causal) << " " << dtype_name(dt));
        CHECK(max_abs_diff(alone, batched.slice(0, 1, 2).slice(2, 0, L)) < (dt == DType::f64 ? 1e-13 : 1e-6));
      }
}

TEST_CASE("attention: λ = 0 gives exactly the original attention", "[attention]") {
  const int64_t B = 2, NH = 2, T = 8, HS = 4;
  const Tensor km = key_mask_with_padding(B, T, 3);
  for (DType dt : {DType::f32, DType::f64})
    for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low})
      for (bool causal : {false, true})
        for (int steps : {1, 3}) {
          const Tensor q = randn({B, NH, T, HS}, 30, dt), k = randn({B, NH, T, HS}, 31, dt),
                       vv = randn({B, NH, T, HS}, 32, dt), g = randn({B, NH, T, HS}, 33, dt);
          auto run = [&](AttnVariant var) {
            Var qv(q, true), kv(k, true), vv2(vv, true);
            Var out =
                attention(qv, kv, vv2, km, lambda_constant(0.0, NH, dt), AttentionConfig{var, causal, steps});
            out.backward(g);
            return std::vector<Tensor>{out.data(), qv.grad(), kv.grad(), vv2.grad()};
          };
          const auto a = run(v), b = run(AttnVariant::original);
          INFO(label(v, causal) << " steps " << steps << " " << dtype_name(dt));
          for (size_t i = 0; i < a.size(); ++i) CHECK(bitwise_equal(a[i], b[i]));
        }
}

TEST_CASE("attention: peaked rows, T = 1024 and λ = 1 stay finite", "[attention]") {
  const int64_t B = 1, NH = 1, HS = 8;
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low, AttnVariant::bp_elemmul})
    for (bool causal : {false, true}) {
      const int64_t T = v == AttnVariant::bp_elemmul ? 256 : 1024;  // ElemMul is O(T^3): λ-free anyway
      // q, k with standard deviation 30 and HS = 8: scores with a standard deviation of ~900, so
      // every row of A is one-hot to float precision.
      Var q(randn({B, NH, T, HS}, 40, DType::f32, 30.0), true),
          k(randn({B, NH, T, HS}, 41, DType::f32, 30.0), true);
      Var vv(randn({B, NH, T, HS}, 42, DType::f32), true);
      Var out = attention(q, k, vv, Tensor(), lambdas(v, NH, DType::f32, 1.0), AttentionConfig{v, causal, 1});
      out.backward(randn(out.shape(), 43, DType::f32));
      INFO(label(v, causal));
      for (const Tensor& t : {out.data(), q.grad(), k.grad(), vv.grad()})
        for (float x : t.to_vector<float>()) REQUIRE(std::isfinite(x));
    }
}

TEST_CASE("attention: the first decoder row has no senders, so B = A there", "[attention]") {
  const int64_t B = 2, NH = 2, T = 6, HS = 3;
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low}) {
    AttentionMaps maps;
    attention(Var(randn({B, NH, T, HS}, 50, DType::f32)), Var(randn({B, NH, T, HS}, 51, DType::f32)),
              Var(randn({B, NH, T, HS}, 52, DType::f32)), Tensor(), lambdas(v, NH, DType::f32, 2.0),
              AttentionConfig{v, true, 1}, &maps);
    CHECK(bitwise_equal(maps.probs.slice(2, 0, 1), maps.attn.slice(2, 0, 1)));
    CHECK_FALSE(bitwise_equal(maps.probs.slice(2, 1, T), maps.attn.slice(2, 1, T)));
  }
}

TEST_CASE("attention: rows of B are distributions over the allowed keys", "[attention]") {
  const int64_t B = 2, NH = 2, T = 7, HS = 3;
  const Tensor km = key_mask_with_padding(B, T, 2);
  const std::vector<uint8_t> kmv = km.to_vector<uint8_t>();
  for (AttnVariant v : kVariants)
    for (bool causal : {false, true}) {
      AttentionMaps maps;
      attention(Var(randn({B, NH, T, HS}, 60)), Var(randn({B, NH, T, HS}, 61)),
                Var(randn({B, NH, T, HS}, 62)), km, lambdas(v, NH, DType::f64), AttentionConfig{v, causal, 1},
                &maps);
      const std::vector<double> p = maps.probs.to_vector<double>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < NH; ++h)
          for (int64_t j = 0; j < T; ++j) {
            double s = 0;
            for (int64_t k = 0; k < T; ++k) {
              const double x = p[static_cast<size_t>(((b * NH + h) * T + j) * T + k)];
              const bool allowed = kmv[static_cast<size_t>(b * T + k)] && (!causal || k <= j);
              if (!allowed) REQUIRE(x == 0.0);
              REQUIRE(x >= 0.0);
              s += x;
            }
            REQUIRE(std::abs(s - 1.0) < 1e-12);
          }
    }
}

TEST_CASE("attention: bitwise identical with 1 and 2 threads", "[attention][determinism]") {
  const int64_t B = 3, NH = 4, T = 33, HS = 8;
  const Tensor km = key_mask_with_padding(B, T, 5);
  const int saved_threads = omp_get_max_threads();
  for (AttnVariant v : kVariants)
    for (bool causal : {false, true}) {
      auto run = [&](int threads) {
        omp_set_num_threads(threads);
        Var q(randn({B, NH, T, HS}, 70, DType::f32), true), k(randn({B, NH, T, HS}, 71, DType::f32), true),
            vv(randn({B, NH, T, HS}, 72, DType::f32), true);
        Var lam = lambdas(v, NH, DType::f32);
        if (lam.defined()) lam.set_requires_grad(true);
        Var out = attention(q, k, vv, km, lam, AttentionConfig{v, causal, 2});
        out.backward(randn(out.shape(), 73, DType::f32));
        std::vector<Tensor> r = {out.data(), q.grad(), k.grad(), vv.grad()};
        if (lam.defined()) r.push_back(lam.grad());
        return r;
      };
      const auto a = run(1), b = run(2);
      omp_set_num_threads(saved_threads);
      INFO(label(v, causal));
      for (size_t i = 0; i < a.size(); ++i) CHECK(bitwise_equal(a[i], b[i]));
    }
}

TEST_CASE("attention: bad input is an error naming the problem", "[attention]") {
  const Tensor q = randn({1, 2, 4, 3}, 80, DType::f32);
  CHECK_THROWS_WITH(parse_variant("bp_medium"), Catch::Contains("bp_medium") && Catch::Contains("bp_high"));
  CHECK_THROWS_WITH(
      attention(Var(q), Var(q), Var(q), Tensor(), Var(), AttentionConfig{AttnVariant::bp_high, false, 1}),
      Catch::Contains("needs λ"));
  CHECK_THROWS_WITH(
      attention(Var(q), Var(q), Var(q), Tensor::zeros({1, 5}, DType::u8), Var(), AttentionConfig{}),
      Catch::Contains("key_mask"));
  CHECK_THROWS_WITH(lambda_constant(-0.1, 2), Catch::Contains("λ must be >= 0"));
}

TEST_CASE("attention: a model's spec resolves λ per layer and rejects bad settings", "[attention]") {
  AttentionSpec spec;
  spec.variant = AttnVariant::bp_high;
  spec.lambda = 0.2;
  CHECK(spec.lambda_for_layer(3) == 0.2);
  spec.layer_lambdas = {0.3, 0.1, 0.0, 0.05};
  CHECK_NOTHROW(spec.validate(4));
  CHECK(spec.lambda_for_layer(2) == 0.0);
  CHECK_THROWS_WITH(spec.validate(8), Catch::Contains("layer_lambdas") && Catch::Contains("8 layers"));
  spec.learnable_lambda = true;
  CHECK_THROWS_WITH(spec.validate(4), Catch::Contains("learnable") && Catch::Contains("layer 2"));
  spec.layer_lambdas.clear();
  spec.bp_steps = 0;
  CHECK_THROWS_WITH(spec.validate(4), Catch::Contains("bp_steps"));
}

TEST_CASE("attention: the leaking decoder ablation (leak) hears later rows, fused = reference = gradcheck",
          "[attention][gradcheck]") {
  // Messages from every other row while the keys stay causal: the fused kernel against the composite
  // reference (values and gradients), an f64 gradcheck, and the leak itself.
  const int64_t B = 2, NH = 2, T = 6, HS = 3;
  const Tensor km = key_mask_with_padding(B, T, 2);
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low})
    for (int steps : {1, 2}) {
      AttentionConfig cfg{v, true, steps};
      cfg.leak = true;
      INFO(variant_name(v) << " steps " << steps);
      for (DType dt : {DType::f64, DType::f32}) {
        auto run = [&](bool fused) {
          Var q(randn({B, NH, T, HS}, 31, dt), true), k(randn({B, NH, T, HS}, 32, dt), true),
              vv(randn({B, NH, T, HS}, 33, dt), true);
          Var lam = lambdas(v, NH, dt, 0.8);
          lam.set_requires_grad(true);
          Var out = fused ? attention(q, k, vv, km, lam, cfg) : attention_reference(q, k, vv, km, lam, cfg);
          out.backward(randn(out.shape(), 34, dt));
          return std::vector<Tensor>{out.data(), q.grad(), k.grad(), vv.grad(), lam.grad()};
        };
        const auto a = run(true), b = run(false);
        for (size_t i = 0; i < a.size(); ++i)
          CHECK(max_abs_diff(a[i], b[i]) < (dt == DType::f64 ? 1e-12 : 2e-5) * (i == 4 ? 10 : 1));
      }
      const std::vector<Tensor> in = {randn({B, NH, T, HS}, 35), randn({B, NH, T, HS}, 36),
                                      randn({B, NH, T, HS}, 37),
                                      Tensor::from_vector(std::vector<double>{0.3, 0.9}, {NH})};
      const GradcheckResult r = gradcheck(
          [&](const std::vector<Var>& x) { return attention(x[0], x[1], x[2], km, x[3], cfg); }, in);
      INFO(r.worst);
      CHECK(r.max_error < 1e-6);
      // The leak: a change of q and k at the last position moves the outputs before it (in the
      // causal default it does not: "no future leak in the decoder").
      const Tensor q = randn({1, NH, T, HS}, 38), k = randn({1, NH, T, HS}, 39),
                   vv = randn({1, NH, T, HS}, 40);
      Tensor q2 = q.clone(), k2 = k.clone();
      q2.slice(2, T - 1, T).copy_from(randn({1, NH, 1, HS}, 41, DType::f64, 3.0));
      k2.slice(2, T - 1, T).copy_from(randn({1, NH, 1, HS}, 42, DType::f64, 3.0));
      const Var lam = lambdas(v, NH, DType::f64, 0.8);
      for (bool leak : {false, true}) {
        AttentionConfig c = cfg;
        c.leak = leak;
        const Tensor o1 = attention(Var(q), Var(k), Var(vv), Tensor(), lam, c).data().slice(2, 0, T - 1);
        const Tensor o2 = attention(Var(q2), Var(k2), Var(vv), Tensor(), lam, c).data().slice(2, 0, T - 1);
        INFO("leak " << leak);
        CHECK(bitwise_equal(o1.contiguous(), o2.contiguous()) == !leak);
        if (leak) CHECK(max_abs_diff(o1.contiguous(), o2.contiguous()) > 1e-4);
      }
    }
  // A model spec refuses the leak where it means nothing.
  AttentionSpec s;
  s.variant = AttnVariant::original;
  s.leaky_bp = true;
  CHECK_THROWS_WITH(s.validate(2), Catch::Contains("leaky_bp"));
}
