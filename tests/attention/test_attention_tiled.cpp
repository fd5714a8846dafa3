// The tiled SAOBP kernels (O(T) memory; src/attention/cpu/tiled.cpp) against the materialized
// ones: the same outputs and gradients (q, k, v and λ) for original, bp_high and bp_low, encoder,
// decoder and the leaking decoder, 1 and 2 BP steps, T = 1, T not a multiple of the 64-row tiles,
// padding and rows with no allowed key; an f64 gradcheck; no future leak in the decoder, exactly;
// the same bits for 1 and 2 threads, and by heads and by blocks; NaN scores propagate as in the materialized
// kernel. [cuda]: the CUDA twin (src/attention/cuda/tiled.cu) against the CPU twin, skipped without a GPU.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "attention/attention.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "cuda_emu/bridge.h"
#include "support.h"
#include "tensor/device_info.h"
#include "tensor/kernels.h"

using namespace saobp;

namespace {

Tensor randn(const Shape& s, uint64_t stream, DType dt, double sd = 1.0) {
  Tensor t = Tensor::empty(s, DType::f64);
  kern::fill_random(t, RandomKind::normal, 0.0, sd, RngKey{43, stream, 0});
  return t.to(dt);
}

// Sequence b has its last pad[b] positions as padding (pad[b] = T: no token at all).
Tensor padding(int64_t B, int64_t T, const std::vector<int64_t>& pad) {
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = T - std::min(T, pad[static_cast<size_t>(b)]); t < T; ++t)
      km[static_cast<size_t>(b * T + t)] = 0;
  return Tensor::from_vector(km, {B, T});
}

Var lambdas(AttnVariant v, int64_t NH, DType dt) {
  if (!uses_lambda(v)) return Var();
  std::vector<double> l(static_cast<size_t>(NH));
  for (int64_t h = 0; h < NH; ++h) l[static_cast<size_t>(h)] = 0.35 * (1 + h);
  return Var(Tensor::from_vector(l, {NH}).to(dt), true);
}

// Largest |a - b| over the largest |b| (1 when b is all zeros).
double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::f64).to_vector<double>(),
                            y = b.to(DType::f64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(std::isfinite(x[i]) == std::isfinite(y[i]));
    m = std::max(m, std::abs(x[i] - y[i]));
    s = std::max(s, std::abs(y[i]));
  }
  return m / std::max(s, 1.0);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() &&
         std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

// The output and the gradients of q, k, v (and λ) of one call, for an upstream gradient drawn
// from `seed`.
std::vector<Tensor> run(AttentionConfig cfg, bool tiled, const Tensor& q0, const Tensor& k0, const Tensor& v0,
                        const Tensor& km, AttnVariant v, uint64_t seed) {
  cfg.tiled = tiled;
  const DType dt = q0.dtype();
  Var q(q0.clone(), true), k(k0.clone(), true), vv(v0.clone(), true);
  Var lam = lambdas(v, q0.size(1), dt);
  Var out = attention(q, k, vv, km, lam, cfg);
  out.backward(randn(out.shape(), seed, dt));
  std::vector<Tensor> r = {out.data(), q.grad(), k.grad(), vv.grad()};
  if (lam.defined()) r.push_back(lam.grad());
  return r;
}

const char* kNames[] = {"out", "dq", "dk", "dv", "dλ"};

// The shapes both device checks run: T = 1; under one tile; 1 row past a tile; several tiles with
// a ragged end; a sequence with no token (every row has no allowed key) beside padded ones.
struct TiledShape {
  int64_t B, T;
  std::vector<int64_t> pad;
};
const std::vector<TiledShape> kShapes = {
    {2, 1, {0, 0}}, {2, 37, {0, 11}}, {1, 65, {0}}, {3, 150, {0, 70, 150}}};

