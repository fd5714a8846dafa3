#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "attention/metrics.h"
#include "autograd/ops.h"
#include "data/synthetic.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/clip.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

// Data streams of the synthetic source: training and validation never share sequences.
constexpr uint64_t kTrainStream = 100, kValidStream = 200;

void require_supported(const RunConfig& cfg) {
  if (cfg.data.kind != "synthetic")
    fail("train", "data.kind '{}': this build has only the synthetic source (corpus loaders are not built yet)",
         cfg.data.kind);
  if (Device::parse(cfg.train.device) != Device::cpu())
    fail("train", "train.device '{}': the trainer runs on the CPU in this build", cfg.train.device);
}

// The saobp fields of config.json, shared by both families.
nlohmann::json saobp_fields(const ModelSection& m) {
  return {{"saobp_attention", variant_name(m.attention)}, {"saobp_lambda", m.lambda},
          {"saobp_layer_lambdas", m.layer_lambdas},      {"saobp_learnable_lambda", m.learnable_lambda},
          {"saobp_bp_steps", m.bp_steps},                {"saobp_positions", m.positions}};
}

// What the loop needs of a model family: its parameters, the loss of a training batch, an
// evaluation, and its Hugging Face config.json.
class Task {
 public:
  virtual ~Task() = default;
  virtual ParamStore& params() = 0;
  // Loss of batch `index` of the training stream; fills maps/mask when maps is not null.
  virtual Var train_loss(int64_t index, uint64_t dropout_step, std::vector<AttentionMaps>* maps, Tensor* mask) = 0;
  virtual EvalResult evaluate() = 0;
  virtual nlohmann::json hf_config() const = 0;
};

// Accumulates the loss and the argmax accuracy of (N,V) logits against N targets.
void score(const Var& logits, const std::vector<int32_t>& tgt, double& loss_sum, int64_t& correct, int64_t& n) {
  const int64_t N = static_cast<int64_t>(tgt.size()), V = logits.size(-1);
  const Var flat = reshape(logits, {N, V});
  loss_sum += cross_entropy(flat, Tensor::from_vector(tgt, {N})).data().item() * static_cast<double>(N);
  const std::vector<float> l = flat.data().to_vector<float>();
  for (int64_t k = 0; k < N; ++k) {
    const float* row = l.data() + k * V;
    correct += std::max_element(row, row + V) - row == tgt[static_cast<size_t>(k)];
  }
  n += N;
}

EvalResult finish(double loss_sum, int64_t correct, int64_t n) {
  EvalResult r;
  r.predictions = n;
  if (n) {
    r.loss = loss_sum / static_cast<double>(n);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
    r.perplexity = std::exp(r.loss);
  }
  return r;
}

// BERT with the masked-LM objective.
class MlmTask : public Task {
 public:
  explicit MlmTask(const RunConfig& cfg) : cfg_(cfg), model_(encoder_config(cfg), cfg.train.seed) {}
  ParamStore& params() override { return model_.params(); }
  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const MlmBatch b = batch(kTrainStream, index);
    if (mask) *mask = b.key_mask;
    return model_.mlm_loss(model_.encode(b.ids, Tensor(), b.key_mask, true, step, maps), b.labels);
  }
  EvalResult evaluate() override {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const MlmBatch b = batch(kValidStream, i);
      std::vector<int32_t> pos, tgt;
      const std::vector<int32_t> lab = b.labels.to_vector<int32_t>();
      for (size_t k = 0; k < lab.size(); ++k)
        if (lab[k] != -100) pos.push_back(static_cast<int32_t>(k)), tgt.push_back(lab[k]);
      if (pos.empty()) continue;
      const Tensor positions = Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())});
      score(model_.mlm_logits(model_.encode(b.ids, Tensor(), b.key_mask, false, 0), positions), tgt, loss_sum, correct, n);
    }
    return finish(loss_sum, correct, n);
  }
  nlohmann::json hf_config() const override {
    const ModelSection& m = cfg_.model;
    nlohmann::json j = {{"architectures", {"BertForMaskedLM"}},
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
                        {"torch_dtype", "float32"}};
    j.update(saobp_fields(m));
    return j;
  }

 private:
  MlmBatch batch(uint64_t stream, int64_t index) const {
    return synthetic_mlm_batch(cfg_.train.batch_size, cfg_.train.seq_len, cfg_.model.vocab_size, cfg_.train.seed,
                               stream, index, cfg_.data.mlm_probability);
  }
  RunConfig cfg_;
  BertForMaskedLM model_;
};

