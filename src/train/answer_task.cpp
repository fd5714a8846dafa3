// The counting tasks answered by a causal decoder's language-model head (data.answer = "direct"
// or "chain", data/tasks.h): the decoder reads the example and writes its answer after it, `=>
// #c` or the chain of thought `#r1 ... #rm => #c`. Training is next-token prediction on the
// answer's tokens only (every other label is -100); the model's own inputs there are the true
// answer tokens (teacher forcing).
//
// evaluate() (during training) is teacher-forced at train.seq_len: the loss over the answer's
// tokens and the accuracy of the final count given the true tokens before it. final_evaluation()
// is by generation, as a user of the model would get the answer: each test example of a length
// alone as the prompt, then greedy decoding with the decoder's cache (Body::extend), a whole batch
// of equal-length prompts in lockstep, until every row has written `=>` and one more token (or
// the budget of the longest true answer plus kSlack tokens is spent). An example is correct when
// the token after its first `=>` is its count: exact match of the final count. For the chain,
// "chain_exact" is the share whose every running count was also right.
#include <algorithm>
#include <filesystem>
#include <memory>

#include "autograd/ops.h"
#include "data/tasks.h"
#include "model/heads.h"
#include "train/inference.h"
#include "train/task.h"
#include "train/task_eval.h"

namespace saobp {

namespace {

// Tokens a generated answer may run past the longest true answer of its length before it is cut.
constexpr int64_t kSlack = 8;

class AnswerTask : public Task {
 public:
  explicit AnswerTask(const RunConfig& cfg)
      : cfg_(cfg), spec_(tasks::task_spec(cfg.data.task)), chain_(cfg.data.answer == "chain") {
    const ModelSection& m = cfg.model;
    const tasks::Kind k = spec_.kind;
    if (k != tasks::Kind::count_sum && k != tasks::Kind::count_ones && k != tasks::Kind::count_random &&
        k != tasks::Kind::count_word)
      fail("train",
           "data.answer = \"{}\": data.task '{}' is not a counting task (count_sum, count_ones, "
           "count_random, count_word, each also _sep)",
           cfg.data.answer, spec_.name);
    if (m.vocab_size < tasks::kLmVocabSize)
      fail("train",
           "data.answer = \"{}\": model.vocab_size {} is below the {} tokens of the tasks and the counts "
           "(data/tasks.h kLmVocabSize)",
           cfg.data.answer, m.vocab_size, tasks::kLmVocabSize);
    if (cfg.train.seq_len < spec_.min_length || cfg.train.seq_len > tasks::kMaxLength)
      fail("train", "data.task '{}': train.seq_len {} is outside [{}, {}]", spec_.name, cfg.train.seq_len,
           spec_.min_length, tasks::kMaxLength);
    if (const int64_t n = cfg.train.seq_len + max_answer(cfg.train.seq_len); n > m.max_positions)
      fail("train",
           "data.answer = \"{}\": the longest training sequence with its answer is {} tokens, above "
           "model.max_positions {}",
           cfg.data.answer, n, m.max_positions);
    body_ = make_body(cfg);
    head_ = make_lm_head(*body_);
    attach_regularizer(cfg, *body_);
  }

  ParamStore& params() override { return body_->params(); }
  Body* body() override { return body_.get(); }
  Body* lm_body() override { return body_.get(); }
  LmHead* lm_head() override { return head_.get(); }
  int64_t batch_size() const override { return cfg_.train.batch_size; }

  Var train_loss(int64_t index, uint64_t step, std::vector<AttentionMaps>* maps, Tensor* mask) override {
    const Batch b = train_batch(index);
    if (mask) *mask = b.key_mask;
    return reg_.add(head_->loss(body_->hidden(b.ids, Tensor(), b.key_mask, true, step, maps), b.labels),
                    b.key_mask);
  }

