// The materialized attention kernels with bf16 GEMM operands (AttentionConfig::gemm_inputs,
// docs/precision.md). On the CPU, whose bf16 products are f32 products of widened operands:
// - the maps (A, the BP beliefs, B) and λ's gradient are the bits of the f32 kernel run on q, k,
//   v and the output gradient rounded beforehand: nothing else enters them;
// - the output, ∂L/∂v, ∂L/∂q and ∂L/∂k are the products of the rounded B, dO and ds, checked
//   against float64 sums of exactly those terms, and they are not the products of the unrounded
//   ones (the same bound fails there for most entries): the rounding happens at the three places
//   kernels.inc names.
// [cuda]: the GPU's bf16 attention against the CPU's, and bitwise run to run (skipped without a GPU).
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <utility>

#include "attention/attention.h"
#include "support.h"
#include "tensor/bf16.h"
#include "tensor/device_info.h"
#include "tensor/kernels.h"

using namespace saobp;
using saobp::test::bitwise_equal;
using saobp::test::randn;
using saobp::test::values;

namespace {

constexpr int64_t B = 2, NH = 2, T = 37, HS = 16;
using Pairs = std::initializer_list<std::pair<Tensor, Tensor>>;

Tensor rounded(const Tensor& t) { return t.to(DType::bf16).to(DType::f32); }
double rounded(double x) { return bf16_value(bf16_bits(static_cast<float>(x))); }

// Sequence 1 has its last 11 positions as padding.
Tensor padding() {
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t t = T - 11; t < T; ++t) km[static_cast<size_t>(T + t)] = 0;
  return Tensor::from_vector(km, {B, T});
}

struct Inputs {
  Tensor q, k, v, km, lam, G;
};
Inputs inputs(AttnVariant variant, Device dev = Device::cpu()) {
  Inputs in{randn({B, NH, T, HS}, 61, DType::f32),
            randn({B, NH, T, HS}, 62, DType::f32),
            randn({B, NH, T, HS}, 63, DType::f32),
            padding(),
            uses_lambda(variant) ? Tensor::from_vector(std::vector<float>{0.3f, 0.9f}, {NH}) : Tensor(),
            randn({B, NH, T, HS}, 64, DType::f32)};
  for (Tensor* t : {&in.q, &in.k, &in.v, &in.km, &in.lam, &in.G})
    if (t->defined()) *t = t->to(dev);
  return in;
}

struct Result {
  Tensor out, gq, gk, gv, gl, probs, attn;
};
Result run(AttentionConfig cfg, GemmInputs gemm, const Inputs& in) {
  cfg.gemm_inputs = gemm;
  Var q(in.q.clone(), true), k(in.k.clone(), true), v(in.v.clone(), true);
  Var lam = in.lam.defined() ? Var(in.lam.clone(), true) : Var();
  AttentionMaps maps;
  const Var out = attention(q, k, v, in.km, lam, cfg, &maps);
  out.backward(in.G);
  return {out.data(), q.grad(), k.grad(), v.grad(), lam.defined() ? lam.grad() : Tensor(),
          maps.probs, maps.attn};
}

// The (b,h) tile of a (B,NH,T,X) tensor's values as a T x X row-major block.
struct Tiles {
  std::vector<double> v;
  int64_t X;
  double at(int64_t bh, int64_t r, int64_t c) const { return v[static_cast<size_t>((bh * T + r) * X + c)]; }
};
Tiles tiles(const Tensor& t) { return {values(t), t.size(3)}; }

// Per (b,h): E = scale · op(P) op(Q) (P: T x T, transposed when `pt`; Q: T x X) summed in
// float64 from P rounded to bf16 values (P already holds bf16 values when `round_p` is false);
// `got` meets it when |got - E| <= 4e-6 scale Σ|P||Q| (f32's sum of T terms, with room) + 1e-30.
// Returns the fraction of entries that miss.
double fraction_missing(const Tensor& got, const std::function<double(int64_t, int64_t, int64_t)>& P, bool pt,
                        const Tiles& Q, double scale) {
  const Tiles g = tiles(got);
  int64_t miss = 0, n = 0;
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t r = 0; r < T; ++r)
      for (int64_t c = 0; c < Q.X; ++c, ++n) {
        double e = 0, mag = 0;
        for (int64_t i = 0; i < T; ++i) {
          const double p = pt ? P(bh, i, r) : P(bh, r, i);
          e += p * Q.at(bh, i, c);
          mag += std::abs(p * Q.at(bh, i, c));
        }
        miss += !(std::abs(g.at(bh, r, c) - scale * e) <= 4e-6 * scale * mag + 1e-30);
      }
  return static_cast<double>(miss) / static_cast<double>(n);
}

