#include "train/trainer.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "attention/diagnostics.h"
#include "attention/metrics.h"
#include "autograd/ops.h"
#include "core/cpu_times.h"
#include "core/fs.h"
#include "dist/comm.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/clip.h"
#include "optim/grad_sum.h"
#include "tensor/device_info.h"
#include "train/checkpoint.h"
#include "train/pretrained.h"
#include "train/task.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

// The fraction of (sample, head) pairs a layer skipped: keep is (B,NH), 1 = used.
double skip_rate(const Tensor& keep) {
  const std::vector<double> k = keep.to(DType::f64).to_vector<double>();
  double used = 0;
  for (double x : k) used += x;
  return k.empty() ? 0.0 : 1.0 - used / static_cast<double>(k.size());
}

// Per-layer diagnostics of the fixed held-out probe batch (trends over training): mean entropy
// (eq. 2), GTD (eq. 13), indirect entropy (eq. 14) and cross-layer GTD (the GTD of the product of
// the layers' head-mean maps up to layer l, appendix B: the paper's Table 6 correlates it beside
// the single-layer GTD) of B, and entropy and GTD of A.
struct ProbeDiagnostics {
  std::vector<double> entropy, gtd, indirect_entropy, cross_gtd, entropy_softmax, gtd_softmax;
};
ProbeDiagnostics probe_diagnostics(Task& task, const RunConfig& cfg) {
  // The diagnostics read the T×T maps of the probe batch: a run on the tiled kernels (model.tiled,
  // chosen when those do not fit) reports none; `saobp analyze` measures them where they fit.
  if (cfg.model.attention.tiled) return {};
  std::vector<AttentionMaps> maps;
  Tensor mask;
  task.probe(maps, mask);
  DiagnosticsOptions o;
  o.graph_metrics = false;  // CC and BC belong to `saobp analyze`
  o.causal = cfg.model.family == "gpt2";
  DiagnosticsAccumulator acc(o);
  acc.add(maps, mask);
  const DiagnosticsReport r = acc.report();
  ProbeDiagnostics d;
  for (const HeadDiagnostics& l : r.probs.layers)
    d.entropy.push_back(l.entropy), d.gtd.push_back(l.gtd), d.indirect_entropy.push_back(l.indirect_entropy);
  for (const HeadDiagnostics& l : r.attn.layers)
    d.entropy_softmax.push_back(l.entropy), d.gtd_softmax.push_back(l.gtd);
  d.cross_gtd = r.probs.cross_gtd;
  return d;
}

std::string progress_bar(int64_t done, int64_t total, double secs_per_step) {
  const int width = 30, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  const double eta = secs_per_step * static_cast<double>(total - done);
  return fmt::format("\r[{}{}] {}/{} ETA {:02d}:{:02d}  ", std::string(static_cast<size_t>(filled), '='),
                     std::string(static_cast<size_t>(width - filled), ' '), done, total,
                     static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
}

// The time left as mm:ss, or h:mm:ss from an hour on, for the log line.
std::string eta_text(double secs) {
  const int64_t s = std::max<int64_t>(0, std::llround(secs));
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02d}:{:02d}", s / 60, s % 60);
}

// The entries of a run directory that a new run may find there: the data it reuses when its key
// still matches (data_setup.h), not the output of a run.
bool reusable(const fs::path& entry) {
  const std::string name = entry.filename().string();
  return name == "cache" || name == "tokenizer";
}

