#include "model/bert.h"

#include "autograd/ops.h"
#include "model/blocks.h"
#include "tensor/kernels.h"

namespace saobp {

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
  return s;
}

BertEncoder::BertEncoder(const EncoderConfig& cfg, uint64_t seed, DType dtype, Device device)
    : Body(cfg, seed, dtype, device) {
  params_.add_all(bert_param_specs(cfg));
  const auto& P = params_;
  tokens_ = P.get("bert.embeddings.word_embeddings.weight");
  if (shape_.positions == PositionKind::learned) pos_ = P.get("bert.embeddings.position_embeddings.weight");
  type_ = P.get("bert.embeddings.token_type_embeddings.weight");
  emb_ln_w_ = P.get("bert.embeddings.LayerNorm.weight"), emb_ln_b_ = P.get("bert.embeddings.LayerNorm.bias");
  for (int64_t l = 0; l < shape_.layers; ++l) {
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
    L.lambda_rho = lambda_rho(l, p + "attention.self.saobp_lambda_rho");
    layers_.push_back(L);
  }
}

Var BertEncoder::hidden(const Tensor& ids_in, const Tensor& type_ids_in, const Tensor& key_mask_in,
                        bool training, uint64_t step, std::vector<AttentionMaps>* maps) {
  check_inputs("bert", ids_in, key_mask_in);
  const Tensor ids = on_device(ids_in), type_ids = on_device(type_ids_in), key_mask = on_device(key_mask_in);
  const int64_t B = ids.size(0), T = ids.size(1), NH = shape_.heads;
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const Tensor pos_ids = Tensor::from_vector(pos, {1, T}, ids.device());
  const Tensor types = type_ids.defined() ? type_ids : Tensor::zeros({B, T}, DType::i32, ids.device());
  Var x = embedding(tokens_, ids);  // (word + position) + type, in that order
  if (shape_.positions == PositionKind::learned) x = add(x, embedding(pos_, pos_ids));
  x = add(x, embedding(type_, types));
  x = drop(layernorm(x, emb_ln_w_, emb_ln_b_, shape_.ln_eps), "embeddings", step, training);
  const bool keep_qk = begin(x, maps, training);
  const GemmInputs in = shape_.gemm_inputs;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const Var lam = lambda_of(static_cast<int64_t>(l), L.lambda_rho);
    const Var q = split_heads(linear(x, L.q_w, L.q_b, in), NH),
              k = split_heads(linear(x, L.k_w, L.k_b, in), NH),
              v = split_heads(linear(x, L.v_w, L.v_b, in), NH);
    Var a = attend(q, k, v, key_mask, lam, keep_qk, maps);
    const std::string site = fmt::format("layer.{}", l);
    a = drop(linear(a, L.ao_w, L.ao_b, in), site + ".attention", step, training);
    x = layernorm(add(x, a), L.ao_ln_w, L.ao_ln_b, shape_.ln_eps);
    Var h = linear(gelu(linear(x, L.i_w, L.i_b, in), false), L.o_w, L.o_b, in);
    h = drop(h, site + ".output", step, training);
    x = layernorm(add(x, h), L.o_ln_w, L.o_ln_b, shape_.ln_eps);
    captured(x);
  }
  return x;
}

}  // namespace saobp
