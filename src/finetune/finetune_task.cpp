// Fine-tuning on a benchmark (data.kind = "benchmark", data.task a name of finetune/benchmark.h):
// the pretrained body with the task's head (model/heads.h), laid out as Hugging Face's classes so
// that a fine-tuned folder loads in transformers when attention is "original":
//   classify  SequenceHead: BertForSequenceClassification or GPT2ForSequenceClassification
//             (K labels; K = 1 and an MSE loss for STS-B)
//   choice    MultipleChoiceHead (bert): every (context, ending) pair through the encoder as one
//             row, the K row logits of an example -> softmax over its endings
//   span      SpanHead: BertForQuestionAnswering or GPT2ForQuestionAnswering (qa_outputs on the
//             final hidden states, after ln_f for GPT-2): start and end logits, cross-entropy of
//             each over the real tokens, averaged; the null answer at [CLS] or, for GPT-2, at
//             the feature's last token (squad_features.h)
// Inputs and batches: finetune/inputs.h. Training batch n is the (n mod E)-th slice of B
// examples of the permutation of epoch n / E (E batches per epoch, the last one shorter), drawn
// from (seed, epoch): a pure function of n, so a resumed run continues the same order.
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "autograd/ops.h"
#include "data/batching.h"
#include "finetune/benchmark.h"
#include "finetune/finetune.h"
#include "finetune/inputs.h"
#include "finetune/metrics.h"
#include "finetune/predictions.h"
#include "finetune/squad_features.h"
#include "model/heads.h"
#include "train/task.h"

namespace saobp {

namespace {

using finetune::Batch;
using finetune::Item;
using finetune::Kind;

struct EvalSplit {
  finetune::SplitData data;
  std::vector<Item> items;
  squad::Features squad;  // span
  int64_t truncated = 0;
};

class FinetuneTask : public Task {
 public:
  // with_train false: evaluation only (saobp eval --task), the training split is not read.
  FinetuneTask(const RunConfig& cfg, bool with_train)
      : cfg_(cfg), spec_(finetune::benchmark_spec(cfg.data.task)) {
    const ModelSection& m = cfg.model;
    if (spec_.kind == Kind::lm || cfg.data.zero_shot)
      fail("finetune", "{} is evaluated, not trained: saobp eval --checkpoint DIR --task {} --data DIR{}",
           spec_.name, spec_.name, spec_.kind == Kind::lm ? "" : " --zero-shot");
    if (cfg.data.vocab.empty())
      fail("finetune", "data.vocab: fine-tuning needs the pretrained model's tokenizer (--init DIR sets it)");
    tok_ = load_tokenizer(cfg.data.vocab);
    if (tok_->vocab_size() > m.vocab_size)
      fail("finetune", "data.vocab {}: {} tokens, more than model.vocab_size = {}", cfg.data.vocab,
           tok_->vocab_size(), m.vocab_size);
    if (m.family == "gpt2" && spec_.kind == Kind::choice)
      fail("finetune",
           "{} with model.family gpt2: multiple choice is an encoder's head here; a decoder is scored "
           "zero-shot on it (saobp eval --zero-shot)",
           spec_.name);
    encoder_.emplace(
        spec_, *tok_,
        finetune::EncodeOptions{m.family, cfg.train.seq_len, cfg.data.doc_stride, cfg.data.max_query_length},
        "finetune", cfg.data.vocab);
    pad_ = encoder_->pad();
    read_data(with_train);
    read_submission_splits();
    build_model();
  }

  ParamStore& params() override { return body_->params(); }
  Body* body() override { return body_.get(); }
  const Tokenizer* tokenizer() const override { return tok_.get(); }
  int64_t batch_size() const override { return cfg_.train.batch_size; }

  int64_t train_batches_per_epoch() const override {
    if (train_.empty()) return 0;
    const int64_t n = static_cast<int64_t>(train_.size()), B = cfg_.train.batch_size;
    return (n + B - 1) / B;
  }
  std::vector<std::string> head_prefixes() const override {
    if (span_) return span_->prefixes();
    if (choice_) return choice_->prefixes();
    return sequence_->prefixes();
  }

  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    if (train_.empty()) fail("finetune", "{}: this task was built for evaluation only", spec_.name);
    const Batch b = batch_of(train_, train_order(index));
    if (mask) *mask = b.mask;
    return reg_.add(loss(b, forward(b, true, step, maps)), b.mask);
  }