// ||a - b|| / ||b|| over every entry (a may live on the GPU).
double rel_norm(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a.to(Device::cpu())), y = values(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

// f(cfg) for every variant, encoder and decoder.
template <class F>
void for_each_setting(F f) {
  for (AttnVariant variant :
       {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low, AttnVariant::bp_elemmul})
    for (bool causal : {false, true}) {
      INFO(variant_name(variant) << (causal ? " decoder" : " encoder"));
      AttentionConfig cfg;
      cfg.variant = variant, cfg.causal = causal;
      f(cfg);
    }
}

}  // namespace

TEST_CASE(
    "attention with bf16 GEMM operands: maps and λ as f32's on rounded inputs, products of rounded terms",
    "[attention][bf16]") {
  for_each_setting([](const AttentionConfig& cfg) {
    const AttnVariant variant = cfg.variant;
    const Inputs in = inputs(variant);
    Inputs rin = in;
    for (Tensor* t : {&rin.q, &rin.k, &rin.v, &rin.G}) *t = rounded(*t);
    const Result h = run(cfg, GemmInputs::bf16, in), r = run(cfg, GemmInputs::f32, rin);
    CHECK(h.out.dtype() == DType::f32);
    CHECK(bitwise_equal(h.probs, r.probs));
    CHECK(bitwise_equal(h.attn, r.attn));
    if (uses_lambda(variant)) CHECK(bitwise_equal(h.gl, r.gl));

    const Tiles Bm = tiles(r.probs), V = tiles(rin.v), G = tiles(rin.G);
    const auto Bh = [&](int64_t bh, int64_t i, int64_t j) { return rounded(Bm.at(bh, i, j)); };
    // O = round(B) V, and the f32 kernel's B V (unrounded B) is not it.
    CHECK(fraction_missing(h.out, Bh, false, V, 1.0) == 0);
    CHECK(fraction_missing(r.out, Bh, false, V, 1.0) > 0.5);
    // dV = round(B)ᵀ round(dO).
    CHECK(fraction_missing(h.gv, Bh, true, G, 1.0) == 0);
    CHECK(fraction_missing(r.gv, Bh, true, G, 1.0) > 0.5);
    if (variant == AttnVariant::original) {
      // ds = B ⊙ (dB - rowsum(B ⊙ dB)), dB = round(dO) Vᵀ, in float64; dQ = scale round(ds) K,
      // dK = scale round(ds)ᵀ Q. The kernel rounds its f32 ds, which may land on the other side
      // of a rounding boundary than the float64 one: a few entries may miss, the unrounded
      // products nearly all.
      std::vector<double> ds(static_cast<size_t>(B * NH * T * T));
      for (int64_t bh = 0; bh < B * NH; ++bh)
        for (int64_t j = 0; j < T; ++j) {
          std::vector<double> dB(static_cast<size_t>(T));
          double dot = 0;
          for (int64_t l = 0; l < T; ++l) {
            for (int64_t d = 0; d < HS; ++d) dB[static_cast<size_t>(l)] += G.at(bh, j, d) * V.at(bh, l, d);
            dot += Bm.at(bh, j, l) * dB[static_cast<size_t>(l)];
          }
          for (int64_t l = 0; l < T; ++l)
            ds[static_cast<size_t>((bh * T + j) * T + l)] =
                Bm.at(bh, j, l) * (dB[static_cast<size_t>(l)] - dot);
        }
      const auto dsh = [&](int64_t bh, int64_t i, int64_t j) {
        return rounded(ds[static_cast<size_t>((bh * T + i) * T + j)]);
      };
      const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
      const Tiles K = tiles(rin.k), Q = tiles(rin.q);
      CHECK(fraction_missing(h.gq, dsh, false, K, scale) < 0.02);
      CHECK(fraction_missing(r.gq, dsh, false, K, scale) > 0.5);
      CHECK(fraction_missing(h.gk, dsh, true, Q, scale) < 0.02);
      CHECK(fraction_missing(r.gk, dsh, true, Q, scale) > 0.5);
    }
    // Every variant: dq and dk within bf16's rounding of ds of the f32 kernel's.
    for (const auto& [a, b] : Pairs{{h.gq, r.gq}, {h.gk, r.gk}}) {
      CHECK(rel_norm(a, b) < 1.0 / 128);
      CHECK(rel_norm(a, b) > 0);
    }
    // The same bits on 1 and 2 threads.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Result one = run(cfg, GemmInputs::bf16, in);
    omp_set_num_threads(2);
    const Result two = run(cfg, GemmInputs::bf16, in);
    omp_set_num_threads(threads);
    for (const auto& [a, b] : Pairs{{one.out, two.out}, {one.gq, two.gq}, {one.gk, two.gk}, {one.gv, two.gv}})
      CHECK(bitwise_equal(a, b));
  });
}

