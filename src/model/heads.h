// The heads of Hugging Face's task models, each over a Body (model/body.h) and registering its
// tensors in the body's ParamStore under HF's names, after the body's:
//   MlmHead             BertForMaskedLM's cls.predictions.*: dense + GELU + LayerNorm + decoder
//                       tied to the token embedding + bias
//   CausalLmHead        GPT2LMHeadModel's lm_head: tied to the token embedding, no tensor
//   Pooler              BertModel's pooler: the first token's state -> dense + tanh
//   SequenceHead        *ForSequenceClassification (K labels; K = 1: regression):
//                       BERT: pooler -> dropout -> classifier (weight, bias);
//                       GPT-2: the last real token's state -> score (weight, no bias)
//   MultipleChoiceHead  BertForMultipleChoice: each (context, ending) row through a one-logit
//                       SequenceHead, an example's row logits side by side
//   SpanHead            BertForQuestionAnswering's / GPT2ForQuestionAnswering's qa_outputs
//                       (weight (2,C), bias (2), no dropout): start and end logits per token
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/body.h"

namespace saobp {

// A language-model head: what a pretraining objective trains and evaluates.
class LmHead {
 public:
  virtual ~LmHead() = default;
  // The mean cross-entropy of hidden (B,T,C) against labels (B,T) i32 over the positions whose
  // label is not -100.
  virtual Var loss(const Var& hidden, const Tensor& labels) = 0;
  // Logits (N,V) of the flat positions (N) i32 into B·T: only those rows go through the head.
  virtual Var logits_at(const Var& hidden, const Tensor& positions) = 0;
  // Logits (B,T,V) of every position.
  virtual Var logits(const Var& hidden) = 0;
};

// The MLM head's tensors (cls.predictions.*) for hidden size C and vocabulary V, in
// registration order.
std::vector<ParamSpec> mlm_head_param_specs(int64_t C, int64_t V, double init_std);

class MlmHead : public LmHead {
 public:
  explicit MlmHead(Body& body);
  // Only the labelled rows go through the head (a gather), so the V-wide product costs 15% of
  // all positions. Throws when no position is labelled.
  Var loss(const Var& hidden, const Tensor& labels) override;
  Var logits_at(const Var& hidden, const Tensor& positions) override;
  Var logits(const Var& hidden) override;

 private:
  // The transform before the decoder (dense, GELU, LayerNorm) of the rows `positions` of hidden.
  Var transform_at(const Var& hidden, const Tensor& positions);

  Body& body_;
  Var w_, b_, ln_w_, ln_b_, bias_;
};

class CausalLmHead : public LmHead {
 public:
  explicit CausalLmHead(Body& body) : body_(body) {}
  // labels: already aligned with the positions (labels[t] is the token after position t: the
  // caller shifts, as llm.c's data loader does; HF's GPT2LMHeadModel shifts inside).
  // The decoder and the loss in one node (linear_cross_entropy): the logits stay inside it.
  Var loss(const Var& hidden, const Tensor& labels) override;
  Var logits_at(const Var& hidden, const Tensor& positions) override;
  Var logits(const Var& hidden) override;  // (...,V): hidden (...,C) times the token embeddingᵀ
  // The loss of logits (B,T,V) already computed.
  static Var loss_of(const Var& logits, const Tensor& labels);

 private:
  Body& body_;
};

// The language-model head of the body's family: a causal body's CausalLmHead, else MlmHead.
std::unique_ptr<LmHead> make_lm_head(Body& body);

class Pooler {
 public:
  explicit Pooler(Body& body);             // bert.pooler.dense.*
  Var operator()(const Var& first) const;  // first: (N,C) the first tokens' states -> (N,C)

 private:
  GemmInputs in_;
  Var w_, b_;
};

class SequenceHead {
 public:
  virtual ~SequenceHead() = default;
  // hidden (R,T,C) and each row's number of real tokens (its padding comes after them) ->
  // logits (R,K). Dropout draws from (body seed, "classifier.dropout", step).
  virtual Var logits(const Var& hidden, const std::vector<int64_t>& lengths, bool training,
                     uint64_t step) = 0;
  // Name prefixes of the head's tensors, which a pretrained body lacks (train/pretrained.h).
  virtual std::vector<std::string> prefixes() const = 0;
};

// The sequence head of the body's family (a causal body: GPT-2's) with `labels` outputs.
std::unique_ptr<SequenceHead> make_sequence_head(Body& body, int64_t labels);

class MultipleChoiceHead {
 public:
  explicit MultipleChoiceHead(Body& body) : head_(make_sequence_head(body, 1)) {}
  // hidden (N·E,T,C), the E rows of an example adjacent -> logits (N,E).
  Var logits(const Var& hidden, const std::vector<int64_t>& lengths, int64_t endings, bool training,
             uint64_t step);
  std::vector<std::string> prefixes() const { return head_->prefixes(); }

 private:
  std::unique_ptr<SequenceHead> head_;
};

class SpanHead {
 public:
  explicit SpanHead(Body& body);        // qa_outputs.*
  Var logits(const Var& hidden) const;  // (R,T,C) -> (R,T,2): start, end
  std::vector<std::string> prefixes() const { return {"qa_outputs."}; }

 private:
  GemmInputs in_;
  Var w_, b_;
};

// tanh(x) = 2 σ(2x) - 1 with σ(z) = exp(-softplus(-z)), composed from differentiable ops: stable
// at both ends (exp never sees a positive argument). BERT's pooler activation.
Var tanh_composite(const Var& x);

// A body with one head, as Hugging Face's *LMHeadModel / *ForMaskedLM classes hold them.
template <class BodyT, class HeadT>
class WithHead {
 public:
  template <class Config>
  WithHead(const Config& cfg, uint64_t seed, DType dtype, Device device)
      : body_(cfg, seed, dtype, device), head_(body_) {}
  ParamStore& params() { return body_.params(); }
  BodyT& body() { return body_; }
  HeadT& head() { return head_; }
  void capture_hidden(std::vector<Tensor>* hidden) { body_.capture_hidden(hidden); }
  void capture_qk(std::vector<std::pair<Var, Var>>* qk) { body_.capture_qk(qk); }

 protected:
  BodyT body_;
  HeadT head_;
};

}  // namespace saobp
