// The CUDA kernel emulator (tests/cuda_emu/emu.h) and the attention maps' kernels under it, on
// every machine, GPU or not: the emulator's own checks (block and warp reductions, a race it
// shows by running a block's threads in the other order, a deadlock and a bad launch reported
// as such), then the fused schedule of the materialized SAOBP attention (attention.cu,
// SAOBP_FUSED_ATTENTION=1) against the unfused one and against the CPU twin's tile functions
// (src/attention/cpu/bp_potts.cpp); then the other kernel files (nn.cu, reduce.cu, loss.cu,
// embedding.cu, sink_gate.cu, rope.cu, random.cu, elementwise.cu, optim.cu, regularizers.cu)
// against the CPU's kernels. The tiled kernels' emulated tests are in
// tests/attention/test_attention_tiled.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention/cpu/tile.h"
#include "attention/formulas.h"
#include "attention/kernels.h"
#include "cuda_emu/bridge.h"
#include "tensor/bf16.h"
#include "tensor/kernels.h"

using namespace saobp;

using emu_bridge::in_reverse;

TEST_CASE("cuda emulator: reductions, a race, a deadlock and a bad launch, each told as such", "[emu]") {
  const int blocks = 3, per = 256;
  std::vector<double> in(static_cast<size_t>(blocks * per));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i % 7);
  in[per + 100] = -50;  // block 1 has a negative value
  std::vector<double> sums(blocks);
  std::vector<int> any(blocks);
  REQUIRE(emu_bridge::selftest_reduce(in.data(), blocks, sums.data(), any.data()).empty());
  for (int b = 0; b < blocks; ++b) {
    double want = 0;
    for (int i = 0; i < per; ++i) want += in[static_cast<size_t>(b * per + i)];
    CHECK(sums[static_cast<size_t>(b)] == want);  // small integers: exact in any order
    CHECK(any[static_cast<size_t>(b)] == (b == 1));
  }

  // With the barrier every thread reads its neighbour's write, in either order; without it what
  // it reads depends on the order: the emulator makes the race visible.
  std::vector<int> fwd(per), rev(per);
  REQUIRE(emu_bridge::selftest_neighbours(true, fwd.data()).empty());
  REQUIRE(in_reverse([&] { return emu_bridge::selftest_neighbours(true, rev.data()); }).empty());
  for (int t = 0; t < per; ++t) {
    const int want = t + 1 < per ? t + 1 : -2;
    CHECK(fwd[static_cast<size_t>(t)] == want);
    CHECK(rev[static_cast<size_t>(t)] == want);
  }
  REQUIRE(emu_bridge::selftest_neighbours(false, fwd.data()).empty());
  REQUIRE(in_reverse([&] { return emu_bridge::selftest_neighbours(false, rev.data()); }).empty());
  CHECK(fwd != rev);

  std::vector<int> out(per, 0);
  const std::string deadlock = emu_bridge::selftest_deadlock(out.data());
  INFO(deadlock);
  CHECK(deadlock.find("deadlock: 16 threads wait at __syncthreads and 16 in warp shuffles") !=
        std::string::npos);
  const std::string config = emu_bridge::selftest_bad_configuration();
  INFO(config);
  CHECK(config.find("invalid launch configuration: grid (1,1,1), block (2048,1,1)") != std::string::npos);
  // The emulator runs the next launch as if nothing had happened.
  REQUIRE(emu_bridge::selftest_reduce(in.data(), blocks, sums.data(), any.data()).empty());
  CHECK(any[1] == 1);
}

namespace {

// One setting of the maps' test: B sequences (the last pad[b] positions padding), NH heads of
// T×T maps, S BP steps (0: original), BP-High or BP-Low, encoder / decoder / leaking decoder.
struct MapsCase {
  int64_t B, NH, n;
  std::vector<int64_t> pad;
  int S;
  bool high;
  int mode;  // 0 encoder, 1 decoder, 2 leaking decoder
};

template <class T>
struct MapsInput {
  std::vector<T> s, dB, lambda;
  std::vector<uint8_t> key;
};

template <class T>
MapsInput<T> maps_input(const MapsCase& c) {
  const int64_t area = c.B * c.NH * c.n * c.n;
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal;
  MapsInput<T> in;
  for (int64_t i = 0; i < area; ++i) in.s.push_back(static_cast<T>(2 * normal(rng)));
  for (int64_t i = 0; i < area; ++i) in.dB.push_back(static_cast<T>(normal(rng)));
  for (int64_t h = 0; h < c.NH; ++h) in.lambda.push_back(static_cast<T>(0.35 * (1 + h)));
  in.key.assign(static_cast<size_t>(c.B * c.n), 1);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = c.n - std::min(c.n, c.pad[static_cast<size_t>(b)]); t < c.n; ++t)
      in.key[static_cast<size_t>(b * c.n + t)] = 0;
  return in;
}

