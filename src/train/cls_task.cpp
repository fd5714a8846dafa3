// The long-range classification tasks (data/tasks.h) as a training objective: the body of
// model.family with its SequenceHead (model/heads.h: BertForSequenceClassification or
// GPT2ForSequenceClassification), so every tensor gets a gradient and the checkpoint holds
// exactly the HF model's tensors.
//
// Training example n (batch n·B + b) has a length drawn uniformly in [task min_length,
// train.seq_len]; a batch is padded to its longest. evaluate() uses the test split at
// train.seq_len; final_evaluation() the test split at every data.eval_lengths length.
#include <filesystem>
#include <memory>

#include "autograd/ops.h"
#include "core/fs.h"
#include "data/tasks.h"
#include "model/heads.h"
#include "train/task.h"
#include "train/task_eval.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

class ClsTask : public Task {
 public:
  explicit ClsTask(const RunConfig& cfg) : cfg_(cfg), spec_(tasks::task_spec(cfg.data.task)) {
    const ModelSection& m = cfg.model;
    if (m.vocab_size < tasks::kVocabSize)
      fail("train", "data.task '{}': model.vocab_size {} is below the task vocabulary of {} symbols",
           spec_.name, m.vocab_size, tasks::kVocabSize);
    if (cfg.train.seq_len < spec_.min_length || cfg.train.seq_len > tasks::kMaxLength)
      fail("train", "data.task '{}': train.seq_len {} is outside [{}, {}]", spec_.name, cfg.train.seq_len,
           spec_.min_length, tasks::kMaxLength);
    body_ = make_body(cfg);
    head_ = make_sequence_head(*body_, spec_.num_classes);
    attach_regularizer(cfg, *body_);
  }

  ParamStore& params() override { return body_->params(); }
  Body* body() override { return body_.get(); }

  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const tasks::Batch batch = train_batch(index);
    if (mask) *mask = batch.key_mask;
    return reg_.add(cross_entropy(logits(batch, true, step, maps), labels(batch)), batch.key_mask);
  }

  EvalResult evaluate() override { return evaluate_at(cfg_.train.seq_len); }

  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const tasks::Batch b = test_batch(cfg_.train.seq_len, 0);
    mask = b.key_mask;
    logits(b, false, 0, &maps);
  }

  // saobp analyze / inspect: the train split is the training stream (lengths vary), the valid
  // split the test examples at train.seq_len.
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const tasks::Batch b = split_batch(split, index);
    mask = b.key_mask;
    logits(b, false, 0, &maps);
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& out) override {
    NoGradGuard ng;
    tasks::Batch b;  // one sequence, every token real
    b.ids = ids, b.key_mask = Tensor::full(ids.shape(), 1, DType::u8), b.lengths = {ids.size(1)};
    body_->capture_hidden(&hidden);
    out = logits(b, false, 0, &maps).data();  // (1, num_classes)
    body_->capture_hidden(nullptr);
  }
  int64_t batch_size() const override { return cfg_.train.batch_size; }
  void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) override {
    const tasks::Batch b = split_batch(split, index);
    ids = b.ids, mask = b.key_mask;
  }

  nlohmann::json final_evaluation(const std::string& out_dir, bool print) override {
    return evaluate_lengths(
        cfg_, spec_, [](int64_t) { return 0; },
        [&](int64_t L) {
          const EvalResult r = evaluate_at(L);
          return LengthEval{r.accuracy, r.loss, r.predictions};
        },
        out_dir, print);
  }

  nlohmann::json hf_config() const override {
    const ModelSection& m = cfg_.model;
    std::vector<std::string> names;
    for (int32_t k = 0; k < spec_.num_classes; ++k) names.push_back(tasks::label_name(spec_, k));
    nlohmann::json j =
        sequence_hf_config(m, "BertForSequenceClassification", tasks::kCls, tasks::kPad, {names}, spec_.name);
    if (m.family == "gpt2") j["summary_first_dropout"] = 0.0;
    return j;
  }

 private:
  RunConfig cfg_;
  tasks::TaskSpec spec_;
  std::unique_ptr<Body> body_;
  std::unique_ptr<SequenceHead> head_;

  Tensor labels(const tasks::Batch& b) const {
    return Tensor::from_vector(b.labels, {static_cast<int64_t>(b.labels.size())});  // on the host
  }

  tasks::Batch train_batch(int64_t index) const {
    const int64_t B = cfg_.train.batch_size;
    const auto first = static_cast<uint64_t>(index * B);
    return tasks::make_batch(spec_, cfg_.train.seed, tasks::Split::train,
                             tasks::train_lengths(spec_, cfg_.train.seed, first, B, cfg_.train.seq_len),
                             first);
  }
  tasks::Batch split_batch(Split split, int64_t index) const {
    return split == Split::train ? train_batch(index) : test_batch(cfg_.train.seq_len, index);
  }

  // Batch `i` of the test split at length L (examples i·B .. i·B + B - 1 of that length).
  tasks::Batch test_batch(int64_t L, int64_t i) const {
    const int64_t B = cfg_.train.batch_size;
    return tasks::make_batch(spec_, cfg_.train.seed, tasks::Split::test,
                             std::vector<int64_t>(static_cast<size_t>(B), L), static_cast<uint64_t>(i * B));
  }

  // Logits (B, K) of the head.
  Var logits(const tasks::Batch& b, bool training, uint64_t step, std::vector<AttentionMaps>* maps) {
    const Var h = body_->hidden(b.ids, Tensor(), b.key_mask, training, step, maps);  // (B,T,C)
    return head_->logits(h, b.lengths, training, step);
  }

  EvalResult evaluate_at(int64_t L) {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const tasks::Batch b = test_batch(L, i);
      score_logits(logits(b, false, 0, nullptr), b.labels, loss_sum, correct, n);
    }
    return finish_eval(loss_sum, correct, n);
  }
};

}  // namespace