// Every setting both device checks run: f64 and f32, the shapes, original/bp_high/bp_low, mode 0
// (encoder), 1 (decoder) or 2 (leaking decoder), 1 and 2 BP steps (2 steps and the leak for the BP
// variants only).
template <class F>
void for_each_case(F f) {
  for (DType dt : {DType::f64, DType::f32})
    for (const TiledShape& sh : kShapes)
      for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low})
        for (int mode = 0; mode < 3; ++mode)
          for (int steps : {1, 2})
            if ((steps == 1 && mode < 2) || uses_lambda(v)) f(dt, sh, v, mode, steps);
}

}  // namespace

TEST_CASE("attention tiled: the materialized kernel's outputs and gradients", "[attention][tiled]") {
  const int64_t NH = 2, HS = 8;
  for_each_case([&](DType dt, const TiledShape& sh, AttnVariant v, int mode, int steps) {
    AttentionConfig cfg{v, mode > 0, steps};
    cfg.leak = mode == 2;
    const Tensor q = randn({sh.B, NH, sh.T, HS}, 1, dt), k = randn({sh.B, NH, sh.T, HS}, 2, dt),
                 vv = randn({sh.B, NH, sh.T, HS}, 3, dt), km = padding(sh.B, sh.T, sh.pad);
    const auto a = run(cfg, true, q, k, vv, km, v, 4), b = run(cfg, false, q, k, vv, km, v, 4);
    const double tol = dt == DType::f64 ? 1e-11 : 5e-5;
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(variant_name(v) << " mode " << mode << " steps " << steps << " T " << sh.T << " " << dtype_name(dt)
                           << " " << kNames[i]);
      CHECK(rel_diff(a[i], b[i]) < tol);
    }
  });
}

TEST_CASE("attention tiled: f64 gradcheck, encoder and decoder, 2 BP steps",
          "[attention][tiled][gradcheck]") {
  const int64_t B = 2, NH = 2, T = 67, HS = 3;
  const Tensor km = padding(B, T, {0, 20});
  for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low})
    for (bool causal : {false, true}) {
      AttentionConfig cfg{v, causal, uses_lambda(v) ? 2 : 1};
      cfg.tiled = true;
      std::vector<Tensor> in = {randn({B, NH, T, HS}, 5, DType::f64), randn({B, NH, T, HS}, 6, DType::f64),
                                randn({B, NH, T, HS}, 7, DType::f64)};
      if (uses_lambda(v)) in.push_back(Tensor::from_vector(std::vector<double>{0.25, 0.8}, {NH}));
      auto f = [&](const std::vector<Var>& x) {
        return attention(x[0], x[1], x[2], km, uses_lambda(v) ? x[3] : Var(), cfg);
      };
      const GradcheckResult r = gradcheck(f, in);
      INFO(variant_name(v) << (causal ? " decoder" : " encoder") << ": " << r.worst);
      CHECK(r.max_error < 1e-6);
    }
}

TEST_CASE("attention tiled: the decoder never hears the future, exactly", "[attention][tiled]") {
  // Changing position t (its q, k and v) changes nothing at positions < t, bitwise.
  const int64_t B = 1, NH = 2, T = 140, HS = 4;
  for (DType dt : {DType::f32, DType::f64})
    for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low})
      for (int steps : {1, 2}) {
        if (steps > 1 && !uses_lambda(v)) continue;
        AttentionConfig cfg{v, true, steps};
        cfg.tiled = true;
        const Tensor q = randn({B, NH, T, HS}, 8, dt), k = randn({B, NH, T, HS}, 9, dt),
                     vv = randn({B, NH, T, HS}, 10, dt);
        const Var lam = lambdas(v, NH, dt);
        auto out = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
          return attention(Var(a), Var(b), Var(c), Tensor(), lam, cfg).data();
        };
        const Tensor base = out(q, k, vv);
        for (int64_t t : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{100}, T - 1}) {
          Tensor q2 = q.clone(), k2 = k.clone(), v2 = vv.clone();
          for (Tensor* x : {&q2, &k2, &v2})
            x->slice(2, t, t + 1).copy_from(randn({B, NH, 1, HS}, 11 + t, dt));
          const Tensor changed = out(q2, k2, v2);
          INFO(variant_name(v) << " steps " << steps << " " << dtype_name(dt) << " change at " << t);
          CHECK(bitwise_equal(base.slice(2, 0, t), changed.slice(2, 0, t)));
          CHECK_FALSE(bitwise_equal(base.slice(2, t, T), changed.slice(2, t, T)));
        }
      }
}

