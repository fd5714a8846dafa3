// A BERT-style encoder with the masked-LM head, laid out exactly as Hugging Face's
// BertForMaskedLM (tensor names and shapes): word + position + token-type embeddings,
// embedding LayerNorm, post-LN blocks, exact-erf GELU, LayerNorm eps 1e-12, and the MLM head
// (dense + GELU + LayerNorm + decoder tied to the word embeddings + bias). Attention is the
// SAOBP family (src/attention/attention.h), chosen by the config.
#pragma once
#include <utility>
#include <vector>

#include "attention/attention.h"
#include "model/params.h"
#include "model/positions.h"

namespace saobp {

struct EncoderConfig {
  int64_t vocab = 30522, hidden = 256, layers = 4, heads = 4, intermediate = 1024;
  int64_t max_positions = 512, type_vocab = 2;
  double dropout = 0.1, ln_eps = 1e-12, init_std = 0.02;
  AttentionSpec attention;
  // learned: position_embeddings added to the embeddings (HF's layout); rope: no such tensor,
  // RoPE on q and k in every layer; none: neither.
  PositionKind positions = PositionKind::learned;
  double rope_base = 10000;
  // false: no cls.predictions.* tensors (an encoder for a task head, as in HF's
  // BertForSequenceClassification); mlm_loss and mlm_logits then throw.
  bool mlm_head = true;
  void validate() const;
};

// The paper's sizes (Table 4): Mini 4/256/4/1024, Small 4/512/8/2048, Medium 8/512/8/2048.
EncoderConfig bert_mini();
EncoderConfig bert_small();
EncoderConfig bert_medium();

// Every tensor of BertForMaskedLM for `cfg` (the MLM head's when cfg.mlm_head), in registration
// order.
std::vector<ParamSpec> bert_param_specs(const EncoderConfig& cfg);

class BertForMaskedLM {
 public:
  BertForMaskedLM(const EncoderConfig& cfg, uint64_t seed, DType dtype = DType::f32,
                  Device device = Device::cpu());

  // ids, type_ids: (B,T) i32 (type_ids may be undefined: all 0); key_mask: (B,T) u8 (1 = token)
  // or undefined. Dropout draws from (seed, stream of the site, step). Returns (B,T,C).
  Var encode(const Tensor& ids, const Tensor& type_ids, const Tensor& key_mask, bool training, uint64_t step,
             std::vector<AttentionMaps>* maps = nullptr);
  // Mean cross-entropy of the MLM head over the positions whose label is not -100. Only those
  // rows go through the head (a gather), so the V-wide product costs 15% of all positions.
  Var mlm_loss(const Var& hidden, const Tensor& labels);
  // Logits (N, V) of the given flat positions (for evaluation and accuracy).
  Var mlm_logits(const Var& hidden, const Tensor& positions);

  const EncoderConfig& config() const { return cfg_; }
  ParamStore& params() { return params_; }
  // While set, encode() stores the hidden states in *hidden: the embeddings' output, then every
  // layer's output, (B,T,C) each (for `saobp inspect`). nullptr stops it.
  void capture_hidden(std::vector<Tensor>* hidden) { capture_ = hidden; }
  // While set, every training forward (training = true) stores each layer's (q, k) (B,NH,T,HS), after
  // RoPE, in *qk, replacing what it held: the input of Entropy-Reg (train/regularizer.h).
  void capture_qk(std::vector<std::pair<Var, Var>>* qk) { qk_ = qk; }

 private:
  std::vector<Tensor>* capture_ = nullptr;
  std::vector<std::pair<Var, Var>>* qk_ = nullptr;
  struct Layer {
    Var q_w, q_b, k_w, k_b, v_w, v_b, ao_w, ao_b, ao_ln_w, ao_ln_b, i_w, i_b, o_w, o_b, o_ln_w, o_ln_b;
    Var lambda_rho;  // learnable λ only
  };
  EncoderConfig cfg_;
  uint64_t seed_;
  ParamStore params_;
  Var word_, pos_, type_, emb_ln_w_, emb_ln_b_;  // pos_: positions == learned only
  std::vector<Layer> layers_;
  Var head_w_, head_b_, head_ln_w_, head_ln_b_, head_bias_;
};

}  // namespace saobp