// --resume DIR whose config hash differs from this run's: allowed when the checkpoint's own
// config.toml (covered by its checksums) hashes to the saved hash and differs from this run's in
// keys that leave the results unchanged (config.h), train.run_dir only when the checkpoint lies
// inside the new folder (a moved or copied run, whose metrics.jsonl goes on there, not in a folder
// of another run); then returns the differences, to be said. Otherwise refuses, naming every
// key that differs with both values.
std::vector<std::string> accept_resumed_config(const std::string& dir, const RunConfig& now,
                                               uint64_t saved_hash, uint64_t hash) {
  const std::string path = (fs::path(dir) / "config.toml").string();
  const std::string refusal = fmt::format(
      "--resume {}: the checkpoint was trained with a different config (hash {:016x}, this run {:016x})", dir,
      saved_hash, hash);
  const std::string advice = "; use --init to start a new run from its weights";
  RunConfig saved;
  try {
    saved = load_config(path);
  } catch (const Error& e) {
    fail("train", "{}, and its {} does not load ({}){}", refusal, path, e.what(), advice);
  }
  if (config_hash(saved) != saved_hash)
    fail("train", "{}, and its {} does not hash to it: the checkpoint is damaged{}", refusal, path, advice);
  std::vector<std::string> changed, free;
  for (const ConfigDifference& d : hashed_differences(saved, now)) {
    const bool ok =
        leaves_results_unchanged(d.key) && (d.key != "train.run_dir" || lies_within(dir, now.train.run_dir));
    (ok ? free : changed)
        .push_back(fmt::format("{} = {} in the checkpoint, {} in this run", d.key, d.a, d.b));
  }
  if (!changed.empty()) fail("train", "{}: {}{}", refusal, fmt::join(changed, "; "), advice);
  for (std::string& f : free) f += " (it does not change what the run computes)";
  return free;
}

// One process trains into a run folder at a time: an exclusive flock on the folder itself, taken
// before anything in it is recovered, removed or written, and released when the process ends,
// however it ends (the kernel drops it). A second run, resumption or --overwrite into a folder in
// use is refused instead of deleting or interleaving the live run's files.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) fail("train", "train.run_dir {}: cannot open it ({})", dir, std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      if (err == EWOULDBLOCK)
        fail("train",
             "train.run_dir {} is in use by another saobp process (a run, a resumption or an --overwrite of "
             "it): wait for that one to end, or choose another train.run_dir",
             dir);
      fail("train", "train.run_dir {}: cannot lock it ({})", dir, std::strerror(err));
    }
  }
  ~RunDirLock() { ::close(fd_); }
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_;
};

// "a" or "a and N more" for a refusal.
std::string first_of(const std::vector<fs::path>& paths) {
  return paths.front().filename().string() +
         (paths.size() > 1 ? fmt::format(" and {} more", paths.size() - 1) : "");
}

// Before a new run writes into run_dir: it must hold nothing but the reusable data (cache/,
// tokenizer/). `overwrite` replaces an earlier run: it removes what a run writes there
// (is_run_output) and nothing else, so a user's own files in the folder stay; it refuses a folder
// that holds no run (a folder of other files is not a run to replace) and an input of this run
// (--init, data.path, data.vocab) that lies inside what it would remove.
void claim_run_dir(const RunConfig& cfg, bool overwrite, const std::string& init_dir) {
  const std::string& run_dir = cfg.train.run_dir;
  std::error_code ec;
  if (fs::exists(run_dir, ec) && !fs::is_directory(run_dir, ec))
    fail("train", "train.run_dir {} is not a directory", run_dir);
  if (!fs::is_directory(run_dir, ec)) {
    // A folder to be made: its nearest existing ancestor must be one (not a file), checked before
    // the run builds a vocabulary into it.
    for (fs::path up = fs::absolute(run_dir).parent_path(); !up.empty(); up = up.parent_path()) {
      if (fs::exists(up, ec)) {
        if (!fs::is_directory(up, ec))
          fail("train", "train.run_dir {} cannot be made: {} is not a directory", run_dir, up.string());
        break;
      }
      if (up == up.root_path()) break;
    }
    return;
  }
  std::vector<fs::path> run, other;
  for (const auto& e : fs::directory_iterator(run_dir))
    if (!reusable(e.path())) (is_run_output(e.path().filename().string()) ? run : other).push_back(e.path());
  std::sort(run.begin(), run.end());
  std::sort(other.begin(), other.end());
  if (run.empty() && other.empty()) return;
  if (run.empty())
    fail("train",
         "train.run_dir {} holds no run but other files ({}){}; write the run to an empty or new folder",
         run_dir, first_of(other), overwrite ? ", which --overwrite leaves alone" : "");
  if (!overwrite)
    fail("train",
         "train.run_dir {} already holds a run ({}); continue it with --resume, or replace it with "
         "--overwrite",
         run_dir, first_of(run));
  const std::pair<std::string, std::string> inputs[] = {
      {"--init", init_dir}, {"data.path", cfg.data.path}, {"data.vocab", cfg.data.vocab}};
  for (const auto& [what, path] : inputs)
    for (const fs::path& p : run)
      if (!path.empty() && lies_within(path, p.string()))
        fail(
            "train",
            "{} {} lies inside {}, a run's output in train.run_dir {}, which --overwrite would delete: write "
            "the new run to another train.run_dir",
            what, path, p.string(), run_dir);
  for (const fs::path& p : run) fs::remove_all(p);
  sync_directory(run_dir);
}

}  // namespace