TEST_CASE("attention tiled: the same bits with 1 and 2 threads", "[attention][tiled][determinism]") {
  const int64_t B = 2, NH = 3, T = 90, HS = 8;
  const Tensor q = randn({B, NH, T, HS}, 12, DType::f32), k = randn({B, NH, T, HS}, 13, DType::f32),
               vv = randn({B, NH, T, HS}, 14, DType::f32), km = padding(B, T, {0, 9});
  for (bool causal : {false, true}) {
    AttentionConfig cfg{AttnVariant::bp_high, causal, 2};
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = run(cfg, true, q, k, vv, km, AttnVariant::bp_high, 15);
    omp_set_num_threads(2);
    const auto two = run(cfg, true, q, k, vv, km, AttnVariant::bp_high, 15);
    omp_set_num_threads(before);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO((causal ? "decoder " : "encoder ") << kNames[i]);
      CHECK(bitwise_equal(one[i], two[i]));
    }
  }
}

TEST_CASE("attention tiled: the same bits by heads and by blocks", "[attention][tiled][determinism]") {
  // The CPU kernels either give each thread whole heads, fusing passes, or run every pass over
  // (head, query block) items as the CUDA twin does (TiledSchedule); every case of the
  // comparison with the materialized kernel, both ways, bit for bit.
  const int64_t NH = 2, HS = 8;
  int cases = 0;
  for_each_case([&](DType dt, const TiledShape& sh, AttnVariant v, int mode, int steps) {
    AttentionConfig cfg{v, mode > 0, steps};
    cfg.leak = mode == 2;
    const Tensor q = randn({sh.B, NH, sh.T, HS}, 1, dt), k = randn({sh.B, NH, sh.T, HS}, 2, dt),
                 vv = randn({sh.B, NH, sh.T, HS}, 3, dt), km = padding(sh.B, sh.T, sh.pad);
    kern::set_tiled_schedule(TiledSchedule::heads);
    const auto a = run(cfg, true, q, k, vv, km, v, 4);
    kern::set_tiled_schedule(TiledSchedule::blocks);
    const auto b = run(cfg, true, q, k, vv, km, v, 4);
    kern::set_tiled_schedule(TiledSchedule::automatic);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(variant_name(v) << " mode " << mode << " steps " << steps << " T " << sh.T << " " << dtype_name(dt)
                           << " " << kNames[i]);
      CHECK(bitwise_equal(a[i], b[i]));
    }
    ++cases;
  });
  CHECK(cases == 112);
}

TEST_CASE("attention tiled: a NaN score row gives NaN as the materialized kernel does",
          "[attention][tiled]") {
  const int64_t B = 1, NH = 1, T = 20, HS = 4;
  Tensor q = randn({B, NH, T, HS}, 16, DType::f32);
  const Tensor k = randn({B, NH, T, HS}, 17, DType::f32), vv = randn({B, NH, T, HS}, 18, DType::f32);
  q.slice(2, 5, 6).copy_from(Tensor::full({B, NH, 1, HS}, std::nan(""), DType::f32));
  for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high}) {
    AttentionConfig cfg{v, false, 1};
    const Var lam = uses_lambda(v) ? Var(Tensor::full({NH}, 0.3, DType::f32)) : Var();
    const std::vector<float> m =
        attention(Var(q), Var(k), Var(vv), Tensor(), lam, cfg).data().to_vector<float>();
    cfg.tiled = true;
    const std::vector<float> t =
        attention(Var(q), Var(k), Var(vv), Tensor(), lam, cfg).data().to_vector<float>();
    INFO(variant_name(v));
    for (size_t i = 0; i < m.size(); ++i) CHECK(std::isnan(m[i]) == std::isnan(t[i]));
    CHECK(std::isnan(t[5 * HS]));
  }
}