  EvalResult evaluate() override {
    NoGradGuard ng;
    EvalResult r;
    r.metrics = nlohmann::json::object();
    for (size_t s = 0; s < evals_.size(); ++s) {
      double loss_sum = 0;
      const nlohmann::json m = evaluate_split(evals_[s], loss_sum);
      r.metrics[evals_[s].data.split] = m;
      if (s == 0) {
        r.predictions = static_cast<int64_t>(evals_[s].items.size());
        r.loss = loss_sum / static_cast<double>(std::max<int64_t>(r.predictions, 1));
        r.perplexity = std::exp(r.loss);
        for (auto& [k, v] : m.items())
          if (v.is_number() && (k == "accuracy" || r.accuracy == 0)) r.accuracy = v.get<double>();
      }
    }
    return r;
  }

  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    attention_maps(Split::valid, 0, maps, mask);
  }
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const Batch b = split_batch(split, index);
    mask = b.mask;
    forward(b, false, 0, &maps);
  }
  void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) override {
    const Batch b = split_batch(split, index);
    ids = b.ids, mask = b.mask;
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& out) override {
    NoGradGuard ng;
    Batch b;
    b.ids = ids, b.mask = Tensor::full(ids.shape(), 1, DType::u8),
    b.types = Tensor::zeros(ids.shape(), DType::i32);
    b.lengths = {ids.size(1)}, b.items = 1;
    body_->capture_hidden(&hidden);
    out = forward(b, false, 0, &maps).data();
    body_->capture_hidden(nullptr);
  }

  nlohmann::json final_evaluation(const std::string& out_dir, bool print) override {
    (void)out_dir;  // results.json is written by the command (saobp finetune / eval)
    const EvalResult r = evaluate();
    for (const EvalSplit& t : tests_) {
      double unused = 0;
      evaluate_split(t, unused);
    }
    nlohmann::json out = {{"task", spec_.name},
                          {"family", cfg_.model.family},
                          {"attention", variant_name(cfg_.model.attention.variant)},
                          {"metrics", r.metrics},
                          {"max_length", cfg_.train.seq_len}};
    nlohmann::json examples = nlohmann::json::object(), truncated = nlohmann::json::object(),
                   skipped = nlohmann::json::object(), misaligned = nlohmann::json::object();
    auto note = [&](const finetune::SplitData& d, int64_t cut) {
      examples[d.split] = d.size(), truncated[d.split] = cut;
      skipped[d.split] = {{"rows", d.stats().skipped}, {"first", d.stats().skipped_at}};
      if (spec_.kind == Kind::span)
        misaligned[d.split] = {{"answers", d.squad.misaligned}, {"first", d.squad.misaligned_at}};
    };
    if (train_data_.size() > 0) note(train_data_, train_truncated_);
    for (const EvalSplit& e : evals_) note(e.data, e.truncated);
    for (const EvalSplit& t : tests_) note(t.data, t.truncated);
    out["examples"] = examples, out["truncated"] = truncated, out["skipped_rows"] = skipped;
    if (spec_.kind == Kind::span) out["misaligned_answers"] = misaligned;
    nlohmann::json speed = nlohmann::json::object();  // the evaluation above, timed per split
    for (const auto* splits : {&evals_, &tests_})
      for (const EvalSplit& e : *splits) {
        const double secs = seconds_[e.data.split];
        speed[e.data.split] = {{"seconds", secs},
                               {"examples_per_s", static_cast<double>(e.data.size()) / std::max(secs, 1e-9)}};
      }
    out["speed"] = speed;
    if (!predictions_.empty()) out["predictions"] = predictions_;
    if (!null_odds_.empty()) out["null_odds"] = null_odds_;
    if (spec_.kind != Kind::span) {
      // Per-example lines of every split, and the leaderboard's file of each GLUE test split
      // (finetune/predictions.h); the commands write them beside results.json.
      nlohmann::json lines = nlohmann::json::object(), submission = nlohmann::json::object();
      for (const auto* splits : {&evals_, &tests_})
        for (const EvalSplit& e : *splits)
          lines[e.data.split] = finetune::prediction_lines(spec_, e.data, outputs_.at(e.data.split));
      for (size_t t = 0; t < tests_.size(); ++t)
        submission[test_files_[t]] =
            finetune::glue_submission_tsv(spec_, tests_[t].data, outputs_.at(tests_[t].data.split));
      out["example_predictions"] = lines;
      if (!submission.empty()) out["glue_submission"] = submission;
      if (spec_.kind == Kind::classify) out["labels"] = labels_;
    }
    if (print) {
      fmt::print("{} ({}, {} attention):\n", spec_.name, cfg_.model.family,
                 variant_name(cfg_.model.attention.variant));
      for (auto& [split, m] : r.metrics.items()) {
        std::string line;
        for (auto& [k, v] : m.items())
          if (v.is_number()) line += fmt::format("  {} {:.4f}", k, v.get<double>());
        fmt::print("  {:16s}{}\n", split, line);
      }
    }
    return out;
  }

  nlohmann::json hf_config() const override {
    const ModelSection& m = cfg_.model;
    const char* arch = spec_.kind == Kind::span     ? "BertForQuestionAnswering"
                       : spec_.kind == Kind::choice ? "BertForMultipleChoice"
                                                    : "BertForSequenceClassification";
    HeadLabels labels;
    if (spec_.kind == Kind::classify) labels.names = labels_;
    if (spec_.kind == Kind::regress) labels.names = {"LABEL_0"}, labels.problem_type = "regression";
    return sequence_hf_config(
        m, arch, pad_, pad_, labels, spec_.name,
        spec_.kind == Kind::span ? "GPT2ForQuestionAnswering" : "GPT2ForSequenceClassification");
  }

 private:
  RunConfig cfg_;
  finetune::BenchmarkSpec spec_;
  std::shared_ptr<const Tokenizer> tok_;
  std::optional<finetune::InputEncoder> encoder_;
  int32_t pad_ = 0;
  std::vector<std::string> labels_;
  finetune::SplitData train_data_;
  std::vector<Item> train_;
  int64_t train_truncated_ = 0;
  std::vector<EvalSplit> evals_;
  // GLUE: the test splits present in data.path, predicted by final_evaluation only, and the
  // leaderboard's file of each (finetune::submission_splits).
  std::vector<EvalSplit> tests_;
  std::vector<std::string> test_files_;
  std::unique_ptr<Body> body_;
  // The task's head: one of the three.
  std::unique_ptr<SequenceHead> sequence_;
  std::unique_ptr<MultipleChoiceHead> choice_;
  std::unique_ptr<SpanHead> span_;
  std::map<std::string, double> seconds_;  // the last evaluation's time per split
  // SQuAD: the last evaluation's answers per split (id -> text) and, v2.0, their null odds; the
  // commands write them as the official scripts read them (finetune::write_predictions).
  mutable nlohmann::json predictions_ = nlohmann::json::object(), null_odds_ = nlohmann::json::object();
  // Classification, regression and multiple choice: the last evaluation's outputs per split.
  std::map<std::string, finetune::SplitOutputs> outputs_;
  mutable int64_t perm_epoch_ = -1;
  mutable std::vector<uint32_t> perm_;

  void build_model() {
    body_ = make_body(cfg_);
    if (spec_.kind == Kind::span)
      span_ = std::make_unique<SpanHead>(*body_);
    else if (spec_.kind == Kind::choice)
      choice_ = std::make_unique<MultipleChoiceHead>(*body_);
    else
      sequence_ = make_sequence_head(
          *body_, spec_.kind == Kind::classify ? static_cast<int64_t>(labels_.size()) : 1);  // 1: regress
    attach_regularizer(cfg_, *body_);
  }

  // The GLUE test splits whose files are in data.path (unlabeled: predicted, not scored).
  void read_submission_splits() {
    for (const finetune::SubmissionSplit& s : finetune::submission_splits(spec_)) {
      if (!finetune::has_split(spec_, cfg_.data.path, s.split)) continue;
      EvalSplit t;
      t.data = finetune::read_split(spec_, cfg_.data.path, s.split, {cfg_.data.skip_bad_rows},
                                    cfg_.data.max_examples);
      t.items = encoder_->encode(t.data, false, t.truncated);
      fmt::print(
          "data: {} {}: {} examples{}, predicted for {}\n", spec_.name, s.split, t.data.size(),
          t.data.stats().skipped ? fmt::format(", {} malformed rows skipped", t.data.stats().skipped) : "",
          s.file);
      tests_.push_back(std::move(t));
      test_files_.push_back(s.file);
    }
  }

  // ---- data -----------------------------------------------------------------------------------

  void read_data(bool with_train) {
    const bench::ReadOptions opt{cfg_.data.skip_bad_rows};
    const int64_t cap = cfg_.data.max_examples;
    if (with_train) {
      train_data_ = finetune::read_split(spec_, cfg_.data.path, spec_.train_split, opt, cap);
      train_ = encoder_->encode(train_data_, true, train_truncated_);
    }
    for (const std::string& split : spec_.eval_splits) {
      EvalSplit e;
      e.data = finetune::read_split(spec_, cfg_.data.path, split, opt, cap);
      e.items = encoder_->encode(e.data, false, e.truncated, &e.squad);
      evals_.push_back(std::move(e));
    }
    auto note = [&](const finetune::SplitData& d, int64_t cut) {
      const bench::ReadStats& st = d.stats();
      fmt::print(
          "data: {} {}: {} examples{}{}{}\n", spec_.name, d.split, d.size(),
          cut ? fmt::format(", {} cut to train.seq_len = {} tokens", cut, cfg_.train.seq_len) : "",
          st.skipped
              ? fmt::format(", {} malformed rows skipped (first: {})", st.skipped, st.skipped_at.front())
              : "",
          d.squad.misaligned ? fmt::format(", {} answers whose text is not at their answer_start, kept "
                                           "(first: {})",
                                           d.squad.misaligned, d.squad.misaligned_at.front())
                             : "");
    };
    if (with_train) note(train_data_, train_truncated_);
    for (const EvalSplit& e : evals_) note(e.data, e.truncated);
    if (spec_.kind == Kind::classify) {
      labels_ = finetune::label_names(with_train ? train_data_ : evals_.front().data);
      if (labels_.size() < 2)
        fail("finetune", "{}: {} labels; classification needs at least 2", spec_.name, labels_.size());
    }
  }

  // ---- batches ----------------------------------------------------------------------------------

  std::vector<int64_t> train_order(int64_t index) const {
    const int64_t E = train_batches_per_epoch(), epoch = index / E, j = index % E, B = cfg_.train.batch_size;
    if (epoch != perm_epoch_) {
      perm_ = epoch_permutation(cfg_.train.seed, static_cast<uint64_t>(epoch),
                                static_cast<uint32_t>(train_.size()));
      perm_epoch_ = epoch;
    }
    std::vector<int64_t> order;
    for (int64_t k = j * B; k < std::min<int64_t>((j + 1) * B, static_cast<int64_t>(train_.size())); ++k)
      order.push_back(perm_[static_cast<size_t>(k)]);
    return order;
  }

  Batch batch_of(const std::vector<Item>& items, const std::vector<int64_t>& which) const {
    return finetune::make_batch(items, which, pad_);
  }

  Batch eval_batch(const EvalSplit& e, int64_t index) const {
    const int64_t B = cfg_.train.batch_size, n = static_cast<int64_t>(e.items.size());
    std::vector<int64_t> which;
    for (int64_t k = index * B; k < std::min(n, (index + 1) * B); ++k) which.push_back(k);
    if (which.empty())
      fail("finetune", "{}: batch {} is past the end of split {}", spec_.name, index, e.data.split);
    return batch_of(e.items, which);
  }
  Batch split_batch(Split split, int64_t index) const {
    return split == Split::train ? batch_of(train_, train_order(index)) : eval_batch(evals_.front(), index);
  }

  // ---- the model with its head --------------------------------------------------------------

  // classify/regress: (N, K); choice: (N, endings); span: (R, T, 2).
  Var forward(const Batch& b, bool training, uint64_t step, std::vector<AttentionMaps>* maps) {
    const Var h = body_->hidden(b.ids, b.types, b.mask, training, step, maps);  // (R,T,C)
    if (span_) return span_->logits(h);
    if (choice_) return choice_->logits(h, b.lengths, b.rows_per_item, training, step);
    return sequence_->logits(h, b.lengths, training, step);
  }

  // Start and end logits (R,T) each, the padding pushed to -1e4 so it takes no probability.
  std::pair<Var, Var> span_logits(const Var& out, const Batch& b) const {
    const int64_t R = b.ids.size(0), T = b.ids.size(1);
    std::vector<float> bias(static_cast<size_t>(R * T), 0.f);
    const std::vector<uint8_t> mask = b.mask.to_vector<uint8_t>();
    for (size_t k = 0; k < bias.size(); ++k) bias[k] = mask[k] ? 0.f : -1e4f;
    const Var pad(Tensor::from_vector(bias, {R, T}, out.device()));
    const Var s = add(reshape(contiguous(slice(out, 2, 0, 1)), {R, T}), pad);
    const Var e = add(reshape(contiguous(slice(out, 2, 1, 2)), {R, T}), pad);
    return {s, e};
  }

  Var loss(const Batch& b, const Var& out) const {
    const int64_t N = b.items;
    switch (spec_.kind) {
      case Kind::classify:
        return cross_entropy(out, Tensor::from_vector(b.labels, {N}));
      case Kind::regress: {
        const Var d = sub(reshape(out, {N}), Var(Tensor::from_vector(b.scores, {N}, out.device())));
        return mean(mul(d, d));
      }
      case Kind::choice:
        return cross_entropy(out, Tensor::from_vector(b.labels, {N}));
      case Kind::span: {
        const auto [s, e] = span_logits(out, b);
        return scale(add(cross_entropy(s, Tensor::from_vector(b.starts, {N})),
                         cross_entropy(e, Tensor::from_vector(b.ends, {N}))),
                     0.5);
      }
      default:
        fail("finetune", "{}: no training loss", spec_.name);
    }
  }

  // Every example of a split through the model: the official metrics, and the summed loss.
  nlohmann::json evaluate_split(const EvalSplit& e, double& loss_sum) {
    const auto t0 = std::chrono::steady_clock::now();
    const nlohmann::json m = evaluate_split_untimed(e, loss_sum);
    seconds_[e.data.split] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }
  nlohmann::json evaluate_split_untimed(const EvalSplit& e, double& loss_sum) {
    const int64_t B = cfg_.train.batch_size, n = static_cast<int64_t>(e.items.size());
    // A test file has no labels (GLUE, BoolQ: the reader says; HellaSwag: label -1).
    const bool unlabeled = spec_.kind == Kind::choice ? e.data.choice.examples.front().label < 0
                                                      : spec_.kind != Kind::span && !e.data.text.labeled;
    finetune::SplitOutputs& o = outputs_[e.data.split];
    o = {};
    std::vector<int32_t>& pred = o.pred;
    std::vector<double>& pred_score = o.score;
    std::vector<std::vector<float>> starts, ends;
    for (int64_t i = 0; i * B < n; ++i) {
      const Batch b = eval_batch(e, i);
      const Var out = forward(b, false, 0, nullptr);
      const bool labeled = spec_.kind == Kind::regress ? !unlabeled
                                                       : std::all_of(b.labels.begin(), b.labels.end(),
                                                                     [](int32_t l) { return l >= 0; });
      if (labeled) loss_sum += loss(b, out).data().item() * static_cast<double>(b.items);
      if (spec_.kind == Kind::span) {
        const auto [s, en] = span_logits(out, b);
        const std::vector<float> sv = s.data().to_vector<float>(), ev = en.data().to_vector<float>();
        const int64_t T = b.ids.size(1);
        for (int64_t r = 0; r < b.items; ++r) {
          const auto len = b.lengths[static_cast<size_t>(r)];
          starts.emplace_back(sv.begin() + r * T, sv.begin() + r * T + len);
          ends.emplace_back(ev.begin() + r * T, ev.begin() + r * T + len);
        }
        continue;
      }
      const std::vector<float> v = out.data().to_vector<float>();
      const int64_t K = out.size(-1);
      for (int64_t r = 0; r < b.items; ++r) {
        const float* row = v.data() + r * K;
        if (spec_.kind == Kind::regress) pred_score.push_back(row[0]);
        pred.push_back(static_cast<int32_t>(std::max_element(row, row + K) - row));
      }
      if (spec_.kind != Kind::regress)
        o.logits.insert(o.logits.end(), v.begin(), v.begin() + b.items * K), o.K = K;
    }
    if (spec_.kind == Kind::span) {
      outputs_.erase(e.data.split);
      return span_metrics(e, starts, ends);
    }
    if (unlabeled) return {{"unlabeled", true}, {"examples", n}};
    return finetune::split_metrics(spec_, e.data, pred, pred_score);
  }

  nlohmann::json span_metrics(const EvalSplit& e, const std::vector<std::vector<float>>& starts,
                              const std::vector<std::vector<float>>& ends) const {
    squad::PredictOptions o;
    o.n_best = cfg_.data.n_best, o.max_answer_length = cfg_.data.max_answer_length;
    o.version_2 = spec_.name == "squad/v2.0";
    std::map<std::string, double> odds;
    const auto preds = squad::predict(e.data.squad.examples, e.squad, starts, ends, *tok_, o, &odds);
    predictions_[e.data.split] = preds;
    if (o.version_2) null_odds_[e.data.split] = odds;
    std::vector<metrics::SquadGold> gold;
    for (const bench::SquadExample& x : e.data.squad.examples) {
      metrics::SquadGold g{x.id, {}};
      for (const bench::SquadAnswer& a : x.answers) g.answers.push_back(a.text);
      gold.push_back(std::move(g));
    }
    return metrics::to_json(metrics::squad_evaluate(gold, preds), o.version_2);
  }
};

}  // namespace

namespace finetune {

void register_tasks() {
  register_task_kind("benchmark", [](const RunConfig& cfg) -> std::unique_ptr<Task> {
    return std::make_unique<FinetuneTask>(cfg, true);
  });
}

std::unique_ptr<Task> make_eval_task(const RunConfig& cfg) {
  return std::make_unique<FinetuneTask>(cfg, false);
}

}  // namespace finetune

}  // namespace saobp
