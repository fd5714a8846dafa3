#include "model/heads.h"

#include "autograd/ops.h"
#include "model/blocks.h"

namespace saobp {

namespace {

// The flat rows {i·T + offset(i)} of hidden (R,T,C) gathered: (R,C).
template <class Offset>
Var gather_rows(const Var& hidden, Offset offset) {
  const int64_t R = hidden.size(0), T = hidden.size(1);
  std::vector<int32_t> rows(static_cast<size_t>(R));
  for (int64_t i = 0; i < R; ++i) rows[static_cast<size_t>(i)] = static_cast<int32_t>(i * T + offset(i));
  return embedding(reshape(hidden, {-1, hidden.size(-1)}), Tensor::from_vector(rows, {R}, hidden.device()));
}

}  // namespace

Var tanh_composite(const Var& x) {
  return add_scalar(scale(exp(scale(softplus(scale(x, -2.0)), -1.0)), 2.0), -1.0);
}

// ---- language-model heads -------------------------------------------------------------------

std::vector<ParamSpec> mlm_head_param_specs(int64_t C, int64_t V, double init_std) {
  return {{"cls.predictions.transform.dense.weight", {C, C}, Init::normal, init_std},
          {"cls.predictions.transform.dense.bias", {C}, Init::zeros, 0},
          {"cls.predictions.transform.LayerNorm.weight", {C}, Init::ones, 0},
          {"cls.predictions.transform.LayerNorm.bias", {C}, Init::zeros, 0},
          {"cls.predictions.bias", {V}, Init::zeros, 0}};
}

MlmHead::MlmHead(Body& body) : body_(body) {
  const BodyShape& s = body.shape();
  ParamStore& P = body.params();
  P.add_all(mlm_head_param_specs(s.hidden, s.vocab, s.init_std));
  w_ = P.get("cls.predictions.transform.dense.weight"), b_ = P.get("cls.predictions.transform.dense.bias");
  ln_w_ = P.get("cls.predictions.transform.LayerNorm.weight");
  ln_b_ = P.get("cls.predictions.transform.LayerNorm.bias");
  bias_ = P.get("cls.predictions.bias");
}

Var MlmHead::transform_at(const Var& hidden, const Tensor& positions) {
  Var rows =
      embedding(reshape(hidden, {-1, body_.shape().hidden}), positions);  // (N,C), scatter-add backward
  return layernorm(gelu(linear(rows, w_, b_, body_.shape().gemm_inputs), false), ln_w_, ln_b_,
                   body_.shape().ln_eps);
}

Var MlmHead::logits_at(const Var& hidden, const Tensor& positions) {
  // The decoder is tied to the word embeddings.
  return linear(transform_at(hidden, positions), body_.token_embedding(), bias_, body_.shape().gemm_inputs);
}

Var MlmHead::logits(const Var& hidden) {
  const int64_t B = hidden.size(0), T = hidden.size(1);
  std::vector<int32_t> all(static_cast<size_t>(B * T));
  for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int32_t>(k);
  return reshape(logits_at(hidden, Tensor::from_vector(all, {B * T}, hidden.device())), {B, T, -1});
}

Var MlmHead::loss(const Var& hidden, const Tensor& labels) {
  const std::vector<int32_t> lab = labels.to_vector<int32_t>();
  std::vector<int32_t> pos, tgt;
  for (size_t i = 0; i < lab.size(); ++i)
    if (lab[i] != -100) pos.push_back(static_cast<int32_t>(i)), tgt.push_back(lab[i]);
  if (pos.empty()) fail("bert", "mlm_loss: no masked position in the batch");
  const Device d = hidden.device();
  const Var h = transform_at(hidden, Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())}, d));
  return linear_cross_entropy(h, body_.token_embedding(), bias_,
                              Tensor::from_vector(tgt, {static_cast<int64_t>(tgt.size())}), -100,
                              body_.shape().gemm_inputs);
}

Var CausalLmHead::loss(const Var& hidden, const Tensor& labels) {
  if (hidden.dim() != 3 || labels.shape() != Shape{hidden.size(0), hidden.size(1)})
    fail("gpt2", "lm_loss: targets {} do not match hidden states {}", labels.str(), hidden.data().str());
  // host labels cross in linear_cross_entropy, counted
  return linear_cross_entropy(hidden, body_.token_embedding(), Var(), labels, -100,
                              body_.shape().gemm_inputs);
}