// The beliefs b^0..b^S, ds, gλ and (f32) the bf16 copies of B and ds of one schedule.
template <class T>
struct MapsOut {
  std::vector<T> beliefs, ds, glambda;
  std::vector<uint16_t> B_half, ds_half;
};

template <class T>
MapsOut<T> emulated_maps(const MapsCase& c, const MapsInput<T>& in, bool fused) {
  const int64_t area = c.B * c.NH * c.n * c.n;
  MapsOut<T> o;
  o.beliefs.assign(static_cast<size_t>((c.S + 1) * area), T(0));
  o.ds.assign(static_cast<size_t>(area), T(0));
  o.glambda.assign(static_cast<size_t>(c.NH), T(0.25));  // added into
  if constexpr (std::is_same_v<T, float>) o.B_half.assign(static_cast<size_t>(area), 0), o.ds_half = o.B_half;
  emu_bridge::MapsCall<T> call;
  call.B = c.B, call.NH = c.NH, call.n = c.n, call.S = c.S, call.high = c.high;
  call.causal = c.mode > 0, call.leak = c.mode == 2, call.fused = fused;
  call.s = in.s.data(), call.lambda = in.lambda.data(), call.dB = in.dB.data(), call.key = in.key.data();
  call.beliefs = o.beliefs.data(), call.ds = o.ds.data(), call.glambda = o.glambda.data();
  if constexpr (std::is_same_v<T, float>) call.B_half = o.B_half.data(), call.ds_half = o.ds_half.data();
  emu_bridge::maps(call);
  return o;
}

// The CPU twin's tiles (tile.h): A, the Potts steps, ds and gλ (the batch's ∂L/∂c summed in
// order, times dc/dλ, added to 0.25 as the emulated runs are).
template <class T>
MapsOut<T> cpu_maps(const MapsCase& c, const MapsInput<T>& in) {
  const int64_t n = c.n, nn = n * n, tiles = c.B * c.NH, area = tiles * nn;
  MapsOut<T> o;
  o.beliefs.assign(static_cast<size_t>((c.S + 1) * area), T(0));
  o.ds.assign(static_cast<size_t>(area), T(0));
  o.glambda.assign(static_cast<size_t>(c.NH), T(0.25));
  attn::Scratch<T> w;
  w.ensure(nn, n);
  std::vector<double> dlam(static_cast<size_t>(tiles), 0.0);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t b = tile / c.NH, h = tile % c.NH;
    attn::TileMask m;
    m.T = n, m.key = in.key.data() + b * n, m.causal = c.mode > 0, m.leak = c.mode == 2;
    std::vector<T*> beliefs;
    for (int t = 0; t <= c.S; ++t) beliefs.push_back(o.beliefs.data() + t * area + tile * nn);
    const T* s = in.s.data() + tile * nn;
    attn::softmax_tile(m, s, beliefs[0]);
    T* ds = o.ds.data() + tile * nn;
    const T* dB = in.dB.data() + tile * nn;
    if (c.S == 0) {
      attn::softmax_tile_backward(m, beliefs[0], dB, ds);
      continue;
    }
    const double l = static_cast<double>(in.lambda[static_cast<size_t>(h)]);
    attn::potts_forward(m, attn::potts_c(c.high, l), c.S, s, beliefs.data(), w);
    dlam[static_cast<size_t>(tile)] =
        attn::potts_backward(m, attn::potts_c(c.high, l), c.S, beliefs.data(), dB, ds, w) *
        attn::potts_dc_dlambda(c.high, l);
  }
  if (c.S > 0) attn::add_lambda_grad(dlam, c.B, c.NH, o.glambda.data());
  return o;
}

// Whether a and b hold equal values (NaN where the other has NaN; -0 equals +0).
template <class T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// The largest |a - b| over the largest |b| (at least 1).
template <class T>
double rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0, s = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    s = std::max(s, std::abs(static_cast<double>(b[i])));
  }
  return m / s;
}

std::vector<float> bf16_values(const std::vector<uint16_t>& h) {
  std::vector<float> v;
  for (uint16_t x : h) v.push_back(bf16_value(x));
  return v;
}

