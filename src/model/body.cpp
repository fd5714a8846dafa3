#include "model/body.h"

#include "autograd/ops.h"
#include "model/blocks.h"
#include "model/sizes.h"

namespace saobp {

ModelPreset model_preset(const std::string& name) {
  if (name == "mini") return {4, 256, 4, 1024, 0.2};
  if (name == "small") return {4, 512, 8, 2048, 0.08};
  if (name == "medium") return {8, 512, 8, 2048, 0.05};
  fail("config", "model.preset '{}' is not mini, small or medium", name);
}

void BodyShape::validate() const {
  if (vocab <= 0 || max_positions <= 0 || hidden <= 0 || layers <= 0 || heads <= 0 || intermediate <= 0)
    fail("config", "model sizes must be positive");
  if (hidden % heads != 0)
    fail("config", "model.hidden {} is not divisible by model.heads {}", hidden, heads);
  if (!(dropout >= 0 && dropout < 1)) fail("config", "model.dropout must be in [0, 1), got {}", dropout);
  if (positions == PositionKind::rope) {
    if ((hidden / heads) % 2 != 0)
      fail("config", "model.positions = rope needs an even head size, got {}", hidden / heads);
    if (!(rope_base > 0)) fail("config", "model.rope_base must be positive, got {}", rope_base);
  }
  attention.validate(layers);
}

Body::Body(const BodyShape& shape, uint64_t seed, DType dtype, Device device)
    : shape_(shape), seed_(seed), params_(seed, dtype, device) {
  shape_.validate();
}

void Body::check_inputs(const char* who, const Tensor& ids, const Tensor& key_mask) const {
  if (ids.dim() != 2) fail(who, "ids must be (B,T), got {}", ids.str());
  if (ids.size(1) > shape_.max_positions)
    fail(who, "sequence length {} exceeds model.{} {}", ids.size(1),
         shape_.causal ? "n_positions" : "max_positions", shape_.max_positions);
  if (key_mask.defined() && key_mask.shape() != ids.shape())
    fail(who, "key_mask {} does not match ids {}", key_mask.str(), ids.str());
}

Var Body::drop(const Var& x, const std::string& site, uint64_t step, bool training) const {
  return dropout(x, shape_.dropout, dropout_key(seed_, site, step), training);
}

bool Body::begin(const Var& embeddings, std::vector<AttentionMaps>* maps, bool training) {
  if (capture_) capture_->assign(1, embeddings.data());
  if (maps) maps->clear();
  const bool keep_qk = qk_ && training;
  if (keep_qk) qk_->clear();
  return keep_qk;
}

Var Body::attend(Var q, Var k, const Var& v, const Tensor& key_mask, const Var& lam, bool keep_qk,
                 std::vector<AttentionMaps>* maps) {
  AttentionMaps m;
  if (shape_.positions == PositionKind::rope) {
    if (maps) m.raw_queries = q.data(), m.raw_keys = k.data();
    q = rope(q, shape_.rope_base), k = rope(k, shape_.rope_base);
  }
  if (keep_qk) qk_->emplace_back(q, k);
  AttentionConfig cfg = shape_.attention.call_config(shape_.causal);
  cfg.gemm_inputs = shape_.gemm_inputs;
  Var a = merge_heads(attention(q, k, v, key_mask, lam, cfg, maps ? &m : nullptr));
  if (maps) {
    m.queries = q.data(), m.keys = k.data();
    maps->push_back(m);
  }
  return a;
}

namespace {
[[noreturn]] void refuse_generation() {
  fail("generate",
       "generation needs a causal decoder (model.family = \"gpt2\"); this model is an encoder, "
       "whose every position attends to later ones");
}
}  // namespace

DecodeCache Body::decode_cache(int64_t, int64_t) { refuse_generation(); }

Var Body::extend(const Tensor&, DecodeCache&) { refuse_generation(); }

Var Body::attend_cached(Var q, Var k, const Var& v, AttentionCache& cache) const {
  if (shape_.positions == PositionKind::rope)
    q = rope(q, shape_.rope_base, cache.len), k = rope(k, shape_.rope_base, cache.len);
  return merge_heads(
      Var(attention_extend(q.data().contiguous(), k.data().contiguous(), v.data().contiguous(), cache)));
}

DecodeCache Body::make_decode_cache(int64_t batch, int64_t capacity,
                                    const std::function<Var(int64_t)>& lambda) const {
  if (capacity < 1 || capacity > shape_.max_positions)
    fail("generate", "a sequence of {} positions: the model has {} (model.{})", capacity,
         shape_.max_positions, shape_.causal ? "n_positions" : "max_positions");
  DecodeCache c;
  const int64_t NH = shape_.heads, HS = shape_.hidden / shape_.heads;
  const AttentionConfig cfg = shape_.attention.call_config(shape_.causal);
  for (int64_t l = 0; l < shape_.layers; ++l)
    c.layers.push_back(attention_cache(cfg, batch, NH, HS, capacity, lambda(l), params_.dtype(), device()));
  return c;
}

void Body::check_extend(const Tensor& ids, const DecodeCache& cache) const {
  if (cache.layers.size() != static_cast<size_t>(shape_.layers))
    fail("generate", "the cache has {} layers, the model {}", cache.layers.size(), shape_.layers);
  if (ids.dim() != 2 || ids.dtype() != DType::i32 || ids.size(1) < 1)
    fail("generate", "ids must be (B,n) i32 with n >= 1, got {}", ids.str());
  if (ids.size(0) != cache.layers.front().k.size(0))
    fail("generate", "ids {} for a cache of {} sequences", ids.str(), cache.layers.front().k.size(0));
  if (cache.length() + ids.size(1) > cache.capacity())
    fail("generate", "{} positions after {} exceed the cache's {} (the model's limit is {})", ids.size(1),
         cache.length(), cache.capacity(), shape_.max_positions);
}

Var Body::lambda_of(int64_t layer, const Var& rho) const {
  return layer_lambda(shape_.attention, rho, layer, shape_.heads, params_);
}

Var Body::lambda_rho(int64_t layer, const std::string& name) {
  if (!has_lambda_rho(shape_.attention)) return {};
  Var rho = params_.get(name);
  init_lambda_rho(rho, shape_.attention, layer);
  return rho;
}

}  // namespace saobp