TEST_CASE("attention tiled: bp_elemmul and bad shapes are refused by name", "[attention][tiled]") {
  const Tensor q = Tensor::zeros({1, 1, 4, 2}), lse = Tensor::zeros({1, 1, 1, 4});
  Tensor out = q.empty_like(), none, lse_bad = Tensor::zeros({2, 1, 1, 4});
  AttnParams p;
  p.variant = AttnVariant::bp_elemmul;
  CHECK_ERROR(kern::attention_tiled_forward(q, q, q, none, none, p, out, lse_bad, none),
              Catch::Matchers::Contains("bp_elemmul") && Catch::Matchers::Contains("no tiled form"));
  p.variant = AttnVariant::original;
  CHECK_ERROR(kern::attention_tiled_forward(q, q, q, none, none, p, out, lse_bad, none),
              Catch::Matchers::Contains("lse"));
  kern::attention_tiled_forward(q, q, q, none, none, p, out, const_cast<Tensor&>(lse), none);
}

// ---- the CUDA twin (src/attention/cuda/tiled.cu) against the CPU twin -------------------------

namespace {

// Every value of a against b: the same non-finite values (lse is -inf for a row with no allowed
// key), the finite ones within tol of the largest |b| (at least 1).
bool close_to(const Tensor& a, const Tensor& b, double tol) {
  const std::vector<double> x = a.to(Device::cpu()).to(DType::f64).to_vector<double>(),
                            y = b.to(Device::cpu()).to(DType::f64).to_vector<double>();
  if (x.size() != y.size()) return false;
  double m = 0, s = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(y[i]) != std::isfinite(x[i])) return false;
    if (!std::isfinite(y[i])) {
      if (std::isnan(y[i]) != std::isnan(x[i]) || (!std::isnan(y[i]) && x[i] != y[i])) return false;
      continue;
    }
    m = std::max(m, std::abs(x[i] - y[i]));
    s = std::max(s, std::abs(y[i]));
  }
  if (m > tol * s) WARN("max |difference| " << m << " > " << tol << " * " << s);
  return m <= tol * s;
}

// out, lse, colsum, then gq, gk, gv and glambda (drawn, then accumulated into) of the tiled kernels
// on `dev`, for inputs on the CPU.
std::vector<Tensor> tiled_on(Device dev, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& km,
                             const Tensor& lambda, const AttnParams& p, const Tensor& gout) {
  auto on = [&](const Tensor& t) { return t.defined() ? t.to(dev).clone() : Tensor(); };
  const DType dt = q.dtype();
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2);
  const int64_t S = uses_lambda(p.variant) ? p.steps : 0;
  Tensor out = Tensor::empty(q.shape(), dt, dev), lse = Tensor::empty({S + 1, B, NH, T}, dt, dev), colsum;
  if (S > 0) colsum = Tensor::empty({S, B, NH, T}, dt, dev);
  const Tensor Q = on(q), K = on(k), V = on(v), M = on(km), L = on(lambda);
  kern::attention_tiled_forward(Q, K, V, M, L, p, out, lse, colsum);
  Tensor gq = on(randn(q.shape(), 21, dt)), gk = on(randn(q.shape(), 22, dt)),
         gv = on(randn(q.shape(), 23, dt));
  Tensor gl = lambda.defined() ? on(randn({NH}, 24, dt)) : Tensor();
  kern::attention_tiled_backward(Q, K, V, M, L, p, out, lse, colsum, on(gout), gq, gk, gv, gl);
  return {out, lse, colsum, gq, gk, gv, gl};
}

const char* kTiledNames[] = {"out", "lse", "colsum", "dq", "dk", "dv", "dλ"};