template <class T>
void check_maps(const MapsCase& c) {
  const MapsInput<T> in = maps_input<T>(c);
  const MapsOut<T> unfused = emulated_maps(c, in, false), fused = emulated_maps(c, in, true);
  const MapsOut<T> reversed = in_reverse([&] { return emulated_maps(c, in, true); });
  const MapsOut<T> cpu = cpu_maps(c, in);
  const bool f64 = std::is_same_v<T, double>;
  INFO("S " << c.S << (c.high ? " high" : " low") << " mode " << c.mode << " T " << c.n
            << (f64 ? " f64" : " f32"));
  // The fused schedule does the unfused one's operations on every entry: the same values.
  CHECK(same_values(fused.beliefs, unfused.beliefs));
  CHECK(same_values(fused.ds, unfused.ds));
  CHECK(same_values(bf16_values(fused.B_half), bf16_values(unfused.B_half)));
  CHECK(same_values(bf16_values(fused.ds_half), bf16_values(unfused.ds_half)));
  // ∂L/∂c is summed by rows there and by columns here.
  CHECK(rel_diff(fused.glambda, unfused.glambda) <= (f64 ? 1e-12 : 1e-5));
  // No race: the same bits with each block's threads in the other order.
  CHECK(std::memcmp(fused.beliefs.data(), reversed.beliefs.data(), fused.beliefs.size() * sizeof(T)) == 0);
  CHECK(std::memcmp(fused.ds.data(), reversed.ds.data(), fused.ds.size() * sizeof(T)) == 0);
  CHECK(std::memcmp(fused.glambda.data(), reversed.glambda.data(), fused.glambda.size() * sizeof(T)) == 0);
  // The CPU twin (its f32 exp and log approximations differ from expf and logf in the last bits).
  const double tol = f64 ? 1e-11 : 5e-5;
  CHECK(rel_diff(fused.beliefs, cpu.beliefs) <= tol);
  CHECK(rel_diff(fused.ds, cpu.ds) <= tol);
  CHECK(rel_diff(fused.glambda, cpu.glambda) <= (f64 ? 1e-10 : 2e-4));
}

}  // namespace

// The fused schedule's kernels (potts_colsum, potts_refine, softmax_half, softmax_grad,
// potts_grad_columns and potts_rows_backward) under the emulator, as the backend calls them
// (tests/cuda_emu/bridge.cpp after src/attention/cuda/attention.cpp), for original and 1-3
// steps of BP-High and BP-Low, encoder, decoder and leaking decoder, padding and a sequence with
// no token, T under and over the kernels' 32-lane rows and 256-thread blocks, f32 and f64.
TEST_CASE("cuda emulator: the fused attention schedule gives the unfused one's maps and gradients",
          "[emu][attention]") {
  for (int64_t n : {37, 70})
    for (int S = 0; S <= 3; ++S)
      for (int mode = 0; mode < 3; ++mode) {
        if (S == 0 && mode == 2) continue;  // original has no messages to leak
        const MapsCase c{3, 2, n, {0, 11, n}, S, S % 2 == 1, mode};
        check_maps<double>(c);
        check_maps<float>(c);
      }
}

