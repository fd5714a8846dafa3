#include "model/bert.h"

#include "autograd/ops.h"
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

BertForMaskedLM::BertForMaskedLM(const EncoderConfig& cfg, uint64_t seed, DType dtype, Device device)
    : cfg_(cfg), seed_(seed), params_(seed, dtype, device) {
  cfg_.validate();
  const int64_t C = cfg.hidden, I = cfg.intermediate;
  const double sd = cfg.init_std;
  auto& P = params_;
  word_ = P.add("bert.embeddings.word_embeddings.weight", {cfg.vocab, C}, Init::normal, sd);
  if (cfg.positions == PositionKind::learned)
    pos_ = P.add("bert.embeddings.position_embeddings.weight", {cfg.max_positions, C}, Init::normal, sd);
  type_ = P.add("bert.embeddings.token_type_embeddings.weight", {cfg.type_vocab, C}, Init::normal, sd);
  emb_ln_w_ = P.add("bert.embeddings.LayerNorm.weight", {C}, Init::ones);
  emb_ln_b_ = P.add("bert.embeddings.LayerNorm.bias", {C}, Init::zeros);
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = fmt::format("bert.encoder.layer.{}.", l);
    Layer L;
    auto lin = [&](const std::string& name, int64_t out, int64_t in, Var& w, Var& b) {
      w = P.add(p + name + ".weight", {out, in}, Init::normal, sd);
      b = P.add(p + name + ".bias", {out}, Init::zeros);
    };
    lin("attention.self.query", C, C, L.q_w, L.q_b);
    lin("attention.self.key", C, C, L.k_w, L.k_b);
    lin("attention.self.value", C, C, L.v_w, L.v_b);
    lin("attention.output.dense", C, C, L.ao_w, L.ao_b);
    L.ao_ln_w = P.add(p + "attention.output.LayerNorm.weight", {C}, Init::ones);
    L.ao_ln_b = P.add(p + "attention.output.LayerNorm.bias", {C}, Init::zeros);
    lin("intermediate.dense", I, C, L.i_w, L.i_b);
    lin("output.dense", C, I, L.o_w, L.o_b);
    L.o_ln_w = P.add(p + "output.LayerNorm.weight", {C}, Init::ones);
    L.o_ln_b = P.add(p + "output.LayerNorm.bias", {C}, Init::zeros);
    if (cfg.attention.learnable_lambda && uses_lambda(cfg.attention.variant)) {
      L.lambda_rho = P.add(p + "attention.self.saobp_lambda_rho", {cfg.heads}, Init::zeros);
      kern::fill(L.lambda_rho.data(), lambda_to_rho(cfg.attention.lambda_for_layer(l)));
    }
    layers_.push_back(L);
  }
  if (!cfg.mlm_head) return;
  head_w_ = P.add("cls.predictions.transform.dense.weight", {C, C}, Init::normal, sd);
  head_b_ = P.add("cls.predictions.transform.dense.bias", {C}, Init::zeros);
  head_ln_w_ = P.add("cls.predictions.transform.LayerNorm.weight", {C}, Init::ones);
  head_ln_b_ = P.add("cls.predictions.transform.LayerNorm.bias", {C}, Init::zeros);
  head_bias_ = P.add("cls.predictions.bias", {cfg.vocab}, Init::zeros);
}

RngKey BertForMaskedLM::dropout_key(const std::string& site, uint64_t step) const {
  return RngKey{seed_, name_stream(site), step << 32};
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
  x = dropout(layernorm(x, emb_ln_w_, emb_ln_b_, cfg_.ln_eps), p, dropout_key("embeddings", step), training);
  if (capture_) capture_->assign(1, x.data());
  if (maps) maps->clear();
  const AttentionConfig acfg = cfg_.attention.call_config(false);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    Var lam;
    if (uses_lambda(acfg.variant))
      lam = L.lambda_rho.defined() ? lambda_learnable(L.lambda_rho)
                                   : lambda_constant(cfg_.attention.lambda_for_layer(static_cast<int64_t>(l)),
                                                     NH, params_.dtype(), params_.device());
    Var q = split_heads(linear(x, L.q_w, L.q_b), NH), k = split_heads(linear(x, L.k_w, L.k_b), NH),
        v = split_heads(linear(x, L.v_w, L.v_b), NH);
    if (cfg_.positions == PositionKind::rope) q = rope(q, cfg_.rope_base), k = rope(k, cfg_.rope_base);
    AttentionMaps m;
    Var a = merge_heads(attention(q, k, v, key_mask, lam, acfg, maps ? &m : nullptr));
    if (maps) maps->push_back(m);
    const std::string site = fmt::format("layer.{}", l);
    a = dropout(linear(a, L.ao_w, L.ao_b), p, dropout_key(site + ".attention", step), training);
    x = layernorm(add(x, a), L.ao_ln_w, L.ao_ln_b, cfg_.ln_eps);
    Var h = linear(gelu(linear(x, L.i_w, L.i_b), false), L.o_w, L.o_b);
    h = dropout(h, p, dropout_key(site + ".output", step), training);
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