nlohmann::json evaluate_lengths(const RunConfig& cfg, const tasks::TaskSpec& spec,
                                const std::function<int64_t(int64_t)>& answer_tokens,
                                const std::function<LengthEval(int64_t)>& at, const std::string& out_dir,
                                bool print, const nlohmann::json& header,
                                const std::vector<std::string>& extra_columns) {
  const ModelSection& m = cfg.model;
  nlohmann::json rows = nlohmann::json::array();
  std::string extra_head;
  for (const std::string& c : extra_columns) extra_head += "," + c;
  std::string csv = "length,accuracy,loss,examples" + extra_head + "\n";
  std::string table = fmt::format(
      "{}: accuracy per sequence length ({}, {} attention, positions {}, trained on "
      "lengths {}..{}; chance {:.4f})\n  length  accuracy      loss  examples",
      spec.name, m.family, variant_name(m.attention.variant), m.positions, spec.min_length, cfg.train.seq_len,
      1.0 / static_cast<double>(spec.num_classes));
  for (const std::string& c : extra_columns) table += fmt::format("  {:>12}", c);
  table += "\n";
  for (const int64_t L : cfg.data.eval_lengths) {
    std::string skip;
    if (L < spec.min_length)
      skip = fmt::format("below the task's minimum length {}", spec.min_length);
    else if (L > tasks::kMaxLength)
      skip = fmt::format("above the tasks' maximum length {}", tasks::kMaxLength);
    else if (const int64_t n = L + answer_tokens(L); n > m.max_positions)
      skip = n == L
                 ? fmt::format("above model.max_positions {}", m.max_positions)
                 : fmt::format("{} tokens with the answer, above model.max_positions {}", n, m.max_positions);
    if (!skip.empty()) {
      rows.push_back({{"length", L}, {"skipped", skip}});
      table += fmt::format("  {:6d}  skipped: {}\n", L, skip);
      continue;
    }
    const LengthEval r = at(L);
    nlohmann::json row = {
        {"length", L}, {"accuracy", r.accuracy}, {"loss", r.loss}, {"examples", r.examples}};
    row.update(r.extra);
    rows.push_back(row);
    csv += fmt::format("{},{:.6f},{:.6f},{}", L, r.accuracy, r.loss, r.examples);
    table += fmt::format("  {:6d}  {:8.4f}  {:8.4f}  {:8d}", L, r.accuracy, r.loss, r.examples);
    for (const std::string& c : extra_columns) {
      const double v = r.extra.contains(c) && r.extra[c].is_number() ? r.extra[c].get<double>() : NAN;
      csv += fmt::format(",{:.6f}", v);
      table += fmt::format("  {:12.4f}", v);
    }
    csv += "\n", table += "\n";
  }
  nlohmann::json out = {{"task", spec.name},
                        {"family", m.family},
                        {"attention", variant_name(m.attention.variant)},
                        {"positions", m.positions},
                        {"train_min_length", spec.min_length},
                        {"train_max_length", cfg.train.seq_len},
                        {"num_classes", spec.num_classes},
                        {"results", rows}};
  out.update(header);
  if (!out_dir.empty()) {
    fs::create_directories(out_dir);
    write_file_atomic((fs::path(out_dir) / "task_eval.csv").string(), csv);
    write_file_atomic((fs::path(out_dir) / "task_eval.json").string(), out.dump(2) + "\n");
  }
  if (print) fmt::print("{}", table);
  return out;
}

std::unique_ptr<Task> make_cls_task(const RunConfig& cfg) { return std::make_unique<ClsTask>(cfg); }

}  // namespace saobp