  EvalResult evaluate() override {
    NoGradGuard ng;
    double all_sum = 0;
    int64_t correct = 0, n = 0, all_correct = 0, all_n = 0;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const Batch b = test_batch(cfg_.train.seq_len, i);
      std::vector<int32_t> pos, tgt;
      predicted_positions(b.labels, pos, tgt);
      const Var logits =
          eval_logits(*body_, *head_, b.ids, b.key_mask,
                      Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())}, body_->device()));
      score_logits(logits, tgt, all_sum, all_correct, all_n);  // every answer token
      // The final count: each example's last predicted position, its argmax against the count.
      const Tensor host = logits.data().to(Device::cpu()).to(DType::f32);
      const std::vector<float> v = host.to_vector<float>();
      const int64_t V = host.size(-1);
      for (size_t r = 0; r < pos.size(); ++r)
        if (r + 1 == pos.size() || pos[r + 1] / b.T != pos[r] / b.T) {
          const float* row = v.data() + static_cast<int64_t>(r) * V;
          correct += std::max_element(row, row + V) - row == tgt[r];
          ++n;
        }
    }
    EvalResult r = finish_eval(all_sum, correct, n);                      // accuracy: the final count's
    r.loss = all_sum / static_cast<double>(std::max<int64_t>(all_n, 1));  // per answer token
    r.perplexity = std::exp(r.loss);
    return r;
  }

  void probe(std::vector<AttentionMaps>& maps, Tensor& mask) override {
    attention_maps(Split::valid, 0, maps, mask);
  }
  void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) override {
    NoGradGuard ng;
    const Batch b = split == Split::train ? train_batch(index) : test_batch(cfg_.train.seq_len, index);
    mask = b.key_mask;
    body_->hidden(b.ids, Tensor(), b.key_mask, false, 0, &maps);
  }
  void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) override {
    const Batch b = split == Split::train ? train_batch(index) : test_batch(cfg_.train.seq_len, index);
    ids = b.ids, mask = b.key_mask;
  }
  void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
               Tensor& logits) override {
    inspect_lm(*body_, *head_, ids, maps, hidden, logits);
  }

  nlohmann::json final_evaluation(const std::string& out_dir, bool print) override {
    return evaluate_lengths(
        cfg_, spec_, [this](int64_t L) { return max_answer(L); },
        [this](int64_t L) { return generate_at(L); }, out_dir, print,
        {{"answer", cfg_.data.answer}, {"evaluated_by", "greedy generation"}},
        chain_ ? std::vector<std::string>{"chain_exact"} : std::vector<std::string>{});
  }

  nlohmann::json hf_config() const override {
    nlohmann::json j = gpt2_hf_config(cfg_.model, tasks::kCls);
    j["architectures"] = nlohmann::json::array({"GPT2LMHeadModel"});
    j["saobp_task"] = spec_.name;
    j["saobp_answer"] = cfg_.data.answer;
    return j;
  }

 private:
  RunConfig cfg_;
  tasks::TaskSpec spec_;
  bool chain_ = false;
  std::unique_ptr<Body> body_;
  std::unique_ptr<LmHead> head_;

  struct Batch {
    Tensor ids, key_mask, labels;  // (B,T): the examples with their answers; labels -100 but on answers
    int64_t T = 0;
    std::vector<std::vector<int32_t>> prompts, answers;
  };

  // The most answer tokens an example of length L can have: every token after [CLS] an item.
  int64_t max_answer(int64_t L) const { return chain_ ? L + 1 : 2; }

  Batch batch_of(const std::vector<tasks::Example>& examples) const {
    Batch b;
    for (const tasks::Example& e : examples) {
      b.prompts.push_back(e.tokens);
      b.answers.push_back(tasks::answer_tokens(spec_, e.tokens, chain_));
      b.T = std::max<int64_t>(b.T, static_cast<int64_t>(e.tokens.size() + b.answers.back().size()));
    }
    const auto B = static_cast<int64_t>(examples.size());
    std::vector<int32_t> ids(static_cast<size_t>(B * b.T), tasks::kPad), labels(ids.size(), -100);
    std::vector<uint8_t> mask(ids.size(), 0);
    for (int64_t r = 0; r < B; ++r) {
      std::vector<int32_t> seq = b.prompts[static_cast<size_t>(r)];
      const std::vector<int32_t>& a = b.answers[static_cast<size_t>(r)];
      seq.insert(seq.end(), a.begin(), a.end());
      const auto at = static_cast<size_t>(r * b.T), P = b.prompts[static_cast<size_t>(r)].size();
      std::copy(seq.begin(), seq.end(), ids.begin() + static_cast<ptrdiff_t>(at));
      std::fill_n(mask.begin() + static_cast<ptrdiff_t>(at), seq.size(), uint8_t{1});
      // Position p predicts token p + 1: the answer's tokens are predicted from P - 1 on.
      for (size_t k = 0; k < a.size(); ++k) labels[at + P - 1 + k] = a[k];
    }
    b.ids = Tensor::from_vector(ids, {B, b.T});
    b.key_mask = Tensor::from_vector(mask, {B, b.T});
    b.labels = Tensor::from_vector(labels, {B, b.T});
    return b;
  }

  std::vector<tasks::Example> examples(tasks::Split split, const std::vector<int64_t>& lengths,
                                       uint64_t first) const {
    std::vector<tasks::Example> out;
    for (size_t i = 0; i < lengths.size(); ++i)
      out.push_back(tasks::generate(spec_, cfg_.train.seed, split, lengths[i], first + i));
    return out;
  }
  Batch train_batch(int64_t index) const {
    const int64_t B = cfg_.train.batch_size;
    const auto first = static_cast<uint64_t>(index * B);
    return batch_of(examples(tasks::Split::train,
                             tasks::train_lengths(spec_, cfg_.train.seed, first, B, cfg_.train.seq_len),
                             first));
  }
  // Batch `i` of the test split at length L: examples i·B .. i·B + B - 1 of that length, the same
  // examples the classification form is evaluated on.
  Batch test_batch(int64_t L, int64_t i) const {
    const int64_t B = cfg_.train.batch_size;
    return batch_of(examples(tasks::Split::test, std::vector<int64_t>(static_cast<size_t>(B), L),
                             static_cast<uint64_t>(i * B)));
  }

  // Greedy generation after each test prompt of length L (train.eval_batches batches); the
  // teacher-forced loss over the answers beside it.
  LengthEval generate_at(int64_t L) {
    NoGradGuard ng;
    LengthEval out;
    int64_t correct = 0, chain_ok = 0, n = 0;
    double loss_sum = 0;
    int64_t loss_n = 0, unused = 0;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const Batch b = test_batch(L, i);
      const auto B = static_cast<int64_t>(b.prompts.size());
      {
        std::vector<int32_t> pos, tgt;
        predicted_positions(b.labels, pos, tgt);
        score_logits(
            eval_logits(*body_, *head_, b.ids, b.key_mask,
                        Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())}, body_->device())),
            tgt, loss_sum, unused, loss_n);
      }
      size_t longest = 0;
      for (const auto& a : b.answers) longest = std::max(longest, a.size());
      const int64_t budget =
          std::min<int64_t>(static_cast<int64_t>(longest) + kSlack, cfg_.model.max_positions - L);
      std::vector<int32_t> prompt_ids;
      for (const auto& p : b.prompts) prompt_ids.insert(prompt_ids.end(), p.begin(), p.end());
      DecodeCache cache = body_->decode_cache(B, L + budget);
      Var h = body_->extend(Tensor::from_vector(prompt_ids, {B, L}), cache);
      std::vector<std::vector<int32_t>> written(static_cast<size_t>(B));
      std::vector<bool> done(static_cast<size_t>(B), false);
      for (int64_t t = 0; t < budget; ++t) {
        const int64_t n_new = h.size(1);
        const Tensor logits =
            head_->logits(slice(h, 1, n_new - 1, n_new)).data().to(Device::cpu()).to(DType::f32);
        const std::vector<float> v = logits.to_vector<float>();
        const int64_t V = logits.size(-1);
        std::vector<int32_t> next(static_cast<size_t>(B));
        for (int64_t r = 0; r < B; ++r) {
          const float* row = v.data() + r * V;
          next[static_cast<size_t>(r)] = static_cast<int32_t>(std::max_element(row, row + V) - row);
          std::vector<int32_t>& w = written[static_cast<size_t>(r)];
          if (done[static_cast<size_t>(r)]) continue;
          w.push_back(next[static_cast<size_t>(r)]);
          // Done once `=>` and the token after it are written.
          done[static_cast<size_t>(r)] = w.size() >= 2 && w[w.size() - 2] == tasks::kAnswer;
        }
        if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }) || t + 1 == budget) break;
        h = body_->extend(Tensor::from_vector(next, {B, 1}), cache);
      }
      for (int64_t r = 0; r < B; ++r) {
        const std::vector<int32_t>& w = written[static_cast<size_t>(r)];
        const std::vector<int32_t>& a = b.answers[static_cast<size_t>(r)];
        const auto arrow = std::find(w.begin(), w.end(), tasks::kAnswer);
        const bool right = arrow != w.end() && arrow + 1 != w.end() && *(arrow + 1) == a.back();
        correct += right;
        chain_ok += right && std::equal(w.begin(), arrow + 2, a.begin(), a.end());
        ++n;
      }
    }
    out.accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(n, 1));
    out.loss = loss_sum / static_cast<double>(std::max<int64_t>(loss_n, 1));
    out.examples = n;
    if (chain_)
      out.extra["chain_exact"] = static_cast<double>(chain_ok) / static_cast<double>(std::max<int64_t>(n, 1));
    return out;
  }
};

}  // namespace

std::unique_ptr<Task> make_answer_task(const RunConfig& cfg) { return std::make_unique<AnswerTask>(cfg); }

}  // namespace saobp