namespace {

Tensor rand_t(const Shape& s, uint64_t stream, DType dt, double sd = 1.0) {
  Tensor t = Tensor::empty(s, DType::f64);
  kern::fill_random(t, RandomKind::normal, 0.0, sd, RngKey{44, stream, 0});
  return t.to(dt);
}

// a within tol of b (relative to the largest |b|, at least 1), NaN where b has NaN.
bool near(const Tensor& a, const Tensor& b, double tol) {
  const std::vector<double> x = a.to(DType::f64).to_vector<double>(),
                            y = b.to(DType::f64).to_vector<double>();
  return x.size() == y.size() && rel_diff(x, y) <= tol;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// f() returns the emulated tensors; they must be cpu's within tol, the same bits in either
// thread order.
template <class F>
void check_emulated(const std::vector<Tensor>& cpu, F f, double tol) {
  const std::vector<Tensor> fwd = f(), rev = in_reverse(f);
  REQUIRE(fwd.size() == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO("tensor " << i);
    CHECK(near(fwd[i], cpu[i], tol));
    CHECK(same_bits(fwd[i], rev[i]));
  }
}

// f(T{}) for T the element type of dt (f64 or f32).
template <class F>
void by_dtype(DType dt, F f) {
  if (dt == DType::f64)
    f(double{});
  else
    f(float{});
}

}  // namespace

// The kernels around the attention (nn.cu, reduce.cu, loss.cu, embedding.cu) under the emulator
// against the CPU's kernels: LayerNorm forward and backward (the weight's and bias's gradients
// by chunks of rows), GELU both ways, cross-entropy with ignored rows, and the embedding's
// backward by sorted runs of repeated ids (the cross-entropy forward reads a row once, an online
// log-sum-exp, so its values are the CPU's to rounding).
TEST_CASE("cuda emulator: LayerNorm, GELU, cross-entropy and the embedding give the CPU's values", "[emu]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
    const int64_t N = 67, C = 300, V = 509;
    {  // layernorm
      const Tensor x = rand_t({N, C}, 1, dt, 3.0), w = rand_t({C}, 2, dt), b = rand_t({C}, 3, dt),
                   gy = rand_t({N, C}, 4, dt);
      auto run = [&](Device) {
        Tensor y = Tensor::empty({N, C}, dt), mean = Tensor::empty({N}, dt), rstd = Tensor::empty({N}, dt);
        Tensor gx = rand_t({N, C}, 5, dt), gw = rand_t({C}, 6, dt), gb = rand_t({C}, 7, dt);
        return std::vector<Tensor>{y, mean, rstd, gx, gw, gb};
      };
      std::vector<Tensor> cpu = run(Device::cpu());
      kern::layernorm_forward(x, w, b, 1e-5, cpu[0], cpu[1], cpu[2]);
      kern::layernorm_backward(x, w, cpu[1], cpu[2], gy, cpu[3], cpu[4], cpu[5]);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = run(Device::cpu());
            if (dt == DType::f64)
              emu_bridge::layernorm(x.data<double>(), w.data<double>(), b.data<double>(), 1e-5,
                                    e[0].data<double>(), e[1].data<double>(), e[2].data<double>(),
                                    gy.data<double>(), e[3].data<double>(), e[4].data<double>(),
                                    e[5].data<double>(), N, C);
            else
              emu_bridge::layernorm(x.data<float>(), w.data<float>(), b.data<float>(), 1e-5,
                                    e[0].data<float>(), e[1].data<float>(), e[2].data<float>(),
                                    gy.data<float>(), e[3].data<float>(), e[4].data<float>(),
                                    e[5].data<float>(), N, C);
            return e;
          },
          tol);
    }
    {  // gelu
      for (bool tanh_approx : {false, true}) {
        const Tensor x = rand_t({N * C}, 8, dt, 3.0), gy = rand_t({N * C}, 9, dt);
        std::vector<Tensor> cpu = {Tensor::empty({N * C}, dt), rand_t({N * C}, 10, dt)};
        kern::gelu_forward(x, cpu[0], tanh_approx);
        kern::gelu_backward(x, gy, cpu[1], tanh_approx, true);
        check_emulated(
            cpu,
            [&] {
              std::vector<Tensor> e = {Tensor::empty({N * C}, dt), rand_t({N * C}, 10, dt)};
              if (dt == DType::f64)
                emu_bridge::gelu(x.data<double>(), e[0].data<double>(), gy.data<double>(),
                                 e[1].data<double>(), N * C, tanh_approx);
              else
                emu_bridge::gelu(x.data<float>(), e[0].data<float>(), gy.data<float>(), e[1].data<float>(),
                                 N * C, tanh_approx);
              return e;
            },
            tol);
      }
    }
    {  // cross-entropy
      const Tensor logits = rand_t({N, V}, 11, dt, 4.0), gloss = rand_t({N}, 12, dt);
      std::vector<int32_t> t(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i)
        t[static_cast<size_t>(i)] = i % 5 == 3 ? -100 : static_cast<int32_t>(i * 37 % V);
      const Tensor targets = Tensor::from_vector(t, {N});
      std::vector<Tensor> cpu = {Tensor::empty({N}, dt), Tensor::empty({N}, dt), rand_t({N, V}, 13, dt)};
      kern::cross_entropy_forward(logits, targets, -100, cpu[0], cpu[1]);
      kern::cross_entropy_backward(logits, targets, cpu[1], gloss, -100, cpu[2], true);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {Tensor::empty({N}, dt), Tensor::empty({N}, dt), rand_t({N, V}, 13, dt)};
            if (dt == DType::f64)
              emu_bridge::cross_entropy(logits.data<double>(), t.data(), -100, e[0].data<double>(),
                                        e[1].data<double>(), gloss.data<double>(), e[2].data<double>(), N, V);
            else
              emu_bridge::cross_entropy(logits.data<float>(), t.data(), -100, e[0].data<float>(),
                                        e[1].data<float>(), gloss.data<float>(), e[2].data<float>(), N, V);
            return e;
          },
          tol);
    }
    {                         // embedding
      const int64_t Vs = 40;  // fewer rows than ids: runs of repeated ids
      const Tensor weight = rand_t({Vs, C}, 14, dt), gout = rand_t({N, C}, 15, dt);
      std::vector<int32_t> ids(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7 % Vs);
      const Tensor idt = Tensor::from_vector(ids, {N});
      std::vector<Tensor> cpu = {Tensor::empty({N, C}, dt), rand_t({Vs, C}, 16, dt)};
      kern::embedding_forward(weight, idt, cpu[0]);
      kern::embedding_backward(idt, gout, cpu[1]);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {Tensor::empty({N, C}, dt), rand_t({Vs, C}, 16, dt)};
            if (dt == DType::f64)
              emu_bridge::embedding(weight.data<double>(), ids.data(), e[0].data<double>(),
                                    gout.data<double>(), e[1].data<double>(), N, C, Vs);
            else
              emu_bridge::embedding(weight.data<float>(), ids.data(), e[0].data<float>(), gout.data<float>(),
                                    e[1].data<float>(), N, C, Vs);
            return e;
          },
          tol);
    }
  }
}