// tiled_on's tensors from the CUDA twin's kernels run by the emulator (tests/cuda_emu), on any
// machine: the same draws for gq, gk, gv and gλ.
template <class E>
std::vector<Tensor> tiled_emulated_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& km,
                                     const Tensor& lambda, const AttnParams& p, const Tensor& gout,
                                     bool staged) {
  const DType dt = q.dtype();
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2);
  const int S = uses_lambda(p.variant) ? p.steps : 0;
  Tensor out = Tensor::empty(q.shape(), dt), lse = Tensor::empty({S + 1, B, NH, T}, dt), colsum;
  if (S > 0) colsum = Tensor::empty({S, B, NH, T}, dt);
  Tensor gq = randn(q.shape(), 21, dt), gk = randn(q.shape(), 22, dt), gv = randn(q.shape(), 23, dt);
  Tensor gl = lambda.defined() ? randn({NH}, 24, dt) : Tensor();
  emu_bridge::TiledCall<E> c;
  c.B = B, c.NH = NH, c.n = T, c.hs = q.size(3), c.S = S, c.high = p.variant == AttnVariant::bp_high;
  c.causal = p.causal, c.leak = p.leak, c.staged = staged, c.scale = p.scale;
  c.q = q.data<E>(), c.k = k.data<E>(), c.v = v.data<E>(),
  c.lambda = lambda.defined() ? lambda.data<E>() : nullptr;
  c.key = km.defined() ? km.data<uint8_t>() : nullptr;
  c.out = out.data<E>(), c.lse = lse.data<E>(), c.colsum = S > 0 ? colsum.data<E>() : nullptr;
  c.gout = gout.data<E>(), c.gq = gq.data<E>(), c.gk = gk.data<E>(), c.gv = gv.data<E>();
  c.glambda = gl.defined() ? gl.data<E>() : nullptr;
  emu_bridge::tiled(c);
  return {out, lse, colsum, gq, gk, gv, gl};
}
std::vector<Tensor> tiled_emulated(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& km,
                                   const Tensor& lambda, const AttnParams& p, const Tensor& gout, bool staged,
                                   bool reverse = false) {
  auto run = [&] {
    return q.dtype() == DType::f64 ? tiled_emulated_t<double>(q, k, v, km, lambda, p, gout, staged)
                                   : tiled_emulated_t<float>(q, k, v, km, lambda, p, gout, staged);
  };
  return reverse ? emu_bridge::in_reverse(run) : run();
}

// The inputs of one tiled call: q, k, v, the upstream gradient (B, NH, T, HS), the key mask of
// `pad` and λ where v has one.
struct TiledInputs {
  Tensor q, k, v, km, gout, lambda;
};
TiledInputs tiled_inputs(DType dt, int64_t B, int64_t NH, int64_t T, int64_t HS,
                         const std::vector<int64_t>& pad, AttnVariant v) {
  return {randn({B, NH, T, HS}, 1, dt), randn({B, NH, T, HS}, 2, dt),
          randn({B, NH, T, HS}, 3, dt), padding(B, T, pad),
          randn({B, NH, T, HS}, 4, dt), uses_lambda(v) ? lambdas(v, NH, dt).data() : Tensor()};
}

// Heads wider than a tile (HS = 96: the staged products' depth in three chunks and their output
// in two blocks of columns), T = 70 with 9 padding positions: f64 and f32, original and bp_high,
// encoder and decoder, one BP step. f(label, p, inputs).
template <class F>
void for_each_wide_case(F f) {
  const int64_t HS = 96;
  for (DType dt : {DType::f64, DType::f32})
    for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high})
      for (int mode = 0; mode < 2; ++mode) {
        const AttnParams p{v, mode > 0, 1, 1.0 / std::sqrt(static_cast<double>(HS)), false};
        INFO(variant_name(v) << " mode " << mode << " " << dtype_name(dt));
        f(p, tiled_inputs(dt, 1, 2, 70, HS, {9}, v));
      }
}

