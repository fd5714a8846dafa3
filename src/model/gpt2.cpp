#include "model/gpt2.h"

#include <cmath>

#include "autograd/ops.h"
#include "model/blocks.h"
#include "tensor/kernels.h"

namespace saobp {

// GPT-2's initialization (HF _init_weights): N(0, init_std) for embeddings and Conv1D weights,
// with the residual projections (attn.c_proj, mlp.c_proj) at init_std / sqrt(2 layers);
// biases zero, LayerNorm weight one.
std::vector<ParamSpec> gpt2_param_specs(const DecoderConfig& cfg) {
  const int64_t C = cfg.hidden, I = cfg.intermediate;
  const double sd = cfg.init_std, proj_sd = sd / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  std::vector<ParamSpec> s;
  s.push_back({"transformer.wte.weight", {cfg.vocab, C}, Init::normal, sd});
  if (cfg.positions == PositionKind::learned)
    s.push_back({"transformer.wpe.weight", {cfg.max_positions, C}, Init::normal, sd});
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = fmt::format("transformer.h.{}.", l);
    s.push_back({p + "ln_1.weight", {C}, Init::ones, 0});
    s.push_back({p + "ln_1.bias", {C}, Init::zeros, 0});
    s.push_back({p + "attn.c_attn.weight", {C, 3 * C}, Init::normal, sd});  // Conv1D: [in, out]
    s.push_back({p + "attn.c_attn.bias", {3 * C}, Init::zeros, 0});
    s.push_back({p + "attn.c_proj.weight", {C, C}, Init::normal, proj_sd});
    s.push_back({p + "attn.c_proj.bias", {C}, Init::zeros, 0});
    s.push_back({p + "ln_2.weight", {C}, Init::ones, 0});
    s.push_back({p + "ln_2.bias", {C}, Init::zeros, 0});
    s.push_back({p + "mlp.c_fc.weight", {C, I}, Init::normal, sd});
    s.push_back({p + "mlp.c_fc.bias", {I}, Init::zeros, 0});
    s.push_back({p + "mlp.c_proj.weight", {I, C}, Init::normal, proj_sd});
    s.push_back({p + "mlp.c_proj.bias", {C}, Init::zeros, 0});
    if (has_lambda_rho(cfg.attention))
      s.push_back({p + "attn.saobp_lambda_rho", {cfg.heads}, Init::zeros, 0});  // set to rho(λ) below
  }
  s.push_back({"transformer.ln_f.weight", {C}, Init::ones, 0});
  s.push_back({"transformer.ln_f.bias", {C}, Init::zeros, 0});
  return s;
}

Gpt2Decoder::Gpt2Decoder(const DecoderConfig& cfg, uint64_t seed, DType dtype, Device device)
    : Body(cfg, seed, dtype, device) {
  params_.add_all(gpt2_param_specs(cfg));
  const auto& P = params_;
  tokens_ = P.get("transformer.wte.weight");
  if (shape_.positions == PositionKind::learned) wpe_ = P.get("transformer.wpe.weight");
  for (int64_t l = 0; l < shape_.layers; ++l) {
    const std::string p = fmt::format("transformer.h.{}.", l);
    Block b;
    b.ln1_w = P.get(p + "ln_1.weight"), b.ln1_b = P.get(p + "ln_1.bias");
    b.attn_w = P.get(p + "attn.c_attn.weight"), b.attn_b = P.get(p + "attn.c_attn.bias");
    b.aproj_w = P.get(p + "attn.c_proj.weight"), b.aproj_b = P.get(p + "attn.c_proj.bias");
    b.ln2_w = P.get(p + "ln_2.weight"), b.ln2_b = P.get(p + "ln_2.bias");
    b.fc_w = P.get(p + "mlp.c_fc.weight"), b.fc_b = P.get(p + "mlp.c_fc.bias");
    b.mproj_w = P.get(p + "mlp.c_proj.weight"), b.mproj_b = P.get(p + "mlp.c_proj.bias");
    b.lambda_rho = lambda_rho(l, p + "attn.saobp_lambda_rho");
    blocks_.push_back(b);
  }
  lnf_w_ = P.get("transformer.ln_f.weight");
  lnf_b_ = P.get("transformer.ln_f.bias");
}

