// `saobp smoke`: trains one causal transformer block for a few hundred steps on a generated
// copy task and prints the falling loss. It exercises every op of the engine end to end
// (embedding, layernorm, linear, masked softmax attention, GELU, dropout, cross-entropy with an
// ignore index) until the real trainer (`saobp train`) replaces it as the quickstart job.
//
// Task: each sequence is 8 random symbols followed by the same 8 again; the loss counts only the
// predictions of the repeated half, which one attention head can learn to copy (≈ 2.77 → ≈ 0).
#include <chrono>
#include <cmath>

#include "autograd/ops.h"
#include "cli/commands.h"
#include "tensor/kernels.h"
#include "tensor/philox.h"
#include "train/config.h"
#include "train/task.h"

namespace saobp::cli {

namespace {

struct SmokeOptions {
  int steps = 300, batch = 32, seed = 42;
  double lr = 3e-3;
  std::string device = "cpu";
};

struct Param {
  Var v;
  Tensor m, s;  // Adam moments
};

Var param(std::vector<Param>& ps, const char* name, const Shape& shape, double std, uint64_t seed,
          const Device& dev) {
  Tensor t = Tensor::empty(shape, DType::f32, dev);
  if (std > 0)
    kern::fill_random(t, RandomKind::normal, 0.0, std, RngKey{seed, ps.size(), 0});
  else
    kern::fill(t, std < 0 ? 1.0 : 0.0);  // std < 0: ones (LayerNorm weight)
  ps.push_back({Var(t, true, name), t.zeros_like(), t.zeros_like()});
  return ps.back().v;
}

int run_smoke(const SmokeOptions& o) {
  const int64_t V = 16, T = 16, C = 64, NH = 2, HALF = 8;
  const uint64_t seed = static_cast<uint64_t>(o.seed);
  RunConfig device_cfg;  // the device is checked as train.device is (a GPU this build and machine have)
  device_cfg.train.device = o.device;
  const Device dev = run_device(device_cfg);
  std::vector<Param> ps;
  Var wte = param(ps, "wte", {V, C}, 0.02, seed, dev), wpe = param(ps, "wpe", {T, C}, 0.02, seed, dev);
  Var ln1w = param(ps, "ln_1.weight", {C}, -1, seed, dev), ln1b = param(ps, "ln_1.bias", {C}, 0, seed, dev);
  Var qkvw = param(ps, "attn.c_attn.weight", {3 * C, C}, 0.02, seed, dev),
      qkvb = param(ps, "attn.c_attn.bias", {3 * C}, 0, seed, dev);
  Var prw = param(ps, "attn.c_proj.weight", {C, C}, 0.02, seed, dev),
      prb = param(ps, "attn.c_proj.bias", {C}, 0, seed, dev);
  Var ln2w = param(ps, "ln_2.weight", {C}, -1, seed, dev), ln2b = param(ps, "ln_2.bias", {C}, 0, seed, dev);
  Var fcw = param(ps, "mlp.c_fc.weight", {4 * C, C}, 0.02, seed, dev),
      fcb = param(ps, "mlp.c_fc.bias", {4 * C}, 0, seed, dev);
  Var f2w = param(ps, "mlp.c_proj.weight", {C, 4 * C}, 0.02, seed, dev),
      f2b = param(ps, "mlp.c_proj.bias", {C}, 0, seed, dev);
  Var lnfw = param(ps, "ln_f.weight", {C}, -1, seed, dev), lnfb = param(ps, "ln_f.bias", {C}, 0, seed, dev);
  int64_t nparams = 0;
  for (auto& p : ps) nparams += p.v.numel();

  std::vector<uint8_t> causal(static_cast<size_t>(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) causal[static_cast<size_t>(i * T + j)] = j <= i;
  const Tensor mask = Tensor::from_vector(causal, {1, 1, T, T}, dev);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const Tensor pos_ids = Tensor::from_vector(pos, {T}, dev);

  fmt::print(
      "smoke: one causal transformer block, C={} NH={} T={} V={}, {} parameters, batch {}, {} steps, on {}\n",
      C, NH, T, V, nparams, o.batch, o.steps, dev.str());
  const auto t0 = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  for (int step = 0; step < o.steps; ++step) {
    // Batch: 8 random symbols, repeated; targets are the next token, counted on the copy half.
    std::vector<int32_t> ids(static_cast<size_t>(o.batch * T)), tgt(ids.size(), -100);
    for (int64_t b = 0; b < o.batch; ++b)
      for (int64_t t = 0; t < HALF; ++t) {
        const uint64_t idx = static_cast<uint64_t>((step * o.batch + b) * HALF + t);
        const int32_t s = static_cast<int32_t>(philox::word(seed, 1000, idx) % V);
        ids[static_cast<size_t>(b * T + t)] = ids[static_cast<size_t>(b * T + t + HALF)] = s;
      }
    for (int64_t b = 0; b < o.batch; ++b)
      for (int64_t t = HALF - 1; t < T - 1; ++t)
        tgt[static_cast<size_t>(b * T + t)] = ids[static_cast<size_t>(b * T + t + 1)];
    const Tensor x_ids = Tensor::from_vector(ids, {o.batch, T}, dev),
                 y_ids = Tensor::from_vector(tgt, {o.batch, T}, dev);

    const RngKey drop{seed, 2000, static_cast<uint64_t>(step) << 32};
    Var x = add(embedding(wte, x_ids), embedding(wpe, pos_ids));
    Var h = layernorm(x, ln1w, ln1b, 1e-5);
    std::vector<Var> qkv = split(linear(h, qkvw, qkvb), 2, C);
    Var q = split_heads(qkv[0], NH), k = split_heads(qkv[1], NH), v = split_heads(qkv[2], NH);
    Var att = softmax(scale(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(double(C / NH))), mask);
    x = add(x, dropout(linear(merge_heads(matmul(att, v)), prw, prb), 0.1, drop));
    Var m = gelu(linear(layernorm(x, ln2w, ln2b, 1e-5), fcw, fcb), true);
    x = add(x, linear(m, f2w, f2b));
    Var logits = matmul(layernorm(x, lnfw, lnfb, 1e-5), transpose(wte, 0, 1));
    Var loss = cross_entropy(logits, y_ids);
    loss.backward();

    // Adam (β = 0.9, 0.999), the engine's own kernels only.
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - std::pow(b1, step + 1), c2 = 1 - std::pow(b2, step + 1);
    for (Param& p : ps) {
      const Tensor& g = p.v.grad();
      kern::axpby(g, 1 - b1, p.m, b1);
      Tensor g2 = g.empty_like();
      kern::binary(BinaryOp::mul, g, g, g2);
      kern::axpby(g2, 1 - b2, p.s, b2);
      std::vector<float> w = p.v.data().to_vector<float>(), mm = p.m.to_vector<float>(),
                         ss = p.s.to_vector<float>();
      for (size_t i = 0; i < w.size(); ++i)
        w[i] -= static_cast<float>(o.lr * (mm[i] / c1) / (std::sqrt(ss[i] / c2) + eps));
      p.v.data().copy_from(Tensor::from_vector(w, p.v.shape(), dev));
      p.v.zero_grad();
    }
    const double l = loss.data().item();
    if (step == 0) first = l;
    last = l;
    if (step % 25 == 0 || step == o.steps - 1) fmt::print("step {:4d}  loss {:.4f}\n", step, l);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("smoke: loss {:.4f} -> {:.4f} in {:.1f} s ({:.1f} ms/step)\n", first, last, secs,
             1e3 * secs / o.steps);
  if (!(last < 0.5 * first)) {
    fmt::print(stderr, "smoke: the loss did not fall by half; something is wrong\n");
    return 1;
  }
  return 0;
}

}  // namespace

void register_smoke(CLI::App& app) {
  static SmokeOptions o;
  CLI::App* sub =
      app.add_subcommand("smoke", "Train one transformer block on a copy task and print the falling loss");
  sub->add_option("--steps", o.steps, "training steps")->check(at_least(1));
  sub->add_option("--batch", o.batch, "sequences per step")->check(at_least(1));
  sub->add_option("--lr", o.lr, "Adam learning rate")->check(above(0));
  sub->add_option("--seed", o.seed, "random seed");
  sub->add_option("--device", o.device, "cpu, cuda or cuda:N");
  add_command(sub, [] { return run_smoke(o); });
}

}  // namespace saobp::cli