// runs[0] (tiled_on's tensors from a device) within the f64 or f32 tolerance of the CPU twin's,
// and every other run bitwise equal to runs[0].
void check_twin_runs(const std::vector<Tensor>& cpu, const std::vector<std::vector<Tensor>>& runs, DType dt) {
  const double tol = dt == DType::f64 ? 1e-11 : 5e-5;
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(kTiledNames[i]);
    REQUIRE(cpu[i].defined() == runs[0][i].defined());
    if (!cpu[i].defined()) continue;
    CHECK(close_to(runs[0][i], cpu[i], tol));
    for (size_t r = 1; r < runs.size(); ++r)
      CHECK(bitwise_equal(runs[0][i].to(Device::cpu()), runs[r][i].to(Device::cpu())));
  }
}

}  // namespace

// The tile products through shared memory (SAOBP_TILED_STAGED=1, tiled.cu's tile_product) do the
// operations of the unstaged ones in the same order: the same bits.
TEST_CASE("attention tiled cuda: the CPU twin's outputs, saved vectors and gradients, bitwise reruns",
          "[cuda][tiled]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t NH = 2, HS = 8;
  for_each_case([&](DType dt, const TiledShape& sh, AttnVariant v, int mode, int steps) {
    const AttnParams p{v, mode > 0, steps, 1.0 / std::sqrt(static_cast<double>(HS)), mode == 2};
    const TiledInputs in = tiled_inputs(dt, sh.B, NH, sh.T, HS, sh.pad, v);
    auto on_gpu = [&] { return tiled_on(Device::cuda(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout); };
    INFO(variant_name(v) << " mode " << mode << " steps " << steps << " T " << sh.T << " " << dtype_name(dt));
    check_twin_runs(tiled_on(Device::cpu(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout),
                    {on_gpu(), on_gpu(), test::with_env("SAOBP_TILED_STAGED", "1", on_gpu)}, dt);
  });
}

// Wide heads (for_each_wide_case), staged and not, against the CPU twin and each other.
TEST_CASE("attention tiled cuda: wide heads, staged and not", "[cuda][tiled]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for_each_wide_case([](const AttnParams& p, const TiledInputs& in) {
    auto on_gpu = [&] { return tiled_on(Device::cuda(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout); };
    check_twin_runs(tiled_on(Device::cpu(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout),
                    {on_gpu(), test::with_env("SAOBP_TILED_STAGED", "1", on_gpu)}, in.q.dtype());
  });
}

TEST_CASE("attention tiled cuda: NaN scores and the autograd path as on the CPU", "[cuda][tiled]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // A NaN row of q. In f64 both twins take e^x and log x from libm, and in f32 original takes no
  // log: the NaN entries of every output and gradient are the CPU twin's. In f32 the CPU's
  // log_approx (Cephes' logf as bit arithmetic) maps NaN to a finite value (about 89), so its
  // log-factors do not carry the row's NaN to the other rows, while logf does: there the GPU's
  // NaN entries include the CPU's.
  const int64_t B = 1, NH = 2, T = 70, HS = 4;
  for (DType dt : {DType::f64, DType::f32})
    for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high})
      for (bool causal : {false, true}) {
        Tensor q = randn({B, NH, T, HS}, 16, dt);
        const Tensor k = randn({B, NH, T, HS}, 17, dt), vv = randn({B, NH, T, HS}, 18, dt),
                     gout = randn({B, NH, T, HS}, 19, dt);
        q.slice(2, 5, 6).copy_from(Tensor::full({B, NH, 1, HS}, std::nan(""), dt));
        const AttnParams p{v, causal, 1, 0.5, false};
        const Tensor lambda = uses_lambda(v) ? Tensor::full({NH}, 0.3, dt) : Tensor();
        const auto c = tiled_on(Device::cpu(), q, k, vv, Tensor(), lambda, p, gout);
        const auto g = tiled_on(Device::cuda(), q, k, vv, Tensor(), lambda, p, gout);
        const bool exact = dt == DType::f64 || v == AttnVariant::original;
        for (size_t i = 0; i < c.size(); ++i) {
          if (!c[i].defined()) continue;
          INFO(dtype_name(dt) << " " << variant_name(v) << (causal ? " decoder " : " encoder ")
                              << kTiledNames[i]);
          const std::vector<double> a = c[i].to(DType::f64).to_vector<double>(),
                                    b = g[i].to(Device::cpu()).to(DType::f64).to_vector<double>();
          REQUIRE(a.size() == b.size());
          size_t differ = 0, cpu_only = 0;
          for (size_t j = 0; j < a.size(); ++j) {
            differ += std::isnan(a[j]) != std::isnan(b[j]);
            cpu_only += std::isnan(a[j]) && !std::isnan(b[j]);
          }
          CHECK(cpu_only == 0);
          if (exact) CHECK(differ == 0);
          if (i == 0) CHECK(std::isnan(b[static_cast<size_t>(5 * HS)]));  // the NaN row's output
        }
      }
  // attention() with AttentionConfig::tiled on GPU tensors: the CPU's output and gradients.
  for (bool causal : {false, true}) {
    AttentionConfig cfg{AttnVariant::bp_low, causal, 2};
    const Tensor q2 = randn({2, NH, T, HS}, 25, DType::f64), k2 = randn({2, NH, T, HS}, 26, DType::f64),
                 v2 = randn({2, NH, T, HS}, 27, DType::f64), km = padding(2, T, {0, 30});
    const auto c = run(cfg, true, q2, k2, v2, km, AttnVariant::bp_low, 28);
    cfg.tiled = true;
    Var qg(q2.to(Device::cuda()), true), kg(k2.to(Device::cuda()), true), vg(v2.to(Device::cuda()), true);
    Var lam(lambdas(AttnVariant::bp_low, NH, DType::f64).data().to(Device::cuda()), true);
    Var out = attention(qg, kg, vg, km.to(Device::cuda()), lam, cfg);
    out.backward(randn(out.shape(), 28, DType::f64).to(Device::cuda()));
    const std::vector<Tensor> g = {out.data(), qg.grad(), kg.grad(), vg.grad(), lam.grad()};
    for (size_t i = 0; i < c.size(); ++i) {
      INFO((causal ? "decoder " : "encoder ") << kNames[i]);
      CHECK(close_to(g[i], c[i], 1e-11));
    }
  }
}

