// The language-model objectives: BERT with masked-LM, GPT-2 with causal-LM, over a synthetic
// or a corpus source (data_setup.h).
#include "autograd/ops.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "train/data_setup.h"
#include "train/inference.h"
#include "train/task.h"

namespace saobp {

namespace {

// What both objectives share: the config, the data (MlmData or ClmData: a batch source and the
// tokenizer), and the Task methods that only read them.
template <class Data>
class LmTask : public Task {
 public:
  int64_t batch_size() const override { return cfg_.train.batch_size; }
  int64_t held_out_examples() const override { return data_.source->examples(Split::valid); }
  void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) override {
    const auto b = data_.source->batch(split, index);
    ids = b.ids, mask = b.key_mask;
  }
  const Tokenizer* tokenizer() const override { return data_.tokenizer.get(); }
  // The trainer calls this before its first step: a corpus is tokenized here (or its cache
  // opened), not inside the first timed step; eval, analyze and inspect do not, so they prepare
  // only what their batches need (data_setup.h).
  void prepare_training() override { data_.prepare_training(); }

 protected:
  LmTask(const RunConfig& cfg, Data data) : cfg_(cfg), data_(std::move(data)) {}
  RunConfig cfg_;
  Data data_;
};

class MlmTask : public LmTask<MlmData> {
 public:
  explicit MlmTask(const RunConfig& cfg)
      : LmTask(cfg, prepare_mlm_data(cfg)), model_(encoder_config(cfg), cfg.train.seed) {
    reg_ = Regularizer(cfg, model_.params());
    model_.capture_qk(reg_.qk());
  }
  ParamStore& params() override { return model_.params(); }
  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const MlmBatch b = data_.source->batch(Split::train, index);
    if (mask) *mask = b.key_mask;
    return reg_.add(model_.mlm_loss(model_.encode(b.ids, Tensor(), b.key_mask, true, step, maps), b.labels),
                    b.key_mask);
  }
  EvalResult evaluate() override {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    std::vector<int32_t> pos, tgt;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const MlmBatch b = data_.source->batch(Split::valid, i);
      predicted_positions(b.labels, pos, tgt);
      if (pos.empty()) continue;
      const Tensor positions = Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())});
      score_logits(mlm_eval_logits(model_, b.ids, b.key_mask, positions), tgt, loss_sum, correct, n);
    }
    return finish_eval(loss_sum, correct, n);
  }
  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    attention_maps(Split::valid, 0, maps, mask);
  }
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const MlmBatch b = data_.source->batch(split, index);
    mask = b.key_mask;
    model_.encode(b.ids, Tensor(), b.key_mask, false, 0, &maps);
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& logits) override {
    NoGradGuard ng;
    model_.capture_hidden(&hidden);
    const Var h = model_.encode(ids, Tensor(), Tensor(), false, 0, &maps);
    model_.capture_hidden(nullptr);
    const int64_t T = ids.size(1);
    std::vector<int32_t> all(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) all[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    logits = model_.mlm_logits(h, Tensor::from_vector(all, {T})).data().view({1, T, -1});
  }
  nlohmann::json hf_config() const override {
    nlohmann::json j = bert_hf_config(cfg_.model, data_.pad_id);
    j["architectures"] = nlohmann::json::array({"BertForMaskedLM"});
    return j;
  }

 private:
  BertForMaskedLM model_;
};

class ClmTask : public LmTask<ClmData> {
 public:
  explicit ClmTask(const RunConfig& cfg)
      : LmTask(cfg, prepare_clm_data(cfg)), model_(decoder_config(cfg), cfg.train.seed) {
    reg_ = Regularizer(cfg, model_.params());
    model_.capture_qk(reg_.qk());
  }
  ParamStore& params() override { return model_.params(); }
  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const ClmBatch b = data_.source->batch(Split::train, index);
    if (mask) *mask = b.key_mask;
    return reg_.add(model_.lm_loss(model_.forward(b.ids, b.key_mask, true, step, maps), b.targets),
                    b.key_mask);
  }
  EvalResult evaluate() override {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    std::vector<int32_t> rows, tgt;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const ClmBatch b = data_.source->batch(Split::valid, i);
      predicted_positions(b.targets, rows, tgt);
      if (rows.empty()) continue;
      score_logits(clm_eval_logits(model_, b.ids, b.key_mask,
                                   Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())})),
                   tgt, loss_sum, correct, n);
    }
    return finish_eval(loss_sum, correct, n);
  }
  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    attention_maps(Split::valid, 0, maps, mask);
  }
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const ClmBatch b = data_.source->batch(split, index);
    mask = b.key_mask;
    model_.hidden(b.ids, b.key_mask, false, 0, &maps);
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& logits) override {
    NoGradGuard ng;
    model_.capture_hidden(&hidden);
    const Var h = model_.hidden(ids, Tensor(), false, 0, &maps);
    model_.capture_hidden(nullptr);
    logits = model_.lm_head(h).data();
  }
  nlohmann::json hf_config() const override {
    nlohmann::json j = gpt2_hf_config(cfg_.model, data_.eos_id);
    j["architectures"] = nlohmann::json::array({"GPT2LMHeadModel"});
    return j;
  }

 private:
  GPT2LMHeadModel model_;
};

}  // namespace

std::unique_ptr<Task> make_mlm_task(const RunConfig& cfg) { return std::make_unique<MlmTask>(cfg); }
std::unique_ptr<Task> make_clm_task(const RunConfig& cfg) { return std::make_unique<ClmTask>(cfg); }

}  // namespace saobp
