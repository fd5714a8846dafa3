#include "model/bert.h"

#include "autograd/ops.h"
#include "model/blocks.h"
#include "model/sizes.h"
#include "tensor/kernels.h"

namespace saobp {

void EncoderConfig::validate() const {
  validate_sizes({vocab, max_positions, hidden, layers, heads, intermediate, dropout, positions, rope_base},
                 attention);
}

EncoderConfig bert_mini() { return {}; }
EncoderConfig bert_small() {
  EncoderConfig c;
  c.hidden = 512, c.heads = 8, c.intermediate = 2048, c.attention.lambda = 0.08;
  return c;
}
EncoderConfig bert_medium() {
  EncoderConfig c = bert_small();
  c.layers = 8, c.attention.lambda = 0.05;
  return c;
}

std::vector<ParamSpec> bert_param_specs(const EncoderConfig& cfg) {
  const int64_t C = cfg.hidden, I = cfg.intermediate;
  const double sd = cfg.init_std;
  std::vector<ParamSpec> s;
  s.push_back({"bert.embeddings.word_embeddings.weight", {cfg.vocab, C}, Init::normal, sd});
  if (cfg.positions == PositionKind::learned)
    s.push_back({"bert.embeddings.position_embeddings.weight", {cfg.max_positions, C}, Init::normal, sd});
  s.push_back({"bert.embeddings.token_type_embeddings.weight", {cfg.type_vocab, C}, Init::normal, sd});
  s.push_back({"bert.embeddings.LayerNorm.weight", {C}, Init::ones, 0});
  s.push_back({"bert.embeddings.LayerNorm.bias", {C}, Init::zeros, 0});
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = fmt::format("bert.encoder.layer.{}.", l);
    auto linear = [&](const std::string& name, int64_t out, int64_t in) {
      s.push_back({p + name + ".weight", {out, in}, Init::normal, sd});
      s.push_back({p + name + ".bias", {out}, Init::zeros, 0});
    };
    auto layernorm = [&](const std::string& name) {
      s.push_back({p + name + ".weight", {C}, Init::ones, 0});
      s.push_back({p + name + ".bias", {C}, Init::zeros, 0});
    };
    linear("attention.self.query", C, C);
    linear("attention.self.key", C, C);
    linear("attention.self.value", C, C);
    linear("attention.output.dense", C, C);
    layernorm("attention.output.LayerNorm");
    linear("intermediate.dense", I, C);
    linear("output.dense", C, I);
    layernorm("output.LayerNorm");
    if (has_lambda_rho(cfg.attention))
      s.push_back({p + "attention.self.saobp_lambda_rho", {cfg.heads}, Init::zeros, 0});  // set to rho(λ)
  }
  if (!cfg.mlm_head) return s;
  s.push_back({"cls.predictions.transform.dense.weight", {C, C}, Init::normal, sd});
  s.push_back({"cls.predictions.transform.dense.bias", {C}, Init::zeros, 0});
  s.push_back({"cls.predictions.transform.LayerNorm.weight", {C}, Init::ones, 0});
  s.push_back({"cls.predictions.transform.LayerNorm.bias", {C}, Init::zeros, 0});
  s.push_back({"cls.predictions.bias", {cfg.vocab}, Init::zeros, 0});
  return s;
}

BertForMaskedLM::BertForMaskedLM(const EncoderConfig& cfg, uint64_t seed, DType dtype, Device device)
    : cfg_(cfg), seed_(seed), params_(seed, dtype, device) {
  cfg_.validate();
  params_.add_all(bert_param_specs(cfg_));
  const auto& P = params_;
  word_ = P.get("bert.embeddings.word_embeddings.weight");
  if (cfg_.positions == PositionKind::learned) pos_ = P.get("bert.embeddings.position_embeddings.weight");
  type_ = P.get("bert.embeddings.token_type_embeddings.weight");
  emb_ln_w_ = P.get("bert.embeddings.LayerNorm.weight"), emb_ln_b_ = P.get("bert.embeddings.LayerNorm.bias");
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    const std::string p = fmt::format("bert.encoder.layer.{}.", l);
    auto get = [&](const std::string& name, Var& w, Var& b) {
      w = P.get(p + name + ".weight"), b = P.get(p + name + ".bias");
    };
    Layer L;
    get("attention.self.query", L.q_w, L.q_b);
    get("attention.self.key", L.k_w, L.k_b);
    get("attention.self.value", L.v_w, L.v_b);
    get("attention.output.dense", L.ao_w, L.ao_b);
    get("attention.output.LayerNorm", L.ao_ln_w, L.ao_ln_b);
    get("intermediate.dense", L.i_w, L.i_b);
    get("output.dense", L.o_w, L.o_b);
    get("output.LayerNorm", L.o_ln_w, L.o_ln_b);
    if (has_lambda_rho(cfg_.attention)) {
      L.lambda_rho = P.get(p + "attention.self.saobp_lambda_rho");
      init_lambda_rho(L.lambda_rho, cfg_.attention, l);
    }
    layers_.push_back(L);
  }
  if (!cfg_.mlm_head) return;
  head_w_ = P.get("cls.predictions.transform.dense.weight"),
  head_b_ = P.get("cls.predictions.transform.dense.bias");
  head_ln_w_ = P.get("cls.predictions.transform.LayerNorm.weight");
  head_ln_b_ = P.get("cls.predictions.transform.LayerNorm.bias");
  head_bias_ = P.get("cls.predictions.bias");
}