TEST_CASE("attention with bf16 GEMM operands: what it refuses, by name", "[attention][bf16]") {
  AttentionConfig cfg;
  cfg.gemm_inputs = GemmInputs::bf16;
  const Var q(randn({1, 1, 4, 2}, 65)), k(randn({1, 1, 4, 2}, 66)), v(randn({1, 1, 4, 2}, 67));
  CHECK_ERROR(attention(q, k, v, Tensor(), Var(), cfg),
              Catch::Contains("[attention]") && Catch::Contains("f64"));
  // The kernels: maps in f32 only under bf16 q, k, v; the tiled kernels take no bf16.
  const Tensor qb = q.data().to(DType::f32).to(DType::bf16);
  Tensor out = Tensor::empty({1, 1, 4, 2}, DType::f64), probs = Tensor::empty({1, 1, 4, 4}, DType::f64), none;
  const AttnParams p{};
  CHECK_ERROR(kern::attention_forward(qb, qb, qb, Tensor(), Tensor(), p, out, probs, none, none),
              Catch::Contains("[attention]") && Catch::Contains("probs must be f32"));
  Tensor lse = Tensor::empty({1, 1, 1, 4}, DType::f32), out32 = Tensor::empty({1, 1, 4, 2}, DType::f32);
  CHECK_ERROR(kern::attention_tiled_forward(qb, qb, qb, Tensor(), Tensor(), p, out32, lse, none),
              Catch::Contains("[attention_tiled]") && Catch::Contains("bf16"));
}

TEST_CASE("cuda attention with bf16 GEMM operands: the CPU's results, the same bits run to run",
          "[cuda][bf16]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // The GPU sums each product in another order (the tensor cores'), so B and ds may round to
  // the other bf16 neighbour here and there: the results agree to a relative 1e-3 in the norm,
  // the maps (before any rounding) to f32's.
  for_each_setting([&](const AttentionConfig& cfg) {
    const AttnVariant variant = cfg.variant;
    const Result c = run(cfg, GemmInputs::bf16, inputs(variant));
    const Result g1 = run(cfg, GemmInputs::bf16, inputs(variant, Device::cuda()));
    const Result g2 = run(cfg, GemmInputs::bf16, inputs(variant, Device::cuda()));
    CHECK(rel_norm(g1.probs, c.probs) < 1e-5);
    CHECK(rel_norm(g1.out, c.out) < 1e-3);
    CHECK(rel_norm(g1.gq, c.gq) < 1e-3);
    CHECK(rel_norm(g1.gk, c.gk) < 1e-3);
    CHECK(rel_norm(g1.gv, c.gv) < 1e-3);
    if (uses_lambda(variant)) CHECK(rel_norm(g1.gl, c.gl) < 1e-3);
    for (const auto& [a, b] : Pairs{{g1.out, g2.out}, {g1.gq, g2.gq}, {g1.gk, g2.gk}, {g1.gv, g2.gv}})
      CHECK(bitwise_equal(a.to(Device::cpu()), b.to(Device::cpu())));
  });
}

// With bf16 operands the fused schedule (SAOBP_FUSED_ATTENTION=1, src/attention/cuda/attention.cu)
// writes the bf16 copies
// of B and ds in the kernels that write B and ds, with the cast kernel's rounding; the unfused one
// (the default) casts them in passes of their own. The same maps and outputs, and
// gradients equal up to how the compiler contracts the fused kernels' sums (λ's: summed by rows).
TEST_CASE("cuda bf16 attention: the fused schedule gives the unfused one's results", "[cuda][bf16]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for_each_setting([&](const AttentionConfig& cfg) {
    const AttnVariant variant = cfg.variant;
    const Result unfused = run(cfg, GemmInputs::bf16, inputs(variant, Device::cuda()));
    const Result fused = test::with_env("SAOBP_FUSED_ATTENTION", "1", [&] {
      return run(cfg, GemmInputs::bf16, inputs(variant, Device::cuda()));
    });
    CHECK(bitwise_equal(fused.probs.to(Device::cpu()), unfused.probs.to(Device::cpu())));
    CHECK(bitwise_equal(fused.out.to(Device::cpu()), unfused.out.to(Device::cpu())));
    CHECK(rel_norm(fused.gq, unfused.gq.to(Device::cpu())) < 1e-5);
    CHECK(rel_norm(fused.gk, unfused.gk.to(Device::cpu())) < 1e-5);
    CHECK(bitwise_equal(fused.gv.to(Device::cpu()), unfused.gv.to(Device::cpu())));
    if (uses_lambda(variant)) CHECK(rel_norm(fused.gl, unfused.gl.to(Device::cpu())) < 1e-5);
  });
}