// The head-skip gate (sink_gate.cu), RoPE (rope.cu: both ways, at an offset, the table of
// rope_table.h) and the Philox draws with dropout (random.cu) under the emulator against the
// CPU's kernels: the gate's keep bits, the rotations, the masks exactly and the values.
TEST_CASE("cuda emulator: the sink gate, RoPE, random draws and dropout give the CPU's values", "[emu]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
    {  // sink gate: rows whose mass sits on key 0 with a strength that varies by head
      const int64_t B = 2, NH = 5, n = 45;
      std::vector<double> p(static_cast<size_t>(B * NH * n * n));
      std::mt19937_64 rng(7);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      for (int64_t r = 0; r < B * NH * n; ++r) {
        const int64_t h = r / n % NH;
        double* row = p.data() + r * n;
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += row[k] = u(rng);
        const double sink = u(rng) < 0.2 * static_cast<double>(h) ? 0.95 : 0.0;
        for (int64_t k = 0; k < n; ++k) row[k] = row[k] / sum * (1 - sink) + (k == 0 ? sink : 0.0);
      }
      const Tensor probs = Tensor::from_vector(p, {B, NH, n, n}).to(dt);
      std::vector<uint8_t> km(static_cast<size_t>(B * n), 1);
      for (int64_t t = n - 12; t < n; ++t) km[static_cast<size_t>(n + t)] = 0;
      const Tensor key = Tensor::from_vector(km, {B, n});
      for (double fraction : {0.1, 0.4, 0.7}) {
        std::vector<Tensor> cpu = {Tensor::empty({B, NH}, dt)};
        kern::sink_gate(probs, key, 0.5, fraction, cpu[0]);
        const auto kept = cpu[0].to(DType::f64).to_vector<double>();
        CHECK(std::count(kept.begin(), kept.end(), 0.0) > 0);  // some heads are skipped, some kept
        CHECK(std::count(kept.begin(), kept.end(), 1.0) > 0);
        check_emulated(
            cpu,
            [&] {
              std::vector<Tensor> e = {Tensor::empty({B, NH}, dt)};
              if (dt == DType::f64)
                emu_bridge::sink_gate(probs.data<double>(), km.data(), 0.5, fraction, e[0].data<double>(), B,
                                      NH, n);
              else
                emu_bridge::sink_gate(probs.data<float>(), km.data(), 0.5, fraction, e[0].data<float>(), B,
                                      NH, n);
              return e;
            },
            0.0);
      }
    }
    {  // RoPE, forward and inverse, at offset 0 and 5
      const int64_t B = 2, NH = 3, n = 19, hs = 32;
      const Tensor x = rand_t({B, NH, n, hs}, 20, dt);
      for (int64_t offset : {0, 5})
        for (bool inverse : {false, true}) {
          std::vector<Tensor> cpu = {Tensor::empty({B, NH, n, hs}, dt)};
          kern::rope(x, 10000.0, inverse, cpu[0], offset);
          check_emulated(
              cpu,
              [&] {
                std::vector<Tensor> e = {Tensor::empty({B, NH, n, hs}, dt)};
                if (dt == DType::f64)
                  emu_bridge::rope(x.data<double>(), 10000.0, inverse, e[0].data<double>(), B * NH * n, n, hs,
                                   offset);
                else
                  emu_bridge::rope(x.data<float>(), 10000.0, inverse, e[0].data<float>(), B * NH * n, n, hs,
                                   offset);
                return e;
              },
              tol);
        }
    }
    {  // Philox draws (uniform and normal) and dropout both ways
      const int64_t n = 3001;
      const RngKey key{42, 7, 123};
      const Tensor x = rand_t({n}, 21, dt), gy = rand_t({n}, 22, dt);
      for (bool normal : {false, true}) {
        std::vector<Tensor> cpu = {Tensor::empty({n}, dt), Tensor::empty({n}, dt),
                                   Tensor::empty({n}, DType::u8), rand_t({n}, 23, dt)};
        kern::fill_random(cpu[0], normal ? RandomKind::normal : RandomKind::uniform, 0.5, 2.0, key);
        kern::dropout_forward(x, 0.3, key, cpu[1], cpu[2]);
        kern::dropout_backward(gy, cpu[2], 0.3, cpu[3], true);
        auto run = [&] {
          std::vector<Tensor> e = {Tensor::empty({n}, dt), Tensor::empty({n}, dt),
                                   Tensor::empty({n}, DType::u8), rand_t({n}, 23, dt)};
          uint8_t* mask = e[2].data<uint8_t>();
          if (dt == DType::f64)
            emu_bridge::random_and_dropout(e[0].data<double>(), normal, 0.5, 2.0, x.data<double>(), 0.3,
                                           e[1].data<double>(), mask, gy.data<double>(), e[3].data<double>(),
                                           n, key.seed, key.stream, key.offset);
          else
            emu_bridge::random_and_dropout(e[0].data<float>(), normal, 0.5, 2.0, x.data<float>(), 0.3,
                                           e[1].data<float>(), mask, gy.data<float>(), e[3].data<float>(), n,
                                           key.seed, key.stream, key.offset);
          return e;
        };
        check_emulated(cpu, run, tol);
        CHECK(same_bits(run()[2], cpu[2]));  // the dropout mask exactly
      }
    }
  }
}