Var BertForMaskedLM::encode(const Tensor& ids, const Tensor& type_ids, const Tensor& key_mask, bool training,
                            uint64_t step, std::vector<AttentionMaps>* maps) {
  if (ids.dim() != 2) fail("bert", "ids must be (B,T), got {}", ids.str());
  const int64_t B = ids.size(0), T = ids.size(1), NH = cfg_.heads;
  if (T > cfg_.max_positions)
    fail("bert", "sequence length {} exceeds model.max_positions {}", T, cfg_.max_positions);
  const double p = cfg_.dropout;
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const Tensor pos_ids = Tensor::from_vector(pos, {1, T}, ids.device());
  const Tensor types = type_ids.defined() ? type_ids : Tensor::zeros({B, T}, DType::i32, ids.device());
  Var x = embedding(word_, ids);  // (word + position) + type, in that order
  if (cfg_.positions == PositionKind::learned) x = add(x, embedding(pos_, pos_ids));
  x = add(x, embedding(type_, types));
  x = dropout(layernorm(x, emb_ln_w_, emb_ln_b_, cfg_.ln_eps), p, dropout_key(seed_, "embeddings", step),
              training);
  if (capture_) capture_->assign(1, x.data());
  if (maps) maps->clear();
  const bool keep_qk = qk_ && training;
  if (keep_qk) qk_->clear();
  const AttentionConfig acfg = cfg_.attention.call_config(false);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const Var lam = layer_lambda(cfg_.attention, L.lambda_rho, static_cast<int64_t>(l), NH, params_);
    Var q = split_heads(linear(x, L.q_w, L.q_b), NH), k = split_heads(linear(x, L.k_w, L.k_b), NH),
        v = split_heads(linear(x, L.v_w, L.v_b), NH);
    if (cfg_.positions == PositionKind::rope) q = rope(q, cfg_.rope_base), k = rope(k, cfg_.rope_base);
    if (keep_qk) qk_->emplace_back(q, k);
    AttentionMaps m;
    Var a = merge_heads(attention(q, k, v, key_mask, lam, acfg, maps ? &m : nullptr));
    if (maps) maps->push_back(m);
    const std::string site = fmt::format("layer.{}", l);
    a = dropout(linear(a, L.ao_w, L.ao_b), p, dropout_key(seed_, site + ".attention", step), training);
    x = layernorm(add(x, a), L.ao_ln_w, L.ao_ln_b, cfg_.ln_eps);
    Var h = linear(gelu(linear(x, L.i_w, L.i_b), false), L.o_w, L.o_b);
    h = dropout(h, p, dropout_key(seed_, site + ".output", step), training);
    x = layernorm(add(x, h), L.o_ln_w, L.o_ln_b, cfg_.ln_eps);
    if (capture_) capture_->push_back(x.data());
  }
  return x;
}

Var BertForMaskedLM::mlm_logits(const Var& hidden, const Tensor& positions) {
  const int64_t C = cfg_.hidden;
  if (!cfg_.mlm_head)
    fail("bert", "mlm_logits: this model was built without the MLM head (mlm_head = false)");
  Var rows = embedding(reshape(hidden, {-1, C}), positions);  // gather (N, C), scatter-add backward
  Var h = layernorm(gelu(linear(rows, head_w_, head_b_), false), head_ln_w_, head_ln_b_, cfg_.ln_eps);
  return linear(h, word_, head_bias_);  // decoder tied to the word embeddings
}

Var BertForMaskedLM::mlm_loss(const Var& hidden, const Tensor& labels) {
  const std::vector<int32_t> lab = labels.to_vector<int32_t>();
  std::vector<int32_t> pos, tgt;
  for (size_t i = 0; i < lab.size(); ++i)
    if (lab[i] != -100) pos.push_back(static_cast<int32_t>(i)), tgt.push_back(lab[i]);
  if (pos.empty()) fail("bert", "mlm_loss: no masked position in the batch");
  const Device d = hidden.device();
  Var logits = mlm_logits(hidden, Tensor::from_vector(pos, {static_cast<int64_t>(pos.size())}, d));
  return cross_entropy(logits, Tensor::from_vector(tgt, {static_cast<int64_t>(tgt.size())}, d));
}

}  // namespace saobp
