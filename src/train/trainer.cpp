#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attention/metrics.h"
#include "autograd/ops.h"
#include "data/synthetic.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/clip.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

// Data streams of the synthetic source: training and validation never share sequences.
constexpr uint64_t kTrainStream = 100, kValidStream = 200;

void require_supported(const RunConfig& cfg) {
  if (cfg.model.family != "bert")
    fail("train", "model.family '{}': this build trains the bert family (the decoder trainer is not built yet)",
         cfg.model.family);
  if (cfg.data.kind != "synthetic")
    fail("train", "data.kind '{}': this build has only the synthetic source (corpus loaders are not built yet)",
         cfg.data.kind);
  if (Device::parse(cfg.train.device) != Device::cpu())
    fail("train", "train.device '{}': the trainer runs on the CPU in this build", cfg.train.device);
}

nlohmann::json hf_config(const RunConfig& cfg) {
  const ModelSection& m = cfg.model;
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", m.vocab_size},
          {"hidden_size", m.hidden},
          {"num_hidden_layers", m.layers},
          {"num_attention_heads", m.heads},
          {"intermediate_size", m.intermediate},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", m.dropout},
          {"attention_probs_dropout_prob", 0.0},
          {"max_position_embeddings", m.max_positions},
          {"type_vocab_size", 2},
          {"initializer_range", 0.02},
          {"layer_norm_eps", 1e-12},
          {"pad_token_id", kPad},
          {"position_embedding_type", "absolute"},
          {"torch_dtype", "float32"},
          {"saobp_attention", variant_name(m.attention)},
          {"saobp_lambda", m.lambda},
          {"saobp_layer_lambdas", m.layer_lambdas},
          {"saobp_learnable_lambda", m.learnable_lambda},
          {"saobp_bp_steps", m.bp_steps},
          {"saobp_positions", m.positions}};
}

EvalResult evaluate_model(BertForMaskedLM& model, const RunConfig& cfg) {
  NoGradGuard ng;
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < cfg.train.eval_batches; ++i) {
    const MlmBatch b = synthetic_mlm_batch(cfg.train.batch_size, cfg.train.seq_len, cfg.model.vocab_size,
                                           cfg.train.seed, kValidStream, i, cfg.data.mlm_probability);
    std::vector<int32_t> pos, tgt;
    const std::vector<int32_t> lab = b.labels.to_vector<int32_t>();
    for (size_t k = 0; k < lab.size(); ++k)
      if (lab[k] != -100) pos.push_back(static_cast<int32_t>(k)), tgt.push_back(lab[k]);
    if (pos.empty()) continue;
    const int64_t n = static_cast<int64_t>(pos.size());
    Var logits = model.mlm_logits(model.encode(b.ids, Tensor(), b.key_mask, false, 0), Tensor::from_vector(pos, {n}));
    loss_sum += cross_entropy(logits, Tensor::from_vector(tgt, {n})).data().item() * static_cast<double>(n);
    const std::vector<float> l = logits.data().to_vector<float>();
    const int64_t V = logits.size(1);
    for (int64_t k = 0; k < n; ++k) {
      const float* row = l.data() + k * V;
      correct += std::max_element(row, row + V) - row == tgt[static_cast<size_t>(k)];
    }
    r.predictions += n;
  }
  if (r.predictions) {
    r.loss = loss_sum / static_cast<double>(r.predictions);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.predictions);
    r.perplexity = std::exp(r.loss);
  }
  return r;
}

std::string progress_bar(int64_t done, int64_t total, double secs_per_step) {
  const int width = 30, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  const double eta = secs_per_step * static_cast<double>(total - done);
  return fmt::format("\r[{}{}] {}/{} ETA {:02d}:{:02d}  ", std::string(static_cast<size_t>(filled), '='),
                     std::string(static_cast<size_t>(width - filled), ' '), done, total, static_cast<int>(eta) / 60,
                     static_cast<int>(eta) % 60);
}

}  // namespace