Var Gpt2Decoder::embed(const Tensor& ids, int64_t offset, bool training, uint64_t step) const {
  const int64_t T = ids.size(1);
  Var x = embedding(tokens_, ids);  // (B,T,C)
  if (shape_.positions == PositionKind::learned) {
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(offset + t);
    x = add(x, embedding(wpe_, Tensor::from_vector(pos, {1, T}, ids.device())));
  }
  return drop(x, "transformer.drop", step, training);
}

Var Gpt2Decoder::block(size_t l, const Var& x_in, bool training, uint64_t step, const Attend& attend) const {
  const Block& b = blocks_[l];
  const std::string site = fmt::format("transformer.h.{}.", l);
  const int64_t C = shape_.hidden, NH = shape_.heads;
  const Var lam = lambda_of(static_cast<int64_t>(l), b.lambda_rho);
  // attn: ln_1 -> c_attn -> q, k, v (B,NH,T,HS) -> (RoPE on q, k) -> causal attention -> c_proj.
  // c_attn's (B,T,3C) output is laid out as (3,B,NH,T,HS) by one copy, and q, k, v are its
  // three contiguous slices (one copy forward and one back, where splitting first would copy
  // each third twice: to make it a (B,T,NH,HS) view, then to make the heads contiguous).
  const int64_t B = x_in.size(0), T = x_in.size(1), HS = C / NH;
  const GemmInputs in = shape_.gemm_inputs;
  const Var qkv = conv1d(layernorm(x_in, b.ln1_w, b.ln1_b, shape_.ln_eps), b.attn_w, b.attn_b, in);
  const Var heads = contiguous(permute(reshape(qkv, {B, T, 3, NH, HS}), {2, 0, 3, 1, 4}));
  const auto head = [&](int64_t i) { return reshape(slice(heads, 0, i, i + 1), {B, NH, T, HS}); };
  Var a = attend(head(0), head(1), head(2), lam);
  a = drop(conv1d(a, b.aproj_w, b.aproj_b, in), site + "attn.resid_dropout", step, training);
  const Var x = add(x_in, a);
  // mlp: ln_2 -> c_fc -> GELU (tanh) -> c_proj
  Var h = conv1d(gelu(conv1d(layernorm(x, b.ln2_w, b.ln2_b, shape_.ln_eps), b.fc_w, b.fc_b, in), true),
                 b.mproj_w, b.mproj_b, in);
  return add(x, drop(h, site + "mlp.dropout", step, training));
}

Var Gpt2Decoder::hidden(const Tensor& ids_in, const Tensor& type_ids, const Tensor& key_mask_in,
                        bool training, uint64_t step, std::vector<AttentionMaps>* maps) {
  (void)type_ids;
  check_inputs("gpt2", ids_in, key_mask_in);
  const Tensor ids = on_device(ids_in), key_mask = on_device(key_mask_in);
  Var x = embed(ids, 0, training, step);
  const bool keep_qk = begin(x, maps, training);
  const Attend full = [&](const Var& q, const Var& k, const Var& v, const Var& lam) {
    return attend(q, k, v, key_mask, lam, keep_qk, maps);
  };
  for (size_t l = 0; l < blocks_.size(); ++l) {
    x = block(l, x, training, step, full);
    captured(x);
  }
  Var out = layernorm(x, lnf_w_, lnf_b_, shape_.ln_eps);
  captured(out);
  return out;
}

DecodeCache Gpt2Decoder::decode_cache(int64_t batch, int64_t capacity) {
  return make_decode_cache(batch, capacity, [this](int64_t l) {
    return lambda_of(l, blocks_[static_cast<size_t>(l)].lambda_rho);
  });
}

Var Gpt2Decoder::extend(const Tensor& ids_in, DecodeCache& cache) {
  NoGradGuard no_grad;
  check_extend(ids_in, cache);
  const Tensor ids = on_device(ids_in);
  Var x = embed(ids, cache.length(), false, 0);
  for (size_t l = 0; l < blocks_.size(); ++l)
    x = block(l, x, false, 0, [&](const Var& q, const Var& k, const Var& v, const Var&) {
      return attend_cached(q, k, v, cache.layers[l]);
    });
  return layernorm(x, lnf_w_, lnf_b_, shape_.ln_eps);
}

}  // namespace saobp
