// A GPT-2-style decoder laid out exactly as Hugging Face's GPT2Model (tensor names, shapes and
// the Conv1D [in, out] weight layout, under "transformer."): token + learned position
// embeddings, pre-LN blocks (ln_1 -> causal attention -> residual, ln_2 -> MLP with tanh GELU ->
// residual), final ln_f. LayerNorm eps 1e-5. Attention is the SAOBP family
// (src/attention/attention.h) with causal masking; positions may instead be rotary (RoPE on q
// and k) or absent. GPT2LMHeadModel is the decoder with the LM head tied to the token
// embeddings (logits = h wteᵀ, no bias; model/heads.h).
#pragma once
#include <functional>
#include <vector>

#include "model/body.h"
#include "model/heads.h"

namespace saobp {

// GPT-2's defaults: its vocabulary, 1024 positions, LayerNorm eps 1e-5, causal attention.
struct DecoderConfig : BodyShape {
  DecoderConfig() { vocab = 50257, max_positions = 1024, ln_eps = 1e-5, causal = true; }
};

// Every tensor of the decoder for `cfg` (transformer.*), in registration order; the tied LM
// head has none.
std::vector<ParamSpec> gpt2_param_specs(const DecoderConfig& cfg);

class Gpt2Decoder : public Body {
 public:
  Gpt2Decoder(const DecoderConfig& cfg, uint64_t seed, DType dtype = DType::f32,
              Device device = Device::cpu());
  // The final hidden states (after ln_f), (B,T,C) (Body::hidden; type_ids are ignored).
  Var hidden(const Tensor& ids, const Tensor& type_ids, const Tensor& key_mask, bool training, uint64_t step,
             std::vector<AttentionMaps>* maps = nullptr) override;
  // Generation (Body::decode_cache, Body::extend): the same layers, attention from the cache.
  DecodeCache decode_cache(int64_t batch, int64_t capacity) override;
  Var extend(const Tensor& ids, DecodeCache& cache) override;

 private:
  struct Block {
    Var ln1_w, ln1_b, attn_w, attn_b, aproj_w, aproj_b, ln2_w, ln2_b, fc_w, fc_b, mproj_w, mproj_b;
    Var lambda_rho;  // learnable λ only
  };
  // q, k, v (B,NH,T,HS) and layer l's λ -> the merged attention output (B,T,C).
  using Attend = std::function<Var(const Var& q, const Var& k, const Var& v, const Var& lam)>;
  // The token and (learned) position embeddings of ids (B,T) at positions [offset, offset + T), after
  // dropout.
  Var embed(const Tensor& ids, int64_t offset, bool training, uint64_t step) const;
  // Block l on x (B,T,C), its attention through `attend`.
  Var block(size_t l, const Var& x, bool training, uint64_t step, const Attend& attend) const;
  Var wpe_, lnf_w_, lnf_b_;
  std::vector<Block> blocks_;
};

class GPT2LMHeadModel : public WithHead<Gpt2Decoder, CausalLmHead> {
 public:
  GPT2LMHeadModel(const DecoderConfig& cfg, uint64_t seed, DType dtype = DType::f32,
                  Device device = Device::cpu())
      : WithHead(cfg, seed, dtype, device) {}
  // ids: (B,T) i32, T <= max_positions; key_mask: (B,T) u8 (1 = token) or undefined. Returns
  // logits (B,T,V).
  Var forward(const Tensor& ids, const Tensor& key_mask, bool training, uint64_t step,
              std::vector<AttentionMaps>* maps = nullptr) {
    return lm_head(hidden(ids, key_mask, training, step, maps));
  }
  // The decoder's final hidden states (B,T,C).
  Var hidden(const Tensor& ids, const Tensor& key_mask, bool training, uint64_t step,
             std::vector<AttentionMaps>* maps = nullptr) {
    return body_.hidden(ids, Tensor(), key_mask, training, step, maps);
  }
  // The LM head on hidden states (...,C): logits (...,V).
  Var lm_head(const Var& h) { return head_.logits(h); }
  // Generation: the logits (B,n,V) of n new positions ids (B,n) after the cache's (Body::extend).
  DecodeCache decode_cache(int64_t batch, int64_t capacity) { return body_.decode_cache(batch, capacity); }
  Var extend(const Tensor& ids, DecodeCache& cache) { return lm_head(body_.extend(ids, cache)); }
  // CausalLmHead::loss_of: targets (B,T) already aligned with the logits.
  Var lm_loss(const Var& logits, const Tensor& targets) { return CausalLmHead::loss_of(logits, targets); }
};

}  // namespace saobp
