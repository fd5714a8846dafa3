// The language-model objectives: a body of model.family with its language-model head (BERT:
// masked LM, GPT-2: causal LM), over a synthetic or a corpus source (data_setup.h).
#include "autograd/ops.h"
#include "model/heads.h"
#include "train/data_setup.h"
#include "train/inference.h"
#include "train/task.h"

namespace saobp {

namespace {

// What differs between the two data kinds: the labels of a batch (-100 = not predicted; the
// causal LM's are the shifted targets) and the config.json of the model.
const Tensor& labels_of(const MlmBatch& b) { return b.labels; }
const Tensor& labels_of(const ClmBatch& b) { return b.targets; }
nlohmann::json hf_config_of(const ModelSection& m, const MlmData& d) {
  nlohmann::json j = bert_hf_config(m, d.pad_id);
  j["architectures"] = nlohmann::json::array({"BertForMaskedLM"});
  return j;
}
nlohmann::json hf_config_of(const ModelSection& m, const ClmData& d) {
  nlohmann::json j = gpt2_hf_config(m, d.eos_id);
  j["architectures"] = nlohmann::json::array({"GPT2LMHeadModel"});
  return j;
}

// The config, the data (MlmData or ClmData: a batch source and the tokenizer), the body and its
// language-model head.
template <class Data>
class LmTask : public Task {
 public:
  LmTask(const RunConfig& cfg, Data data)
      : cfg_(cfg), data_(std::move(data)), body_(make_body(cfg)), head_(make_lm_head(*body_)) {
    attach_regularizer(cfg, *body_);
  }
  ParamStore& params() override { return body_->params(); }
  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const auto b = data_.source->batch(Split::train, index);
    if (mask) *mask = b.key_mask;
    return reg_.add(head_->loss(body_->hidden(b.ids, Tensor(), b.key_mask, true, step, maps), labels_of(b)),
                    b.key_mask);
  }
  EvalResult evaluate() override {
    NoGradGuard ng;
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    std::vector<int32_t> pos, tgt;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const auto b = data_.source->batch(Split::valid, i);
      predicted_positions(labels_of(b), pos, tgt);
      if (pos.empty()) continue;
      const Tensor positions = Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())}, body_->device());
      score_logits(eval_logits(*body_, *head_, b.ids, b.key_mask, positions), tgt, loss_sum, correct, n);
    }
    return finish_eval(loss_sum, correct, n);
  }
  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    attention_maps(Split::valid, 0, maps, mask);
  }
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const auto b = data_.source->batch(split, index);
    mask = b.key_mask;
    body_->hidden(b.ids, Tensor(), b.key_mask, false, 0, &maps);
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& logits) override {
    inspect_lm(*body_, *head_, ids, maps, hidden, logits);
  }
  nlohmann::json hf_config() const override { return hf_config_of(cfg_.model, data_); }
  int64_t batch_size() const override { return cfg_.train.batch_size; }
  int64_t held_out_examples() const override { return data_.source->examples(Split::valid); }
  void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) override {
    const auto b = data_.source->batch(split, index);
    ids = b.ids, mask = b.key_mask;
  }
  const Tokenizer* tokenizer() const override { return data_.tokenizer.get(); }
  Body* body() override { return body_.get(); }
  Body* lm_body() override { return body_.get(); }
  LmHead* lm_head() override { return head_.get(); }
  // The trainer calls this before its first step: a corpus is tokenized here (or its cache
  // opened), not inside the first timed step; eval, analyze and inspect do not, so they prepare
  // only what their batches need (data_setup.h).
  void prepare_training() override { data_.prepare_training(); }

 private:
  RunConfig cfg_;
  Data data_;
  std::unique_ptr<Body> body_;
  std::unique_ptr<LmHead> head_;
};

}  // namespace

std::unique_ptr<Task> make_mlm_task(const RunConfig& cfg) {
  return std::make_unique<LmTask<MlmData>>(cfg, prepare_mlm_data(cfg));
}
std::unique_ptr<Task> make_clm_task(const RunConfig& cfg) {
  return std::make_unique<LmTask<ClmData>>(cfg, prepare_clm_data(cfg));
}

}  // namespace saobp
