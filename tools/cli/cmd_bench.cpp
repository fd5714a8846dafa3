// `saobp bench CONFIG [section.key=value ...] [--finetune glue/sst2]`: throughput of the
// training step of the model a run config describes, timed exactly as src/train/trainer.cpp
// runs it (forward, loss, backward per micro-batch, clip_grad_norm, AdamW step, zero_grad).
// Warm-up steps, then the median (and min/max) of the timed steps; tokens/s and the model's
// GFLOP/s under the FLOP count printed term by term. tools/bench_pytorch.py times the same step
// in PyTorch and tools/compare.sh runs both.
//
// Pretraining (the default): the config's objective (BERT masked LM, GPT-2 causal LM) on the
// trainer's own synthetic batches (data/synthetic.h) of the config's vocabulary, batch size and
// sequence length.
//
// --finetune glue/sst2: the fine-tuning step of `saobp finetune`, BERT sequence classification
// (the BERT encoder + bert.pooler.dense + tanh + dropout + classifier: model/heads.h, 2
// labels, cross-entropy on the [CLS] rows). It is literally the fine-tuning task's step: the bench
// builds the task with make_task (data.kind "benchmark", src/finetune/finetune_task.cpp) on a
// temporary folder it writes (write_sst2_folder, train/bench_fixture.h), a WordPiece vocab.txt of
// model.vocab_size tokens and an SST-2 train.tsv/dev.tsv whose sentences are train.seq_len - 2
// random words of it with random labels; the timed step calls task->train_loss (which also
// builds the padded batch, as in the trainer). Every row is
// [CLS] + T-2 words + [SEP] = exactly T tokens, so there is no padding (checked) and tokens/s
// compares with the pretraining bench at the same B and T. SST-2 is single-sentence, so the
// token types are all 0. CONFIG is a pretraining config (configs/bert-mini.toml): its [model]
// and [train] sections (B, T, grad_accum, optimizer) serve both steps; a recipe's lr or epochs
// do not change the cost of a step. The same invocation also times the MLM step of the same
// config at the same B and T (its steps interleaved with the fine-tuning ones, so a slow spell
// of the machine hits both) and prints fine-tuning tokens/s as a ratio of pretraining's.
//
// --inference: the evaluation forward pass instead of the training step (train/inference.h: eval
// mode, no dropout, no gradient; the encoder and the MLM head on the masked rows, or the decoder
// and the LM head on the rows with a target, up to the logits), on the synthetic source's held-out
// batches and the model's initial weights, at the config's batch size (throughput: ms/batch,
// tokens/s) and at B = 1 (latency: ms per sequence), their passes alternating. --json writes
// "mode": "inference" and the figures of each batch size under "batch" and "single", which
// `saobp cost --bench` reads beside the training bench's.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "cli/commands.h"
#include "core/cpu_times.h"
#include "core/fs.h"
#include "core/stats.h"
#include "data/synthetic.h"
#include "model/heads.h"
#include "optim/clip.h"
#include "tensor/device_info.h"
#include "train/bench_fixture.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/flops.h"
#include "train/inference.h"
#include "train/task.h"