TrainSummary train(const RunConfig& given, const TrainOptions& given_opt) {
  if (given.train.threads > 0) omp_set_num_threads(given.train.threads);
  TrainOptions opt = given_opt;
  // Under mpirun, N ranks each take given.train.grad_accum micro-batches of a step: the run is
  // one process with grad_accum · N (grad_sum.h), which `cfg` describes. Rank 0 alone prepares
  // the run folder (recovers interrupted saves, claims the folder, builds what the data needs:
  // vocabulary, token cache) while the others wait, then they read it.
  const int ranks = dist::size(), rank = dist::rank();
  const bool root = rank == 0;
  const int64_t per_rank = given.train.grad_accum;
  auto say = [&](const std::string& line) {
    if (opt.quiet || !root) return;
    fmt::print("{}{}\n", opt.progress && ::isatty(1) ? "\r" : "", line);
  };
  std::unique_ptr<RunDirLock> lock;  // rank 0's, from the first moment the folder exists
  std::error_code ec;
  if (root && fs::is_directory(given.train.run_dir, ec))
    lock = std::make_unique<RunDirLock>(given.train.run_dir);
  if (root) {
    for (const std::string& note : recover_interrupted_saves(given.train.run_dir)) say("recovery: " + note);
    if (!opt.resume_dir.empty()) {
      const fs::path parent = fs::path(opt.resume_dir).parent_path();
      if (!parent.empty() && fs::path(given.train.run_dir) != parent)
        for (const std::string& note : recover_interrupted_saves(parent.string())) say("recovery: " + note);
    } else if (!opt.resume_latest) {
      claim_run_dir(given, opt.overwrite, opt.init_dir);
    }
  }
  if (ranks > 1) dist::barrier();
  if (opt.resume_latest && opt.resume_dir.empty()) {
    std::vector<std::string> notes;
    opt.resume_dir = latest_checkpoint(given.train.run_dir, &notes);
    for (const std::string& note : notes) say("resume: " + note);
    if (opt.resume_dir.empty())
      fail("train",
           "--resume: train.run_dir {} holds no complete checkpoint (final or checkpoint-N) to continue",
           given.train.run_dir);
    say("resume: continuing from " + opt.resume_dir);
  }
  std::unique_ptr<Task> task;
  for (int turn = 0; turn < 2; ++turn) {
    if ((turn == 0) == root) {
      task = make_task(given);
      task->prepare_training();
    }
    if (ranks > 1) dist::barrier();
  }
  // train.epochs becomes a step count once the task knows its training set; the config as
  // given (epochs, not steps) is what checkpoints hold and the hash covers.
  const int64_t batches_per_epoch = task->train_batches_per_epoch();
  RunConfig global = given;
  global.train.grad_accum = static_cast<int>(per_rank * ranks);
  const RunConfig cfg = resolve_epochs(global, batches_per_epoch);
  const TrainSection& tc = cfg.train;
  ParamStore& params = task->params();
  AdamW adam(params.all(), adamw_config(cfg));
  GradSum grads(params.all(), tc.reduce, tc.bucket_mb);
  const Schedule sched = schedule_of(cfg);
  const uint64_t hash = config_hash(given);
  TrainerState state{0, 0, hash, tc.seed, ranks, given.train.grad_accum, tc.grad_accum};
  const bool tty = opt.progress && ::isatty(1);
  TrainSummary out;
  if (root) {
    fs::create_directories(tc.run_dir);
    if (!lock) lock = std::make_unique<RunDirLock>(tc.run_dir);
  }
  if (!opt.init_dir.empty()) {
    const InitReport report = init_from_pretrained(opt.init_dir, params, task->head_prefixes());
    out.init_report = report.to_json();
    if (root)
      write_file_atomic((fs::path(tc.run_dir) / "init_report.json").string(), out.init_report.dump(2) + "\n");
    say(report.summary());
  }
  if (ranks > 1)
    say(fmt::format("{} ranks x {} micro-batches of {}: {} sequences per step, gradients summed {}{}", ranks,
                    per_rank, tc.batch_size, tc.batch_size * tc.grad_accum, tc.reduce,
                    grads.overlaps() ? fmt::format(" ({} bucket{}, overlapping the backward)",
                                                   grads.buckets(), grads.buckets() == 1 ? "" : "s")
                                     : ""));
  if (!opt.resume_dir.empty()) {
    load_weights(opt.resume_dir, params);
    state = load_training_state(opt.resume_dir, adam, tc.max_steps, tc.grad_accum);
    if (state.config_hash != hash) {
      for (const std::string& note : accept_resumed_config(opt.resume_dir, given, state.config_hash, hash))
        say("resume: " + note);
      state.config_hash = hash;  // the checkpoints of this run carry its config.toml and hash
    }
    const int64_t saved = int64_t{state.ranks} * state.grad_accum;
    if (saved != tc.grad_accum)
      say(fmt::format(
          "--resume {}: the global batch changed: the checkpoint took {} micro-batches per step ({} "
          "ranks x grad_accum {}), this run takes {} ({} x {}); the steps from here sum a different "
          "batch than the uninterrupted run",
          opt.resume_dir, saved, state.ranks, state.grad_accum, tc.grad_accum, ranks, per_rank));
    state.ranks = ranks, state.grad_accum = given.train.grad_accum;
    state.max_batches_per_step = std::max<int64_t>(state.max_batches_per_step, tc.grad_accum);
  }
  if (given.train.epochs > 0)
    say(fmt::format("{} epochs of {} batches: {} steps, {} of warmup", given.train.epochs, batches_per_epoch,
                    tc.max_steps, tc.warmup_steps));
  // Logs, metrics and checkpoints come from rank 0; every rank holds the same weights.
  std::ofstream metrics;
  if (root) {
    metrics.open(fs::path(tc.run_dir) / "metrics.jsonl",
                 opt.resume_dir.empty() ? std::ios::trunc : std::ios::app);
    if (!metrics) fail("train", "cannot write {}/metrics.jsonl", tc.run_dir);
  }
  std::string last_good = opt.resume_dir.empty() ? "none" : opt.resume_dir;
  auto save = [&](const std::string& name) {
    const std::string dir = (fs::path(tc.run_dir) / name).string();
    dist::barrier();
    if (root)
      save_checkpoint(dir, {&params, &adam, state, task->hf_config(), to_toml(given), task->tokenizer()});
    last_good = dir;
    return dir;
  };
  // The epoch that ends with update `step` (ceil(e · batches / grad_accum) == step), or 0.
  auto epoch_ending_at = [&](int64_t step) -> int64_t {
    if (!tc.eval_each_epoch || batches_per_epoch <= 0) return 0;
    const int64_t e = step * tc.grad_accum / batches_per_epoch;
    return e >= 1 && (e * batches_per_epoch + tc.grad_accum - 1) / tc.grad_accum == step ? e : 0;
  };

  const int64_t tokens_per_step = tc.batch_size * tc.seq_len * tc.grad_accum;
  const Device device = run_device(cfg);
  double avg_secs = 0;
  while (state.step < tc.max_steps) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t step = state.step;
    const double lr = lr_at(sched, step);
    const bool log_now = root && tc.log_every > 0 && ((step + 1) % tc.log_every == 0 || step == 0);
    std::vector<AttentionMaps> maps;
    Tensor mask_for_maps;
    // Micro-batch `micro` of the step is the training batch data_position + micro with dropout
    // keys of step · grad_accum + micro (grad_accum here counts every rank's micro-batches).
    // The loss and the regularizer's penalty of each micro-batch stay on the model's device until
    // the backward passes are queued, then are read at once: on a GPU the host waits for it here,
    // and once more for the gradient norm (global_grad_norm), two waits a step whatever grad_accum
    // and the model's depth (docs/performance.md; the [cuda] test of host waits counts them).
    std::vector<Tensor> losses, penalties;
    for (int64_t micro = rank * per_rank; micro < (rank + 1) * per_rank; ++micro) {
      // The maps are T×T per head: a run on the tiled kernels (model.tiled) logs no entropies.
      const bool keep = log_now && micro == 0 && !cfg.model.attention.tiled;
      Var loss =
          task->train_loss(state.data_position + micro, static_cast<uint64_t>(step * tc.grad_accum + micro),
                           keep ? &maps : nullptr, keep ? &mask_for_maps : nullptr);
      losses.push_back(loss.data());
      penalties.push_back(task->regularizer().last_penalty());
      // Under fast with several ranks the rank's last backward hands each parameter's final
      // gradient to the sum as it goes, which starts the buckets' all-reduce during the backward.
      const Var scaled = scale(loss, 1.0 / tc.grad_accum);
      if (grads.overlaps() && micro + 1 == (rank + 1) * per_rank) {
        scaled.backward(Tensor(), [&grads](VarImpl& leaf) { grads.ready(leaf); });
      } else {
        scaled.backward();
        grads.take();
      }
    }
    state.data_position += tc.grad_accum;
    losses.insert(losses.end(), penalties.begin(), penalties.end());  // one read: losses, then penalties
    const std::vector<double> read = Tensor::items(losses);
    const auto half = read.begin() + static_cast<std::ptrdiff_t>(penalties.size());
    const std::vector<double> my_losses(read.begin(), half), my_penalties(half, read.end());
    // The gradient sum across ranks, timed: the transfer and the wait for the slowest rank.
    const auto t_comm = std::chrono::steady_clock::now();
    grads.finish();
    double loss_sum = 0;
    for (double l : dist::allgather(my_losses)) loss_sum += l;  // in micro-batch order
    double penalty = 0;
    for (double x : dist::allgather(my_penalties)) penalty += x;
    penalty /= static_cast<double>(tc.grad_accum);
    const double comm_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_comm).count();
    const double loss = loss_sum / tc.grad_accum;
    const double norm = global_grad_norm(params.all());
    if (!std::isfinite(loss) || !std::isfinite(norm))
      fail("train",
           "step {}: the loss is {} and the gradient norm {}; stopping. The last good checkpoint is {}", step,
           loss, norm, last_good);
    adam.step(lr, clip_scale(norm, tc.grad_clip));
    params.zero_grad();
    state.step = step + 1;
    out.losses.push_back(loss);
    out.last_loss = loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    avg_secs = step == 0 ? secs : 0.9 * avg_secs + 0.1 * secs;
    if (log_now) {
      nlohmann::json line = {{"step", state.step},
                             {"loss", loss},
                             {"lr", lr},
                             {"grad_norm", norm},
                             {"tokens_per_s", tokens_per_step / secs},
                             {"ms_per_step", 1e3 * secs},
                             {"reg_penalty", penalty}};
      if (!maps.empty()) {
        line["entropy_first_layer"] = mean_attention_entropy(maps.front().probs, mask_for_maps);
        line["entropy_last_layer"] = mean_attention_entropy(maps.back().probs, mask_for_maps);
      }
      if (ranks > 1) line["comm_ms_per_step"] = 1e3 * comm_secs;
      // The most memory held so far, and per token of a micro-batch (what the activations scale
      // with): on a GPU the bytes of live tensors at once; on the CPU the same of the host's
      // tensor storage, and the process's resident peak.
      const double micro_tokens = static_cast<double>(tc.batch_size * tc.seq_len);
      if (device.is_cuda()) {
        const double peak = static_cast<double>(cuda::memory_peak_bytes(device.index));
        line["peak_device_memory_gib"] = peak / (1 << 30);
        line["peak_device_memory_mib_per_token"] = peak / (1 << 20) / micro_tokens;
      } else {
        const double peak = static_cast<double>(host_tensor_peak_bytes());
        line["peak_tensor_memory_gib"] = peak / (1 << 30);
        line["peak_tensor_memory_mib_per_token"] = peak / (1 << 20) / micro_tokens;
        if (const double rss = peak_rss_bytes(); rss > 0) {
          line["peak_rss_gib"] = rss / (1 << 30);
          line["peak_rss_mib_per_token"] = rss / (1 << 20) / micro_tokens;
        }
      }
      if (grads.overlaps()) line["buckets_overlapped"] = grads.overlapped();
      std::string extra;  // the regularizer's penalty and the head skip's rates, when on
      if (task->regularizer().on()) extra = fmt::format(" | reg penalty {:.4g}", penalty);
      if (!maps.empty() &&
          maps.front().keep.defined()) {  // head skip on: the fraction of (sample, head) skipped
        std::vector<double> rates;
        for (const AttentionMaps& m : maps) rates.push_back(skip_rate(m.keep));
        line["skip_rate"] = rates;
        extra += fmt::format(" | skipped {:.3f}", fmt::join(rates, "/"));
      }
      const std::string entropy =
          maps.empty()
              ? ""
              : fmt::format(" | entropy L0 {:.3f} L{} {:.3f}", line["entropy_first_layer"].get<double>(),
                            maps.size() - 1, line["entropy_last_layer"].get<double>());
      say(fmt::format(
          "step {:6d} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:7.0f} tok/s | {:7.1f} ms/step | "
          "ETA {}{}{}",
          state.step, loss, lr, norm, tokens_per_step / secs, 1e3 * secs,
          eta_text(avg_secs * static_cast<double>(tc.max_steps - state.step)), entropy, extra));
      metrics << line.dump() << '\n';
      metrics.flush();
    }
    const int64_t epoch = epoch_ending_at(state.step);
    // Evaluation runs on rank 0 alone; the other ranks go on and wait for its gradients.
    if (root && ((tc.eval_every > 0 && state.step % tc.eval_every == 0) || epoch > 0)) {
      const EvalResult e = task->evaluate();
      const ProbeDiagnostics d = probe_diagnostics(*task, cfg);
      say(fmt::format(
          "eval at step {}{}: loss {:.4f} | accuracy {:.4f} | perplexity {:.2f} | GTD per layer {:.3f}{}",
          state.step, epoch > 0 ? fmt::format(" (epoch {})", epoch) : "", e.loss, e.accuracy, e.perplexity,
          fmt::join(d.gtd, " "), e.metrics.is_null() ? "" : " | " + e.metrics.dump()));
      nlohmann::json line = {{"step", state.step},
                             {"eval_loss", e.loss},
                             {"eval_accuracy", e.accuracy},
                             {"eval_perplexity", e.perplexity},
                             {"eval_entropy", d.entropy},
                             {"eval_gtd", d.gtd},
                             {"eval_indirect_entropy", d.indirect_entropy},
                             {"eval_cross_gtd", d.cross_gtd},
                             {"eval_entropy_softmax", d.entropy_softmax},
                             {"eval_gtd_softmax", d.gtd_softmax}};
      if (epoch > 0) line["epoch"] = epoch;
      if (!e.metrics.is_null()) line["eval_metrics"] = e.metrics;
      out.evals.push_back(line);
      metrics << line.dump() << '\n';
      metrics.flush();
    }
    if (tc.save_every > 0 && state.step % tc.save_every == 0 && state.step < tc.max_steps)
      save(fmt::format("checkpoint-{}", state.step));
    if (tty) fmt::print("{}", progress_bar(state.step, tc.max_steps, avg_secs)), std::fflush(stdout);
  }
  if (tty) fmt::print("\n");
  out.steps = state.step;
  out.final_checkpoint = save("final");
  say(fmt::format("saved {}", out.final_checkpoint));
  if (root) out.final_eval = task->final_evaluation(out.final_checkpoint, !opt.quiet);
  return out;
}

EvalResult evaluate_checkpoint(const std::string& given_dir, const std::vector<std::string>& overrides,
                               bool print) {
  const std::string dir = readable_checkpoint(given_dir);
  verify_checksums(dir, {"optimizer.safetensors", "model.safetensors"});  // load_weights checks that one
  RunConfig cfg = load_config((fs::path(dir) / "config.toml").string(), overrides);
  // A corpus run's checkpoint carries its tokenizer: evaluate with that one.
  use_checkpoint_tokenizer(dir, !cfg.data.vocab.empty(), cfg, "eval");
  const std::unique_ptr<Task> task = make_task(cfg);
  check_checkpoint_config(dir, task->hf_config(), task->tokenizer());
  load_weights(dir, task->params());
  const EvalResult r = task->evaluate();
  if (print)
    fmt::print("{}: loss {:.4f} | accuracy {:.4f} | perplexity {:.3f} over {} predictions\n", dir, r.loss,
               r.accuracy, r.perplexity, r.predictions);
  if (print) task->final_evaluation("", true);  // printed only: nothing is written into the checkpoint
  return r;
}

}  // namespace saobp
