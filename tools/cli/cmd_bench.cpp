// `saobp bench CONFIG [section.key=value ...]`: throughput of the training step of the model a
// run config describes, timed exactly as src/train/trainer.cpp runs it (forward, loss, backward
// per micro-batch, clip_grad_norm, AdamW step, zero_grad) on the trainer's own synthetic batches
// (data/synthetic.h) of the config's vocabulary, batch size and sequence length. Warm-up steps,
// then the median (and min/max) of the timed steps; tokens/s and the model's GFLOP/s under the
// FLOP count printed term by term. tools/bench_pytorch.py times the same model in PyTorch and
// tools/compare.sh runs both.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "cli/commands.h"
#include "data/synthetic.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "train/clip.h"
#include "train/config.h"

namespace saobp::cli {

namespace {

struct BenchCli {
  std::string config;
  std::vector<std::string> overrides;
  int warmup = 3, steps = 20;
  std::string json;
  bool print_config = false;
};

// One named term of the FLOP count of a training step (multiply-add = 2 FLOPs).
struct FlopTerm {
  std::string name, formula;
  double flops;
};

// The FLOPs of one training step: each GEMM once forward and twice backward (input and weight
// gradients), hence the factor 6 = 3 x 2. Elementwise work (GELU, LayerNorm, softmax, dropout,
// AdamW) is not counted. `head_rows` is the number of rows the LM head is computed on.
std::vector<FlopTerm> step_flops(const RunConfig& cfg, double tokens, double head_rows) {
  const ModelSection& m = cfg.model;
  const double C = static_cast<double>(m.hidden), I = static_cast<double>(m.intermediate);
  const double L = static_cast<double>(m.layers), V = static_cast<double>(m.vocab_size);
  const double T = static_cast<double>(cfg.train.seq_len);
  const double block_weights = L * (4 * C * C + 2 * C * I);
  std::vector<FlopTerm> t;
  t.push_back({"blocks (q,k,v,out,fc1,fc2 weights)",
               fmt::format("6 * L(4C^2 + 2CI) * tokens = 6 * {:.0f} * {:.0f}", block_weights, tokens),
               6 * block_weights * tokens});
  t.push_back({"attention (QK^T, AV; full TxT)", fmt::format("6 * 2 * L*T*C * tokens = 12 * {:.0f}*{:.0f}*{:.0f} * {:.0f}",
                                                             L, T, C, tokens),
               12 * L * T * C * tokens});
  if (m.family == "bert") {
    t.push_back({"MLM transform (dense CxC)", fmt::format("6 * C^2 * rows = 6 * {:.0f} * {:.1f}", C * C, head_rows),
                 6 * C * C * head_rows});
    t.push_back({"MLM decoder (tied, CxV)", fmt::format("6 * C*V * rows = 6 * {:.0f} * {:.1f}", C * V, head_rows),
                 6 * C * V * head_rows});
  } else {
    t.push_back({"LM head (tied, CxV)", fmt::format("6 * C*V * rows = 6 * {:.0f} * {:.1f}", C * V, head_rows),
                 6 * C * V * head_rows});
  }
  return t;
}

// CPU time the hypervisor gave to other guests ("steal", /proc/stat) as a fraction of all CPU
// time between two readings: on a shared virtual machine a busy spell shows up here, and the
// step times of that spell mean little. Negative when /proc/stat cannot be read.
struct CpuTimes {
  double steal = 0, total = 0;
  bool ok = false;
};
CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream f("/proc/stat");
  std::string name;
  if (!(f >> name) || name != "cpu") return t;
  double v;
  for (int i = 0; i < 10 && (f >> v); ++i) {  // user nice system idle iowait irq softirq steal guest guest_nice
    if (i < 8) t.total += v;
    if (i == 7) t.steal = v, t.ok = true;
  }
  return t;
}
double steal_fraction(const CpuTimes& a, const CpuTimes& b) {
  if (!a.ok || !b.ok || b.total <= a.total) return -1;
  return (b.steal - a.steal) / (b.total - a.total);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_bench(const BenchCli& o) {
  const RunConfig cfg = load_config(o.config, o.overrides);
  if (o.print_config) {
    fmt::print("{}", to_toml(cfg));
    return 0;
  }
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  const TrainSection& tc = cfg.train;
  const bool bert = cfg.model.family == "bert";
  std::unique_ptr<BertForMaskedLM> enc;
  std::unique_ptr<GPT2LMHeadModel> dec;
  if (bert) enc = std::make_unique<BertForMaskedLM>(encoder_config(cfg), tc.seed);
  else dec = std::make_unique<GPT2LMHeadModel>(decoder_config(cfg), tc.seed);
  ParamStore& params = bert ? enc->params() : dec->params();
  AdamW adam(params.all(), adamw_config(cfg));
  const Schedule sched = schedule_of(cfg);
  const int64_t tokens = tc.batch_size * tc.seq_len * tc.grad_accum;
  int64_t params_total = 0;
  for (const Var& p : params.all()) params_total += p.numel();
  fmt::print("bench: {} {} ({} parameters), attention {}, B={} T={} grad_accum={} ({} tokens/step), {} OpenMP "
             "threads, f32\n",
             cfg.model.family, cfg.model.preset, params_total, variant_name(cfg.model.attention), tc.batch_size,
             tc.seq_len, tc.grad_accum, tokens, omp_get_max_threads());
  fmt::print("batches: the synthetic source's (data.kind '{}' is not read: only the shapes matter here){}\n",
             cfg.data.kind,
             cfg.model.attention == AttnVariant::original ? "" : "; FLOPs below count standard attention");

  constexpr uint64_t kStream = 100;  // the trainer's training stream
  std::vector<double> times;
  double loss = 0, head_rows = 0;
  CpuTimes cpu0;
  int64_t index = 0;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    // Batches are generated outside the timed region (the trainer's data loading is not the step).
    std::vector<MlmBatch> mb;
    std::vector<ClmBatch> cb;
    int64_t rows = 0;
    for (int micro = 0; micro < tc.grad_accum; ++micro, ++index) {
      if (bert) {
        mb.push_back(synthetic_mlm_batch(tc.batch_size, tc.seq_len, cfg.model.vocab_size, tc.seed, kStream, index,
                                         cfg.data.mlm_probability));
        for (int32_t y : mb.back().labels.to_vector<int32_t>()) rows += y != -100;
      } else {
        cb.push_back(synthetic_clm_batch(tc.batch_size, tc.seq_len, cfg.model.vocab_size, tc.seed, kStream, index));
        rows += tc.batch_size * tc.seq_len;  // the head runs on every position (the last has no target)
      }
    }
    if (s == o.warmup) cpu0 = read_cpu_times();
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t step = s;
    double loss_sum = 0;
    for (int micro = 0; micro < tc.grad_accum; ++micro) {
      const uint64_t dstep = static_cast<uint64_t>(step * tc.grad_accum + micro);
      Var l = bert ? enc->mlm_loss(enc->encode(mb[micro].ids, Tensor(), mb[micro].key_mask, true, dstep),
                                   mb[micro].labels)
                   : dec->lm_loss(dec->forward(cb[micro].ids, cb[micro].key_mask, true, dstep), cb[micro].targets);
      loss_sum += l.data().item();
      scale(l, 1.0 / tc.grad_accum).backward();
    }
    clip_grad_norm(params.all(), tc.grad_clip);
    adam.step(lr_at(sched, step));
    params.zero_grad();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    loss = loss_sum / tc.grad_accum;
    if (s >= o.warmup) times.push_back(dt), head_rows += static_cast<double>(rows);
  }
  const double steal = steal_fraction(cpu0, read_cpu_times());
  head_rows /= static_cast<double>(times.size());
  const double med = median(times), lo = *std::min_element(times.begin(), times.end()),
               hi = *std::max_element(times.begin(), times.end());
  const std::vector<FlopTerm> terms = step_flops(cfg, static_cast<double>(tokens), head_rows);
  double flops = 0;
  fmt::print("FLOPs per step (forward + backward = 6 x multiply-adds of each GEMM; elementwise ops not counted;\n"
             "  tokens = {}, head rows = {:.1f} {}):\n",
             tokens, head_rows, bert ? "masked positions, mean over the timed steps" : "all positions");
  for (const FlopTerm& t : terms) {
    fmt::print("  {:<36} {:<58} = {:.4g}\n", t.name, t.formula, t.flops);
    flops += t.flops;
  }
  fmt::print("  {:<36} {:<58} = {:.4g}\n", "total", "", flops);
  fmt::print("steps: {} warm-up, {} timed; last loss {:.4f}\n", o.warmup, times.size(), loss);
  fmt::print("ms/step: median {:.1f} (min {:.1f}, max {:.1f})\n", 1e3 * med, 1e3 * lo, 1e3 * hi);
  fmt::print("tokens/s: {:.0f} (median step)\n", static_cast<double>(tokens) / med);
  fmt::print("model GFLOP/s: {:.1f}\n", flops / med / 1e9);
  if (steal >= 0)
    fmt::print("machine: {:.1f}% of CPU time stolen by the hypervisor during the timed steps{}\n", 100 * steal,
               steal > 0.05 ? " (a busy host: these times are not representative)" : "");
  if (!o.json.empty()) {
    nlohmann::json terms_j = nlohmann::json::array();
    for (const FlopTerm& t : terms) terms_j.push_back({{"name", t.name}, {"formula", t.formula}, {"flops", t.flops}});
    const nlohmann::json j = {{"tool", "saobp"},
                              {"family", cfg.model.family},
                              {"preset", cfg.model.preset},
                              {"attention", variant_name(cfg.model.attention)},
                              {"batch_size", tc.batch_size},
                              {"seq_len", tc.seq_len},
                              {"grad_accum", tc.grad_accum},
                              {"tokens_per_step", tokens},
                              {"threads", omp_get_max_threads()},
                              {"warmup", o.warmup},
                              {"steps", times.size()},
                              {"ms_per_step_median", 1e3 * med},
                              {"ms_per_step_min", 1e3 * lo},
                              {"ms_per_step_max", 1e3 * hi},
                              {"tokens_per_s", static_cast<double>(tokens) / med},
                              {"head_rows", head_rows},
                              {"flops_per_step", flops},
                              {"flop_terms", terms_j},
                              {"gflops", flops / med / 1e9},
                              {"loss", loss},
                              {"steal_fraction", steal}};
    std::ofstream f(o.json);
    if (!(f << j.dump(2) << '\n')) fail("bench", "cannot write {}", o.json);
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  static BenchCli o;
  CLI::App* sub = app.add_subcommand("bench", "Time the training step of a run config (tokens/s, ms/step, GFLOP/s)");
  sub->add_option("config", o.config, "the run's TOML config")->required();
  sub->add_option("overrides", o.overrides, "section.key=value settings that replace the file's");
  sub->add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  sub->add_option("--steps", o.steps, "timed steps (the median is reported; at least 20)")->check(CLI::Range(20, 1 << 30));
  sub->add_option("--json", o.json, "also write the figures to this JSON file");
  sub->add_flag("--print-config", o.print_config, "print the resolved config as TOML and exit (bench_pytorch.py)");
  add_command(sub, [] { return run_bench(o); });
}

}  // namespace saobp::cli