namespace saobp::cli {

namespace {

struct BenchCli {
  std::string config;
  std::vector<std::string> overrides;
  std::string finetune;
  bool skip_pretrain = false;
  bool inference = false;
  int warmup = 3, steps = 20;
  bool profile = false;
  std::string json;
  bool print_config = false;
};

// The shares of CPU time others took during the timed `what` (steps or passes), when known.
void print_machine(double steal, double others, const char* what) {
  if (steal >= 0)
    fmt::print("machine: {:.1f}% of CPU time stolen by the hypervisor during the timed {}{}\n", 100 * steal,
               what, steal > 0.05 ? " (a busy host: these times are not representative)" : "");
  if (others >= 0)
    fmt::print("machine: {:.1f}% of CPU time used by other processes during the timed {}{}\n", 100 * others,
               what, others > 0.05 ? " (a busy machine: these times are not representative)" : "");
}

// One training step under test. prepare(s) makes step s's inputs outside the timed region and
// returns the rows its head runs on; run(s) is the timed step and returns its mean loss.
struct StepBench {
  std::string title;
  Head head = Head::mlm;
  double labels = 0;  // Head::classifier: K
  std::function<double(int64_t)> prepare, run;
  std::vector<double> times;
  // On a GPU: the host's wall time of each timed step (until its last launch or wait returned),
  // and the part of it spent waiting for the GPU.
  std::vector<double> host_times, wait_times;
  double loss = 0, head_rows = 0;
  // Filled by report().
  double med = 0, lo = 0, hi = 0, flops = 0;
  std::vector<FlopTerm> terms;
};

// Warm-up then timed steps of every bench, their steps interleaved (s of the first, s of the
// second, ...). Returns the CPU times of the machine at the first and after the last timed step.
// On a GPU a step's time is the GPU's, between CUDA events recorded before and after it (the
// idle gaps while the host prepares launches included), and the host's waits for the GPU are
// counted (cuda::host_waits). With `profile`, the timed steps' kernels are timed one by one.
struct GpuFigures {
  double waits_per_step = 0;
  std::vector<cuda::OpTime> ops;
};
std::pair<CpuTimes, CpuTimes> time_steps(std::vector<StepBench*>& benches, int warmup, int steps,
                                         const Device& device, bool profile, GpuFigures& gpu) {
  CpuTimes cpu0;
  std::unique_ptr<cuda::EventTimer> timer;
  if (device.is_cuda()) timer = std::make_unique<cuda::EventTimer>(device.index);
  uint64_t waits0 = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      cpu0 = read_cpu_times();
      if (timer && profile) cuda::set_profiling(true);
    }
    for (StepBench* b : benches) {
      const double rows = b->prepare(s);
      const auto t0 = std::chrono::steady_clock::now();
      if (timer) timer->start();
      const uint64_t w0 = cuda::host_waits();
      const double ws0 = cuda::host_wait_seconds();
      b->loss = b->run(s);
      if (s >= warmup) waits0 += cuda::host_waits() - w0;
      double dt = 0;
      if (timer) {
        if (s >= warmup) {
          b->host_times.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          b->wait_times.push_back(cuda::host_wait_seconds() - ws0);
        }
        timer->stop();
        dt = timer->seconds();
      } else {
        dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      if (s >= warmup) b->times.push_back(dt), b->head_rows += rows;
    }
  }
  if (timer) {
    gpu.waits_per_step = static_cast<double>(waits0) / std::max<double>(1, steps * benches.size());
    if (profile) {
      gpu.ops = cuda::profile_report();
      cuda::set_profiling(false);
    }
  }
  return {cpu0, read_cpu_times()};
}

// The kernels' GPU time per step, largest first (--profile), then the GEMMs' library calls by
// shape with their FLOP rates (detail entries, part of the gemm ops' time above).
void print_profile(const GpuFigures& gpu, int steps, double step_ms) {
  double total = 0, gemm_ms = 0;
  for (const cuda::OpTime& o : gpu.ops) (o.detail ? gemm_ms : total) += o.ms;
  fmt::print("kernels on the GPU per step (--profile: CUDA events around each; {:.2f} ms of {:.2f} ms):\n",
             total / steps, step_ms);
  for (const cuda::OpTime& o : gpu.ops)
    if (!o.detail)
      fmt::print("  {:<28} {:7.1f} calls {:8.3f} ms {:5.1f}%\n", o.op, static_cast<double>(o.calls) / steps,
                 o.ms / steps, 100 * o.ms / std::max(total, 1e-9));
  if (gemm_ms == 0) return;
  fmt::print("cuBLAS / cuBLASLt calls by shape (KIND DTYPE op(a)op(b) MxNxK[xBATCH]; {:.2f} ms per step):\n",
             gemm_ms / steps);
  for (const cuda::OpTime& o : gpu.ops)
    if (o.detail)
      fmt::print("  {:<40} {:7.1f} calls {:8.3f} ms {:7.1f} TFLOP/s\n", o.op,
                 static_cast<double>(o.calls) / steps, o.ms / steps, o.flops / std::max(o.ms, 1e-9) / 1e9);
}

// clip_grad_norm, the AdamW step at the schedule's lr, zero_grad: the end of every trainer step.
void update(ParamStore& params, AdamW& adam, const Schedule& sched, int64_t step, double grad_clip) {
  const double norm = global_grad_norm(params.all());
  adam.step(lr_at(sched, step), clip_scale(norm, grad_clip));
  params.zero_grad();
}

int64_t count_params(ParamStore& params) {
  int64_t n = 0;
  for (const Var& p : params.all()) n += p.numel();
  return n;
}

void report(StepBench& b, const RunConfig& cfg, int64_t tokens, int warmup) {
  b.head_rows /= static_cast<double>(b.times.size());
  b.med = stats::median(b.times);
  b.lo = *std::min_element(b.times.begin(), b.times.end());
  b.hi = *std::max_element(b.times.begin(), b.times.end());
  b.terms = step_flops(cfg, b.head, static_cast<double>(tokens), b.head_rows, b.labels);
  b.flops = 0;
  const char* rows = b.head == Head::mlm  ? "masked positions, mean over the timed steps"
                     : b.head == Head::lm ? "all positions"
                                          : "the [CLS] rows";
  fmt::print("{}", b.title.empty() ? "" : "== " + b.title + "\n");
  fmt::print(
      "FLOPs per step (forward + backward = 6 x multiply-adds of each GEMM; elementwise ops not counted\n"
      "  except SAOBP's refinement, src/train/flops.h;\n"
      "  tokens = {}, head rows = {:.1f} {}):\n",
      tokens, b.head_rows, rows);
  for (const FlopTerm& t : b.terms) {
    fmt::print("  {:<36} {:<58} = {:.4g}\n", t.name, t.formula, t.flops);
    b.flops += t.flops;
  }
  fmt::print("  {:<36} {:<58} = {:.4g}\n", "total", "", b.flops);
  fmt::print("steps: {} warm-up, {} timed; last loss {:.4f}\n", warmup, b.times.size(), b.loss);
  fmt::print("ms/step: median {:.1f} (min {:.1f}, max {:.1f})\n", 1e3 * b.med, 1e3 * b.lo, 1e3 * b.hi);
  fmt::print("tokens/s: {:.0f} (median step)\n", static_cast<double>(tokens) / b.med);
  if (!b.host_times.empty()) {
    const double wall = stats::median(b.host_times), wait = stats::median(b.wait_times);
    fmt::print("host ms/step: median {:.2f} wall, {:.2f} waiting for the GPU, {:.2f} its own work{}\n",
               1e3 * wall, 1e3 * wait, 1e3 * (wall - wait),
               wall - wait > 0.8 * b.med ? " (the host's pace bounds the step)" : "");
  }
  fmt::print("model GFLOP/s: {:.1f}\n", b.flops / b.med / 1e9);
}

nlohmann::json figures_json(const StepBench& b, int64_t tokens) {
  nlohmann::json terms = nlohmann::json::array();
  for (const FlopTerm& t : b.terms)
    terms.push_back({{"name", t.name}, {"formula", t.formula}, {"flops", t.flops}});
  return {{"steps", b.times.size()},
          {"ms_per_step_median", 1e3 * b.med},
          {"ms_per_step_min", 1e3 * b.lo},
          {"ms_per_step_max", 1e3 * b.hi},
          {"tokens_per_s", static_cast<double>(tokens) / b.med},
          {"head_rows", b.head_rows},
          {"flops_per_step", b.flops},
          {"flop_terms", terms},
          {"gflops", b.flops / b.med / 1e9},
          {"loss", b.loss},
          {"host_ms_per_step", b.host_times.empty() ? 0.0 : 1e3 * stats::median(b.host_times)},
          {"host_wait_ms_per_step", b.wait_times.empty() ? 0.0 : 1e3 * stats::median(b.wait_times)}};
}

// The figures of one batch size of --inference, printed.
void print_inference(const char* what, const InferenceTiming& t) {
  fmt::print("{} (B = {}, {} tokens, head rows {:.1f}):\n", what, t.batch_size, t.tokens, t.head_rows);
  fmt::print("  ms/{}: median {:.2f} (min {:.2f}, max {:.2f})\n", t.batch_size == 1 ? "sequence" : "batch",
             1e3 * t.median, 1e3 * t.min, 1e3 * t.max);
  fmt::print("  tokens/s: {:.0f}, sequences/s: {:.1f} (median pass)\n",
             static_cast<double>(t.tokens) / t.median, static_cast<double>(t.batch_size) / t.median);
  fmt::print("  model GFLOP/s: {:.1f} ({:.4g} FLOPs per pass)\n", t.flops / t.median / 1e9, t.flops);
}

// --inference (see the file's header).
int run_inference_bench(const BenchCli& o, const RunConfig& cfg) {
  const TrainSection& tc = cfg.train;
  const bool bert = cfg.model.family == "bert";
  fmt::print(
      "bench --inference: {} {}, attention {}, T={}, at B={} (throughput) and B=1 (latency), {} OpenMP "
      "threads, f32\n",
      cfg.model.family, cfg.model.preset, variant_name(cfg.model.attention.variant), tc.seq_len,
      tc.batch_size, omp_get_max_threads());
  fmt::print(
      "the evaluation forward pass ({}; eval mode: no dropout, no gradient) on the synthetic source's\n"
      "held-out batches (data.kind '{}' is not read: only the shapes matter), the initial weights of "
      "train.seed{}\n",
      bert ? "encoder, MLM head on the masked rows" : "decoder, LM head on the rows with a target",
      cfg.data.kind,
      cfg.model.attention.skip_sinky_heads
          ? "; model.skip_sinky_heads: the skip rate is the initial weights', not a trained model's"
          : "");
  const CpuTimes cpu0 = read_cpu_times();
  const InferenceBench b = time_inference(cfg, o.warmup, o.steps);
  const CpuTimes cpu1 = read_cpu_times();
  const double steal = steal_fraction(cpu0, cpu1), others = others_fraction(cpu0, cpu1);
  fmt::print("passes: {} warm-up, {} timed at each batch size, alternating\n", o.warmup, o.steps);
  fmt::print(
      "FLOPs per batch (forward = 2 x multiply-adds of each GEMM; elementwise ops not counted except SAOBP's "
      "refinement, src/train/flops.h):\n");
  for (const FlopTerm& t : b.batch.terms)
    fmt::print("  {:<36} {:<58} = {:.4g}\n", t.name, t.formula, t.flops);
  fmt::print("  {:<36} {:<58} = {:.4g}\n", "total", "", b.batch.flops);
  print_inference("throughput", b.batch);
  print_inference("latency", b.single);
  print_machine(steal, others, "passes");
  if (!o.json.empty()) {
    const nlohmann::json j = inference_bench_json(cfg, b, o.warmup, omp_get_max_threads(), steal, others);
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  return 0;
}

int run_bench(const BenchCli& o) {
  const RunConfig cfg = load_config(o.config, o.overrides);
  if (o.print_config) {
    fmt::print("{}", to_toml(cfg));
    return 0;
  }
  // Before the benchmark: a --json that cannot be written fails now, not after it.
  if (!o.json.empty()) check_output_file("bench", "--json", o.json);
  refuse_output_over_inputs(o.json, "--json", {o.config, cfg.data.path, cfg.data.vocab});
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  if (o.inference) return run_inference_bench(o, cfg);
  const TrainSection& tc = cfg.train;
  const bool bert = cfg.model.family == "bert", ft = !o.finetune.empty();
  if (ft && o.finetune != "glue/sst2")
    fail("bench", "--finetune {}: the fine-tuning bench times glue/sst2 (BERT sequence classification)",
         o.finetune);
  if (ft && !bert)
    fail("bench", "--finetune {}: model.family is {}; the fine-tuning bench times a BERT encoder", o.finetune,
         cfg.model.family);
  const Schedule sched = schedule_of(cfg);
  const int64_t tokens = tc.batch_size * tc.seq_len * tc.grad_accum;
  constexpr uint64_t kStream = 100;  // the trainer's training stream

  // The pretraining step (always: alone, or beside the fine-tuning step as its reference).
  // The task's own body and head (make_body, make_lm_head): the step the trainer takes.
  const std::unique_ptr<Body> body = make_body(cfg);
  const std::unique_ptr<LmHead> head = make_lm_head(*body);
  ParamStore& params = body->params();
  AdamW adam(params.all(), adamw_config(cfg));
  std::vector<MlmBatch> mb;
  std::vector<ClmBatch> cb;
  StepBench pre;
  pre.title = ft ? "pretraining step (masked LM, the same config)" : "";
  pre.head = bert ? Head::mlm : Head::lm;
  pre.prepare = [&](int64_t s) {
    // Batches are generated outside the timed region (the trainer's data loading is not the step).
    mb.clear(), cb.clear();
    double rows = 0;
    for (int micro = 0; micro < tc.grad_accum; ++micro) {
      const int64_t index = s * tc.grad_accum + micro;
      if (bert) {
        mb.push_back(synthetic_mlm_batch(tc.batch_size, tc.seq_len, cfg.model.vocab_size, tc.seed, kStream,
                                         index, cfg.data.mlm_probability));
        for (int32_t y : mb.back().labels.to_vector<int32_t>()) rows += y != -100;
      } else {
        cb.push_back(
            synthetic_clm_batch(tc.batch_size, tc.seq_len, cfg.model.vocab_size, tc.seed, kStream, index));
        rows += static_cast<double>(tc.batch_size * tc.seq_len);  // the head runs on every position
      }
    }
    return rows;
  };
  pre.run = [&](int64_t step) {
    double loss_sum = 0;
    std::vector<Tensor> losses;
    for (int micro = 0; micro < tc.grad_accum; ++micro) {
      const uint64_t dstep = static_cast<uint64_t>(step * tc.grad_accum + micro);
      const size_t m = static_cast<size_t>(micro);
      const Tensor& ids = bert ? mb[m].ids : cb[m].ids;
      const Tensor& mask = bert ? mb[m].key_mask : cb[m].key_mask;
      Var l = head->loss(body->hidden(ids, Tensor(), mask, true, dstep), bert ? mb[m].labels : cb[m].targets);
      losses.push_back(l.data());
      scale(l, 1.0 / tc.grad_accum).backward();
    }
    for (double x : Tensor::items(losses)) loss_sum += x;  // read at once, as the trainer does
    update(params, adam, sched, step, tc.grad_clip);
    return loss_sum / tc.grad_accum;
  };

  // The fine-tuning step: the finetune task itself, on a generated SST-2 folder.
  std::unique_ptr<TempDir> tmp;
  std::unique_ptr<Task> task;
  std::unique_ptr<AdamW> ft_adam;
  Tensor last_mask;
  StepBench fine;
  if (ft) {
    tmp = std::make_unique<TempDir>("saobp-bench-finetune");
    write_sst2_folder(tmp->path(), cfg.model.vocab_size, tc.seq_len,
                      tc.batch_size * tc.grad_accum * (o.warmup + o.steps), tc.seed);
    RunConfig fc = cfg;
    fc.data.kind = "benchmark", fc.data.task = o.finetune;
    fc.data.path = tmp->path().string(), fc.data.vocab = tmp->path().string();
    task = make_task(fc);
    ft_adam = std::make_unique<AdamW>(task->params().all(), adamw_config(fc));
    fine.title = fmt::format("fine-tuning step ({}, BertForSequenceClassification)", o.finetune);
    fine.head = Head::classifier;
    fine.labels = 2;
    fine.prepare = [&](int64_t) {
      // The previous step's key mask: every row must be full length (no padding).
      if (last_mask.defined()) {
        const std::vector<uint8_t> m = last_mask.to_vector<uint8_t>();
        if (last_mask.size(0) != tc.batch_size || last_mask.size(1) != tc.seq_len ||
            std::find(m.begin(), m.end(), uint8_t{0}) != m.end())
          fail("bench",
               "--finetune: a batch of shape ({},{}) with padding; expected ({},{}) rows of full length",
               last_mask.size(0), last_mask.size(1), tc.batch_size, tc.seq_len);
      }
      return static_cast<double>(tc.batch_size * tc.grad_accum);
    };
    fine.run = [&](int64_t step) {
      double loss_sum = 0;
      std::vector<Tensor> losses;
      for (int micro = 0; micro < tc.grad_accum; ++micro) {
        const int64_t index = step * tc.grad_accum + micro;
        Var l = task->train_loss(index, static_cast<uint64_t>(index), nullptr, &last_mask);
        losses.push_back(l.data());
        scale(l, 1.0 / tc.grad_accum).backward();
      }
      for (double x : Tensor::items(losses)) loss_sum += x;
      update(task->params(), *ft_adam, sched, step, tc.grad_clip);
      return loss_sum / tc.grad_accum;
    };
  }

  const int64_t pre_params = count_params(params);
  fmt::print(
      "bench: {} {} ({} parameters{}), attention {}, B={} T={} grad_accum={} ({} tokens/step), {} OpenMP "
      "threads, f32\n",
      cfg.model.family, cfg.model.preset, pre_params,
      ft ? fmt::format(" with the MLM head, {} with the classification head", count_params(task->params()))
         : "",
      variant_name(cfg.model.attention.variant), tc.batch_size, tc.seq_len, tc.grad_accum, tokens,
      omp_get_max_threads());
  if (ft)
    fmt::print(
        "fine-tuning: the {} task's own step (make_task, data.kind \"benchmark\") on generated rows of "
        "exactly "
        "T = {} tokens ([CLS], {} random words, [SEP]; no padding; token types 0), random labels{}\n",
        o.finetune, tc.seq_len, tc.seq_len - 2,
        o.skip_pretrain ? "" : "; timed steps interleaved with the pretraining step's at the same B and T");
  fmt::print(
      "{}batches: the synthetic source's (data.kind '{}' is not read: only the shapes matter here){}\n",
      ft ? "pretraining " : "", cfg.data.kind,
      cfg.model.attention.variant == AttnVariant::original ? "" : "; FLOPs below count standard attention");

  std::vector<StepBench*> benches;
  if (ft) benches.push_back(&fine);
  const bool with_pre = !ft || !o.skip_pretrain;
  if (with_pre) benches.push_back(&pre);
  const Device device = run_device(cfg);
  GpuFigures gpu;
  const auto [cpu0, cpu1] = time_steps(benches, o.warmup, o.steps, device, o.profile, gpu);
  const double steal = steal_fraction(cpu0, cpu1), others = others_fraction(cpu0, cpu1);
  for (StepBench* b : benches) report(*b, cfg, tokens, o.warmup);
  const double ratio =
      ft && with_pre ? pre.med / fine.med : 0;  // same tokens per step: the ratio of tokens/s
  if (ft && with_pre)
    fmt::print("fine-tuning / pretraining tokens/s: {:.3f} ({:.0f} / {:.0f})\n", ratio,
               static_cast<double>(tokens) / fine.med, static_cast<double>(tokens) / pre.med);
  print_machine(steal, others, "steps");
  if (device.is_cuda()) {
    fmt::print(
        "GPU: {}, train.precision {}, peak memory of the run's tensors {:.3f} GiB; the host waited for the "
        "GPU {:.1f} times a step; step times from CUDA events\n",
        cuda::device_name(device.index), tc.precision,
        static_cast<double>(cuda::memory_peak_bytes(device.index)) / (1 << 30), gpu.waits_per_step);
    const StepBench& main = ft ? fine : pre;
    const std::string name = cuda::device_name(device.index);
    if (const std::optional<DevicePeak> peak = device_peak(name))
      fmt::print(
          "model FLOP utilization: {:.1f}% of the {}'s dense bf16 peak ({:.1f} TFLOP/s), {:.1f}% of its f32 "
          "peak ({:.1f} TFLOP/s)\n",
          100 * main.flops / main.med / peak->bf16_dense, peak->model, peak->bf16_dense / 1e12,
          100 * main.flops / main.med / peak->f32, peak->f32 / 1e12);
    else
      fmt::print("model FLOP utilization: no peak known for {} (src/train/flops.h device_peak)\n", name);
    if (o.profile) print_profile(gpu, o.steps, 1e3 * main.med);
  } else {
    fmt::print("peak memory of the run's tensors {:.3f} GiB (host storage, src/tensor/tensor.h)\n",
               static_cast<double>(host_tensor_peak_bytes()) / (1 << 30));
  }
  if (!o.json.empty()) {
    const StepBench& main = ft ? fine : pre;
    nlohmann::json j = {{"tool", "saobp"},
                        {"mode", ft ? "finetune" : "pretrain"},
                        {"family", cfg.model.family},
                        {"preset", cfg.model.preset},
                        {"attention", variant_name(cfg.model.attention.variant)},
                        {"batch_size", tc.batch_size},
                        {"seq_len", tc.seq_len},
                        {"grad_accum", tc.grad_accum},
                        {"precision", tc.precision},
                        {"tokens_per_step", tokens},
                        {"threads", omp_get_max_threads()},
                        {"warmup", o.warmup},
                        {"steal_fraction", steal},
                        {"others_fraction", others}};
    j.update(figures_json(main, tokens));
    j["device"] = device.str();
    if (device.is_cuda()) {
      j["device_name"] = cuda::device_name(device.index);
      j["host_waits_per_step"] = gpu.waits_per_step;
      if (const std::optional<DevicePeak> peak = device_peak(cuda::device_name(device.index))) {
        j["mfu_bf16"] = main.flops / main.med / peak->bf16_dense;  // fractions of the peaks
        j["mfu_f32"] = main.flops / main.med / peak->f32;
      }
    }
    // The most memory the run's tensors held at once: on a GPU the caching allocator's live
    // blocks (also as peak_device_memory_gib, null on the CPU), on the CPU the host storage.
    const double peak_bytes = static_cast<double>(device.is_cuda() ? cuda::memory_peak_bytes(device.index)
                                                                   : host_tensor_peak_bytes());
    j["peak_tensor_memory_gib"] = peak_bytes / (1 << 30);
    j["peak_device_memory_gib"] =
        device.is_cuda() ? nlohmann::json(peak_bytes / (1 << 30)) : nlohmann::json();
    if (ft) j["task"] = o.finetune;
    if (ft && with_pre) {
      j["pretrain"] = figures_json(pre, tokens);
      j["finetune_over_pretrain"] = ratio;
    }
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  static BenchCli o;
  CLI::App* sub =
      app.add_subcommand("bench",
                         "Time the training step of a run config (tokens/s, ms/step, GFLOP/s), or with "
                         "--inference its evaluation forward pass (ms/batch, tokens/s, latency)");
  sub->add_option("config", o.config, "the run's TOML config")->required();
  sub->add_option("overrides", o.overrides, "section.key=value settings that replace the file's");
  CLI::Option* finetune = sub->add_option(
      "--finetune", o.finetune,
      "time the fine-tuning step of this task (glue/sst2) on the config's model and B, T, next to its "
      "pretraining step");
  CLI::Option* skip = sub->add_flag(
      "--skip-pretrain", o.skip_pretrain,
      "with --finetune: time only the fine-tuning step (no pretraining reference; for profiling)");
  sub->add_flag("--inference", o.inference,
                "time the evaluation forward pass instead (no gradient, no dropout) at the config's B "
                "(ms/batch, tokens/s) and at B = 1 (latency)")
      ->excludes(finetune)
      ->excludes(skip);
  sub->add_option("--warmup", o.warmup, "untimed steps first")->check(at_least(0));
  sub->add_option(
         "--steps", o.steps,
         "timed steps, or with --inference timed passes at each batch size (the median is reported; at "
         "least 20)")
      ->check(in_range(20, 1 << 30));
  sub->add_option("--json", o.json, "also write the figures to this JSON file")->check(non_empty_path());
  sub->add_flag("--profile", o.profile,
                "on a GPU, also time each kernel of the timed steps (CUDA events around each call) and "
                "print their GPU time per step, largest first, then the GEMMs' cuBLAS and cuBLASLt calls by "
                "shape with their TFLOP/s");
  sub->add_flag("--print-config", o.print_config,
                "print the resolved config as TOML and exit (bench_pytorch.py)");
  add_command(sub, [] { return run_bench(o); });
}

}  // namespace saobp::cli