// The CUDA twin's kernels (tiled.cu) under the CUDA kernel emulator (tests/cuda_emu), on every
// machine: every setting of the [cuda][tiled] test against the CPU twin, the staged tile
// products bitwise equal to the unstaged ones, and the same bits when each block's threads run in
// the reverse order (no race between a write and a read without a barrier).
TEST_CASE("attention tiled emulated cuda: the CPU twin's values, staged and not, in either thread order",
          "[emu][tiled]") {
  const int64_t NH = 2, HS = 8;
  for_each_case([&](DType dt, const TiledShape& sh, AttnVariant v, int mode, int steps) {
    const AttnParams p{v, mode > 0, steps, 1.0 / std::sqrt(static_cast<double>(HS)), mode == 2};
    const TiledInputs in = tiled_inputs(dt, sh.B, NH, sh.T, HS, sh.pad, v);
    auto emulated = [&](bool staged, bool reverse) {
      return tiled_emulated(in.q, in.k, in.v, in.km, in.lambda, p, in.gout, staged, reverse);
    };
    INFO(variant_name(v) << " mode " << mode << " steps " << steps << " T " << sh.T << " " << dtype_name(dt));
    check_twin_runs(tiled_on(Device::cpu(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout),
                    {emulated(false, false), emulated(true, false), emulated(false, true)}, dt);
  });
}

// Wide heads (for_each_wide_case) under the emulator, as the [cuda][tiled] wide-heads test.
TEST_CASE("attention tiled emulated cuda: wide heads, staged and not", "[emu][tiled]") {
  for_each_wide_case([](const AttnParams& p, const TiledInputs& in) {
    check_twin_runs(tiled_on(Device::cpu(), in.q, in.k, in.v, in.km, in.lambda, p, in.gout),
                    {tiled_emulated(in.q, in.k, in.v, in.km, in.lambda, p, in.gout, false),
                     tiled_emulated(in.q, in.k, in.v, in.km, in.lambda, p, in.gout, true, true)},
                    in.q.dtype());
  });
}