// GPT-2 with the causal-LM objective (next-token prediction).
class ClmTask : public Task {
 public:
  explicit ClmTask(const RunConfig& cfg) : cfg_(cfg), model_(decoder_config(cfg), cfg.train.seed) {}
  ParamStore& params() override { return model_.params(); }
  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const ClmBatch b = batch(kTrainStream, index);
    if (mask) *mask = b.key_mask;
    return model_.lm_loss(model_.forward(b.ids, b.key_mask, true, step, maps), b.targets);
  }
  EvalResult evaluate() override {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const ClmBatch b = batch(kValidStream, i);
      const Var logits = model_.forward(b.ids, b.key_mask, false, 0);
      // Score the positions with a target (all but the last of each row).
      const std::vector<int32_t> t = b.targets.to_vector<int32_t>();
      std::vector<int32_t> rows, tgt;
      for (size_t k = 0; k < t.size(); ++k)
        if (t[k] != -100) rows.push_back(static_cast<int32_t>(k)), tgt.push_back(t[k]);
      const Var picked = embedding(reshape(logits, {-1, logits.size(-1)}),
                                   Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}));
      score(picked, tgt, loss_sum, correct, n);
    }
    return finish(loss_sum, correct, n);
  }
  nlohmann::json hf_config() const override {
    const ModelSection& m = cfg_.model;
    nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                        {"model_type", "gpt2"},
                        {"vocab_size", m.vocab_size},
                        {"n_positions", m.max_positions},
                        {"n_embd", m.hidden},
                        {"n_layer", m.layers},
                        {"n_head", m.heads},
                        {"n_inner", m.intermediate},
                        {"activation_function", "gelu_new"},
                        {"resid_pdrop", m.dropout},
                        {"embd_pdrop", m.dropout},
                        {"attn_pdrop", 0.0},
                        {"layer_norm_epsilon", 1e-5},
                        {"initializer_range", 0.02},
                        {"tie_word_embeddings", true},
                        {"torch_dtype", "float32"}};
    j.update(saobp_fields(m));
    return j;
  }

 private:
  ClmBatch batch(uint64_t stream, int64_t index) const {
    return synthetic_clm_batch(cfg_.train.batch_size, cfg_.train.seq_len, cfg_.model.vocab_size, cfg_.train.seed,
                               stream, index);
  }
  RunConfig cfg_;
  GPT2LMHeadModel model_;
};

std::unique_ptr<Task> make_task(const RunConfig& cfg) {
  require_supported(cfg);
  if (cfg.model.family == "bert") return std::make_unique<MlmTask>(cfg);
  if (cfg.model.family == "gpt2") return std::make_unique<ClmTask>(cfg);
  fail("train", "model.family '{}' is not bert or gpt2", cfg.model.family);
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
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  const TrainSection& tc = cfg.train;
  const std::unique_ptr<Task> task = make_task(cfg);
  ParamStore& params = task->params();
  AdamW adam(params.all(), adamw_config(cfg));
  const Schedule sched = schedule_of(cfg);
  const uint64_t hash = config_hash(cfg);
  TrainerState state{0, 0, hash, tc.seed};
  if (!opt.init_dir.empty()) load_weights(opt.init_dir, params);
  if (!opt.resume_dir.empty()) {
    load_weights(opt.resume_dir, params);
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
    save_checkpoint(dir, {&params, &adam, state, task->hf_config(), to_toml(cfg)});
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
      const bool keep = log_now && micro == 0;
      Var loss = task->train_loss(state.data_position++, static_cast<uint64_t>(step * tc.grad_accum + micro),
                                  keep ? &maps : nullptr, keep ? &mask_for_maps : nullptr);
      loss_sum += loss.data().item();
      scale(loss, 1.0 / tc.grad_accum).backward();
    }
    const double loss = loss_sum / tc.grad_accum;
    const double norm = clip_grad_norm(params.all(), tc.grad_clip);
    if (!std::isfinite(loss) || !std::isfinite(norm))
      fail("train", "step {}: the loss is {} and the gradient norm {}; stopping. The last good checkpoint is {}", step,
           loss, norm, last_good);
    adam.step(lr);
    params.zero_grad();
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
      const EvalResult e = task->evaluate();
      say(fmt::format("eval at step {}: loss {:.4f} | accuracy {:.4f} | perplexity {:.2f}", state.step, e.loss,
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
  const std::unique_ptr<Task> task = make_task(cfg);
  load_weights(dir, task->params());
  return task->evaluate();
}

}  // namespace saobp