// The elementwise, reduction and optimizer kernels (elementwise.cu, reduce.cu, optim.cu) under
// the emulator against the CPU's: broadcast binary operations, the unary functions and their
// derivatives, bf16 rounding both ways and the other casts (the bits exactly), a strided fill, a
// broadcast copy into a transposed view and axpby (exact), a sum over a middle dim in chunks of
// rows, and the multi-tensor squared norms and AdamW of a training step (two sets of
// coefficients, the gradients scaled first).
TEST_CASE("cuda emulator: elementwise, reduction and optimizer kernels give the CPU's values", "[emu]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
    {  // a (4,1,9) op b (1,5,9) -> (4,5,9)
      const Tensor a = rand_t({4, 1, 9}, 30, dt), b0 = rand_t({1, 5, 9}, 31, dt);
      Tensor b = Tensor::empty({1, 5, 9}, dt);
      kern::unary(UnaryOp::exp, b0, b);  // positive: a safe divisor
      const int64_t size[] = {4, 5, 9}, sa[] = {9, 0, 1}, sb[] = {0, 9, 1}, so[] = {45, 9, 1};
      const BinaryOp ops[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div};
      for (int op = 0; op < 4; ++op) {
        std::vector<Tensor> cpu = {Tensor::empty({4, 5, 9}, dt)};
        kern::binary(ops[op], a.expand({4, 5, 9}), b.expand({4, 5, 9}), cpu[0]);
        check_emulated(
            cpu,
            [&] {
              std::vector<Tensor> e = {Tensor::empty({4, 5, 9}, dt)};
              if (dt == DType::f64)
                emu_bridge::binary(op, a.data<double>(), b.data<double>(), e[0].data<double>(), 3, size, sa,
                                   sb, so);
              else
                emu_bridge::binary(op, a.data<float>(), b.data<float>(), e[0].data<float>(), 3, size, sa, sb,
                                   so);
              return e;
            },
            0.0);  // one rounding each, as on the CPU
      }
    }
    {  // exp, log, log1p, softplus and their derivatives, on positive x
      const int64_t n = 777;
      Tensor x = Tensor::empty({n}, dt);
      kern::unary(UnaryOp::exp, rand_t({n}, 32, dt), x);
      const Tensor gy = rand_t({n}, 33, dt);
      const UnaryOp ops[] = {UnaryOp::exp, UnaryOp::log, UnaryOp::log1p, UnaryOp::softplus};
      for (int op = 0; op < 4; ++op) {
        std::vector<Tensor> cpu = {Tensor::empty({n}, dt), rand_t({n}, 34, dt)};
        kern::unary(ops[op], x, cpu[0]);
        kern::unary_backward(ops[op], x, cpu[0], gy, cpu[1]);
        check_emulated(
            cpu,
            [&] {
              std::vector<Tensor> e = {Tensor::empty({n}, dt), rand_t({n}, 34, dt)};
              if (dt == DType::f64)
                emu_bridge::unary(op, x.data<double>(), e[0].data<double>(), gy.data<double>(),
                                  e[1].data<double>(), n);
              else
                emu_bridge::unary(op, x.data<float>(), e[0].data<float>(), gy.data<float>(),
                                  e[1].data<float>(), n);
              return e;
            },
            tol);
      }
    }
    {  // (6, 50, 7) summed over its middle dim into (6, 1, 7), times 0.5, added
      const Tensor src = rand_t({6, 50, 7}, 35, dt);
      std::vector<Tensor> cpu = {rand_t({6, 1, 7}, 36, dt)};
      kern::reduce_sum_to(src, cpu[0], 0.5, true);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {rand_t({6, 1, 7}, 36, dt)};
            if (dt == DType::f64)
              emu_bridge::reduce_middle(src.data<double>(), e[0].data<double>(), 6, 50, 7, 0.5);
            else
              emu_bridge::reduce_middle(src.data<float>(), e[0].data<float>(), 6, 50, 7, 0.5);
            return e;
          },
          0.0);  // sums in double in the CPU's order
    }
    {  // sums of squares, then AdamW, over 5 tensors (one of 20000 values: three chunks)
      const std::vector<int64_t> sizes = {20000, 3, 513, 1, 64};
      const std::vector<AdamWParams> h2 = {{1e-3, 0.9, 0.999, 1e-8, 0.01, 7},
                                           {3e-4, 0.8, 0.99, 1e-6, 0.0, 7}};
      const std::vector<emu_bridge::AdamWHyper> hyper = {{1e-3, 0.9, 0.999, 1e-8, 0.01, 7},
                                                         {3e-4, 0.8, 0.99, 1e-6, 0.0, 7}};
      const std::vector<int> coeff_of = {0, 1, 0, 1, 1};
      auto tensors = [&](uint64_t stream) {
        std::vector<Tensor> t;
        for (size_t i = 0; i < sizes.size(); ++i) t.push_back(rand_t({sizes[i]}, stream * 10 + i, dt));
        return t;
      };
      std::vector<Tensor> p = tensors(40), g = tensors(41), m = tensors(42), v = tensors(43);
      for (Tensor& t : v) kern::unary(UnaryOp::exp, t.clone(), t);  // second moments are positive
      auto clones = [](const std::vector<Tensor>& ts) {
        std::vector<Tensor> c;
        for (const Tensor& t : ts) c.push_back(t.clone());
        return c;
      };
      const std::vector<Tensor> p0 = clones(p), g0 = clones(g), m0 = clones(m), v0 = clones(v);
      Tensor sums = Tensor::empty({static_cast<int64_t>(sizes.size())}, DType::f64);
      kern::multi_sum_squares(p, sums);
      std::vector<AdamWParams> h;
      for (int c : coeff_of) h.push_back(h2[static_cast<size_t>(c)]);
      kern::multi_adamw_step(p, g, m, v, h, 0.75);
      std::vector<Tensor> cpu = {sums};
      for (auto* list : {&p, &g, &m, &v})
        for (const Tensor& t : *list) cpu.push_back(t);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> ep = clones(p0), eg = clones(g0), em = clones(m0), ev = clones(v0);
            Tensor es = Tensor::empty({static_cast<int64_t>(sizes.size())}, DType::f64);
            auto run = [&](auto tag) {
              using T = decltype(tag);
              std::vector<T*> pp, gg, mm, vv;
              for (size_t i = 0; i < sizes.size(); ++i)
                pp.push_back(ep[i].data<T>()), gg.push_back(eg[i].data<T>()), mm.push_back(em[i].data<T>()),
                    vv.push_back(ev[i].data<T>());
              emu_bridge::multi_optim<T>(static_cast<int>(sizes.size()), pp.data(), gg.data(), mm.data(),
                                         vv.data(), sizes.data(), hyper.data(), coeff_of.data(), 0.75,
                                         es.data<double>());
            };
            by_dtype(dt, run);
            std::vector<Tensor> e = {es};
            for (auto* list : {&ep, &eg, &em, &ev})
              for (const Tensor& t : *list) e.push_back(t);
            return e;
          },
          tol);
    }
  }
  for (DType dt : {DType::f64, DType::f32}) {  // strided fill and copy, axpby
    INFO(dtype_name(dt));
    // out: a (3,4,5) tensor seen as (3,5,4) through its transpose; src: (1,5,1) broadcast.
    const int64_t size[] = {3, 5, 4}, view[] = {20, 1, 5}, bcast[] = {0, 1, 0};
    const Tensor src = rand_t({1, 5, 1}, 60, dt), x = rand_t({333}, 61, dt);
    for (bool accumulate : {false, true}) {
      std::vector<Tensor> cpu = {rand_t({3, 4, 5}, 62, dt), rand_t({3, 4, 5}, 63, dt), rand_t({333}, 64, dt)};
      Tensor filled = cpu[0].transpose(1, 2), copied = cpu[1].transpose(1, 2);
      kern::fill(filled, 0.375);
      kern::copy(src.expand({3, 5, 4}), copied, accumulate);
      kern::axpby(x, 1.5, cpu[2], accumulate ? -0.5 : 0.0);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {rand_t({3, 4, 5}, 62, dt), rand_t({3, 4, 5}, 63, dt),
                                     rand_t({333}, 64, dt)};
            auto run = [&](auto tag) {
              using T = decltype(tag);
              emu_bridge::fill_copy<T>(e[0].data<T>(), view, T(0.375), src.data<T>(), bcast, e[1].data<T>(),
                                       view, accumulate, 3, size);
              emu_bridge::axpby<T>(x.data<T>(), T(1.5), e[2].data<T>(), T(accumulate ? -0.5 : 0.0), 333);
            };
            by_dtype(dt, run);
            return e;
          },
          0.0);
    }
  }
  {  // f64 to f32 and i32 to f64
    const int64_t n = 500;
    const Tensor x = rand_t({n}, 65, DType::f64);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7919 - 1000000);
    const Tensor idt = Tensor::from_vector(ids, {n});
    Tensor cpu_f32 = Tensor::empty({n}, DType::f32), cpu_f64 = Tensor::empty({n}, DType::f64);
    kern::cast(x, cpu_f32);
    kern::cast(idt, cpu_f64);
    Tensor f32 = Tensor::empty({n}, DType::f32), f64 = Tensor::empty({n}, DType::f64);
    emu_bridge::casts(x.data<double>(), f32.data<float>(), ids.data(), f64.data<double>(), n);
    CHECK(same_bits(f32, cpu_f32));
    CHECK(same_bits(f64, cpu_f64));
  }
  {  // f32 to bf16 and back: the CPU's bits (round to nearest even, NaN kept)
    const int64_t n = 1000;
    std::vector<float> xs;
    std::mt19937 rng(3);
    std::uniform_int_distribution<uint32_t> bits;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t b = bits(rng);
      float f;
      std::memcpy(&f, &b, sizeof f);
      xs.push_back(f);
    }
    const Tensor x = Tensor::from_vector(xs, {n});
    Tensor cpu_half = Tensor::empty({n}, DType::bf16), cpu_back = Tensor::empty({n}, DType::f32);
    kern::cast(x, cpu_half);
    kern::cast(cpu_half, cpu_back);
    std::vector<uint16_t> half(static_cast<size_t>(n));
    Tensor back = Tensor::empty({n}, DType::f32);
    emu_bridge::bf16_round_trip(xs.data(), half.data(), back.data<float>(), n);
    CHECK(std::memcmp(half.data(), cpu_half.raw(), half.size() * sizeof(uint16_t)) == 0);
    CHECK(same_bits(back, cpu_back));
  }
}