TrainSummary train(const RunConfig& cfg, const TrainOptions& opt) {
  require_supported(cfg);
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  const TrainSection& tc = cfg.train;
  BertForMaskedLM model(encoder_config(cfg), tc.seed);
  AdamW adam(model.params().all(), adamw_config(cfg));
  const Schedule sched = schedule_of(cfg);
  const uint64_t hash = config_hash(cfg);
  TrainerState state{0, 0, hash, tc.seed};
  if (!opt.init_dir.empty()) load_weights(opt.init_dir, model.params());
  if (!opt.resume_dir.empty()) {
    load_weights(opt.resume_dir, model.params());
    state = load_training_state(opt.resume_dir, adam);
    if (state.config_hash != hash)
      fail("train", "--resume {}: the checkpoint was trained with a different config (hash {:016x}, this run {:016x}); "
           "use --init to start a new run from its weights", opt.resume_dir, state.config_hash, hash);
  }
  fs::create_directories(tc.run_dir);
  std::ofstream metrics(fs::path(tc.run_dir) / "metrics.jsonl", opt.resume_dir.empty() ? std::ios::trunc : std::ios::app);
  if (!metrics) fail("train", "cannot write {}/metrics.jsonl", tc.run_dir);
  const bool tty = opt.progress && ::isatty(1);
  auto say = [&](const std::string& line) {
    if (opt.quiet) return;
    fmt::print("{}{}\n", tty ? "\r" : "", line);
  };
  std::string last_good = opt.resume_dir.empty() ? "none" : opt.resume_dir;
  auto save = [&](const std::string& name) {
    const std::string dir = (fs::path(tc.run_dir) / name).string();
    save_checkpoint(dir, {&model.params(), &adam, state, hf_config(cfg), to_toml(cfg)});
    last_good = dir;
    return dir;
  };

  TrainSummary out;
  const int64_t tokens_per_step = tc.batch_size * tc.seq_len * tc.grad_accum;
  double avg_secs = 0;
  while (state.step < tc.max_steps) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t step = state.step;
    const double lr = lr_at(sched, step);
    const bool log_now = tc.log_every > 0 && ((step + 1) % tc.log_every == 0 || step == 0);
    double loss_sum = 0;
    std::vector<AttentionMaps> maps;
    Tensor mask_for_maps;
    for (int micro = 0; micro < tc.grad_accum; ++micro) {
      const MlmBatch b = synthetic_mlm_batch(tc.batch_size, tc.seq_len, cfg.model.vocab_size, tc.seed, kTrainStream,
                                             state.data_position++, cfg.data.mlm_probability);
      const bool keep = log_now && micro == 0;
      Var h = model.encode(b.ids, Tensor(), b.key_mask, true,
                           static_cast<uint64_t>(step * tc.grad_accum + micro), keep ? &maps : nullptr);
      if (keep) mask_for_maps = b.key_mask;
      Var loss = model.mlm_loss(h, b.labels);
      loss_sum += loss.data().item();
      scale(loss, 1.0 / tc.grad_accum).backward();
    }
    const double loss = loss_sum / tc.grad_accum;
    const double norm = clip_grad_norm(model.params().all(), tc.grad_clip);
    if (!std::isfinite(loss) || !std::isfinite(norm))
      fail("train", "step {}: the loss is {} and the gradient norm {}; stopping. The last good checkpoint is {}", step,
           loss, norm, last_good);
    adam.step(lr);
    model.params().zero_grad();
    state.step = step + 1;
    out.losses.push_back(loss);
    out.last_loss = loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    avg_secs = step == 0 ? secs : 0.9 * avg_secs + 0.1 * secs;
    if (log_now) {
      const double h0 = mean_attention_entropy(maps.front().probs, mask_for_maps);
      const double h1 = mean_attention_entropy(maps.back().probs, mask_for_maps);
      say(fmt::format("step {:6d} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:7.0f} tok/s | {:7.1f} ms/step | "
                      "entropy L0 {:.3f} L{} {:.3f}",
                      state.step, loss, lr, norm, tokens_per_step / secs, 1e3 * secs, h0, maps.size() - 1, h1));
      metrics << nlohmann::json{{"step", state.step},        {"loss", loss},
                                {"lr", lr},                  {"grad_norm", norm},
                                {"tokens_per_s", tokens_per_step / secs}, {"ms_per_step", 1e3 * secs},
                                {"entropy_first_layer", h0}, {"entropy_last_layer", h1}}
                     .dump()
              << '\n';
      metrics.flush();
    }
    if (tc.eval_every > 0 && state.step % tc.eval_every == 0) {
      const EvalResult e = evaluate_model(model, cfg);
      say(fmt::format("eval at step {}: loss {:.4f} | MLM accuracy {:.4f} | perplexity {:.2f}", state.step, e.loss,
                      e.accuracy, e.perplexity));
      metrics << nlohmann::json{{"step", state.step}, {"eval_loss", e.loss}, {"eval_accuracy", e.accuracy},
                                {"eval_perplexity", e.perplexity}}
                     .dump()
              << '\n';
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
  return out;
}

EvalResult evaluate_checkpoint(const std::string& dir, const std::vector<std::string>& overrides) {
  const RunConfig cfg = load_config((fs::path(dir) / "config.toml").string(), overrides);
  require_supported(cfg);
  BertForMaskedLM model(encoder_config(cfg), cfg.train.seed);
  load_weights(dir, model.params());
  return evaluate_model(model, cfg);
}

}  // namespace saobp