Var CausalLmHead::logits(const Var& hidden) {
  return linear(hidden, body_.token_embedding(), Var(), body_.shape().gemm_inputs);
}

Var CausalLmHead::logits_at(const Var& hidden, const Tensor& positions) {
  return logits(embedding(reshape(hidden, {-1, hidden.size(-1)}), positions));
}

Var CausalLmHead::loss_of(const Var& logits, const Tensor& labels) {
  if (logits.dim() != 3 || labels.shape() != Shape{logits.size(0), logits.size(1)})
    fail("gpt2", "lm_loss: targets {} do not match logits {}", labels.str(), logits.data().str());
  return cross_entropy(logits, labels, -100);  // host labels cross in cross_entropy, counted
}

std::unique_ptr<LmHead> make_lm_head(Body& body) {
  if (body.shape().causal) return std::make_unique<CausalLmHead>(body);
  return std::make_unique<MlmHead>(body);
}

// ---- sequence heads ---------------------------------------------------------------------------

Pooler::Pooler(Body& body) : in_(body.shape().gemm_inputs) {
  const int64_t C = body.shape().hidden;
  w_ = body.params().add("bert.pooler.dense.weight", {C, C}, Init::normal, body.shape().init_std);
  b_ = body.params().add("bert.pooler.dense.bias", {C}, Init::zeros);
}

Var Pooler::operator()(const Var& first) const { return tanh_composite(linear(first, w_, b_, in_)); }

namespace {

// BertForSequenceClassification: [CLS] -> pooler -> dropout -> classifier.
class PooledClassifier : public SequenceHead {
 public:
  PooledClassifier(Body& body, int64_t K) : body_(body), pooler_(body) {
    const int64_t C = body.shape().hidden;
    w_ = body.params().add("classifier.weight", {K, C}, Init::normal, body.shape().init_std);
    b_ = body.params().add("classifier.bias", {K}, Init::zeros);
  }
  Var logits(const Var& hidden, const std::vector<int64_t>& lengths, bool training, uint64_t step) override {
    (void)lengths;
    Var pooled = pooler_(gather_rows(hidden, [](int64_t) { return int64_t{0}; }));
    const RngKey key = dropout_key(body_.seed(), "classifier.dropout", step);
    pooled = dropout(pooled, body_.shape().dropout, key, training);
    return linear(pooled, w_, b_, body_.shape().gemm_inputs);
  }
  std::vector<std::string> prefixes() const override { return {"bert.pooler.", "classifier."}; }

 private:
  Body& body_;
  Pooler pooler_;
  Var w_, b_;
};

// GPT2ForSequenceClassification: the last real token's state -> score (no bias). HF picks the
// last token that is not pad_token_id: the last real token, as here.
class LastTokenClassifier : public SequenceHead {
 public:
  LastTokenClassifier(Body& body, int64_t K) : in_(body.shape().gemm_inputs) {
    w_ = body.params().add("score.weight", {K, body.shape().hidden}, Init::normal, body.shape().init_std);
  }
  Var logits(const Var& hidden, const std::vector<int64_t>& lengths, bool training, uint64_t step) override {
    (void)training, (void)step;
    return linear(gather_rows(hidden, [&](int64_t i) { return lengths[static_cast<size_t>(i)] - 1; }), w_,
                  Var(), in_);
  }
  std::vector<std::string> prefixes() const override { return {"score."}; }

 private:
  GemmInputs in_;
  Var w_;
};

}  // namespace

std::unique_ptr<SequenceHead> make_sequence_head(Body& body, int64_t labels) {
  if (body.shape().causal) return std::make_unique<LastTokenClassifier>(body, labels);
  return std::make_unique<PooledClassifier>(body, labels);
}

Var MultipleChoiceHead::logits(const Var& hidden, const std::vector<int64_t>& lengths, int64_t endings,
                               bool training, uint64_t step) {
  return reshape(head_->logits(hidden, lengths, training, step), {-1, endings});
}

SpanHead::SpanHead(Body& body) : in_(body.shape().gemm_inputs) {
  const int64_t C = body.shape().hidden;
  w_ = body.params().add("qa_outputs.weight", {2, C}, Init::normal, body.shape().init_std);
  b_ = body.params().add("qa_outputs.bias", {2}, Init::zeros);
}

Var SpanHead::logits(const Var& hidden) const { return linear(hidden, w_, b_, in_); }

}  // namespace saobp