// The baseline regularizers (regularizers.cu) under the emulator against the CPU's: Entropy-Reg
// forward and backward for the encoder and the decoder with padding (heads both over and under
// the threshold), and Eigen-Reg forward and backward.
TEST_CASE("cuda emulator: Entropy-Reg and Eigen-Reg give the CPU's values", "[emu]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-11 : 5e-5;
    const int64_t B = 2, NH = 3, n = 21, hs = 8, C = 24;
    const Tensor q = rand_t({B, NH, n, hs}, 50, dt), k = rand_t({B, NH, n, hs}, 51, dt);
    std::vector<uint8_t> km(static_cast<size_t>(B * n), 1);
    for (int64_t t = n - 6; t < n; ++t) km[static_cast<size_t>(n + t)] = 0;
    const Tensor key = Tensor::from_vector(km, {B, n});
    const Tensor theta = Tensor::from_vector(std::vector<double>{0.2, 0.9, 0.55}, {NH}).to(dt);
    const Tensor gpenalty = Tensor::from_vector(std::vector<double>{1.5}, {}).to(dt);
    for (bool causal : {false, true}) {
      INFO("causal " << causal);
      std::vector<Tensor> cpu = {Tensor::empty({}, dt),
                                 Tensor::empty({NH}, DType::f64),
                                 Tensor::empty({NH}, DType::f64),
                                 Tensor::empty({B, NH, n, hs}, dt),
                                 Tensor::empty({B, NH, n, hs}, dt),
                                 Tensor::empty({NH}, dt)};
      kern::entropy_reg_penalty_forward(q, k, key, causal, theta, 0.3, cpu[0], cpu[1], cpu[2]);
      kern::entropy_reg_penalty_backward(q, k, key, causal, cpu[1], cpu[2], gpenalty, cpu[3], cpu[4], cpu[5]);
      const auto active = cpu[2].to_vector<double>();
      CHECK(std::count(active.begin(), active.end(), 1.0) > 0);
      CHECK(std::count(active.begin(), active.end(), 0.0) > 0);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {Tensor::empty({}, dt),
                                     Tensor::empty({NH}, DType::f64),
                                     Tensor::empty({NH}, DType::f64),
                                     Tensor::empty({B, NH, n, hs}, dt),
                                     Tensor::empty({B, NH, n, hs}, dt),
                                     Tensor::empty({NH}, dt)};
            auto run = [&](auto tag) {
              using T = decltype(tag);
              emu_bridge::entropy_reg<T>(q.data<T>(), k.data<T>(), km.data(), causal, theta.data<T>(), 0.3,
                                         e[0].data<T>(), e[1].data<double>(), e[2].data<double>(),
                                         gpenalty.data<T>(), e[3].data<T>(), e[4].data<T>(), e[5].data<T>(),
                                         B, NH, n, hs);
            };
            by_dtype(dt, run);
            return e;
          },
          tol);
    }
    {  // Eigen-Reg
      const Tensor wq = rand_t({NH * hs, C}, 52, dt), wk = rand_t({NH * hs, C}, 53, dt),
                   gvar = rand_t({NH}, 54, dt);
      std::vector<Tensor> cpu = {Tensor::empty({NH}, dt), Tensor::empty({NH}, DType::f64),
                                 Tensor::empty({NH * hs, C}, dt), Tensor::empty({NH * hs, C}, dt)};
      kern::qk_eigen_variance_forward(wq, wk, NH, cpu[0], cpu[1]);
      kern::qk_eigen_variance_backward(wq, wk, cpu[1], gvar, cpu[2], cpu[3]);
      check_emulated(
          cpu,
          [&] {
            std::vector<Tensor> e = {Tensor::empty({NH}, dt), Tensor::empty({NH}, DType::f64),
                                     Tensor::empty({NH * hs, C}, dt), Tensor::empty({NH * hs, C}, dt)};
            auto run = [&](auto tag) {
              using T = decltype(tag);
              emu_bridge::eigen_reg<T>(wq.data<T>(), wk.data<T>(), e[0].data<T>(), e[1].data<double>(),
                                       gvar.data<T>(), e[2].data<T>(), e[3].data<T>(), NH, hs, C);
            };
            by_dtype(dt, run);
            return e;
          },
          tol);
    }
  }
}
