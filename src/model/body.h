// A model's body: the embeddings and the transformer blocks up to the final hidden states, which
// a head (model/heads.h) turns into an objective. BERT's encoder (model/bert.h) and GPT-2's
// decoder (model/gpt2.h) implement it. The body owns the ParamStore; a head registers its
// tensors there under their Hugging Face names, after the body's own, so checkpoints, the
// optimizer and the gradient norm see one list of parameters in one order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention.h"
#include "attention/incremental.h"
#include "autograd/ops.h"
#include "model/params.h"
#include "model/positions.h"

namespace saobp {

// A body's sizes and settings, under one set of names for both families (the run config's keys
// without "model."); EncoderConfig and DecoderConfig (model/bert.h, model/gpt2.h) hold each
// family's defaults. The default sizes are the Mini preset's (model/sizes.h).
struct BodyShape {
  int64_t vocab = 0, max_positions = 0, hidden = 256, layers = 4, heads = 4, intermediate = 1024;
  double dropout = 0.1, ln_eps = 0, init_std = 0.02;
  AttentionSpec attention;
  // learned: a position table added to the embeddings (HF's layout); rope: no such tensor, RoPE
  // on q and k in every layer, θ_i = rope_base^(-2i/HS); none: neither.
  PositionKind positions = PositionKind::learned;
  double rope_base = 10000;
  bool causal = false;  // GPT-2's decoder: each position attends to itself and the ones before
  // The operands of every linear layer's GEMMs, heads' included, and of the materialized attention
  // kernels' (train.precision; autograd/ops.h, AttentionConfig::gemm_inputs).
  GemmInputs gemm_inputs = GemmInputs::f32;
  // Throws naming the run config's key (model.hidden, model.heads, ...) of a bad size.
  void validate() const;
};

// What generation keeps between calls of Body::extend: each layer's attention cache
// (attention/incremental.h). All layers hold the same number of positions.
struct DecodeCache {
  std::vector<AttentionCache> layers;
  int64_t length() const { return layers.empty() ? 0 : layers.front().len; }
  int64_t capacity() const { return layers.empty() ? 0 : layers.front().capacity; }
};

class Body {
 public:
  virtual ~Body() = default;
  Body(const Body&) = delete;
  Body& operator=(const Body&) = delete;

  // ids, type_ids: (B,T) i32 (type_ids: BERT's token types, undefined = all 0; a decoder has none
  // and ignores them); key_mask: (B,T) u8 (1 = token) or undefined. Dropout draws from (seed,
  // stream of the site, step). Returns the final hidden states (B,T,C); fills maps (every
  // layer's A and B) when it is not null.
  virtual Var hidden(const Tensor& ids, const Tensor& type_ids, const Tensor& key_mask, bool training,
                     uint64_t step, std::vector<AttentionMaps>* maps = nullptr) = 0;

  // Generation (a causal decoder; an encoder refuses both): an empty cache for `batch` sequences
  // of up to `capacity` <= max_positions positions, and the final hidden states (B,n,C) of n new
  // positions ids (B,n) after the cache's, which join it. Equal to those positions' rows of
  // hidden() over the whole sequence, up to rounding (eval mode: no dropout; no gradient).
  virtual DecodeCache decode_cache(int64_t batch, int64_t capacity);
  virtual Var extend(const Tensor& ids, DecodeCache& cache);

  ParamStore& params() { return params_; }
  // The device of the parameters: hidden() copies its inputs there once (a batch made on the
  // host crosses to the GPU at the model's entry), and the heads make their index tensors there.
  Device device() const { return params_.device(); }
  Tensor on_device(const Tensor& t) const { return t.defined() ? t.to(params_.device()) : t; }
  const BodyShape& shape() const { return shape_; }
  // The seed of the parameters' initialization and of every dropout mask.
  uint64_t seed() const { return seed_; }
  // The token embedding (V,C), which the language-model heads tie their output layer to.
  const Var& token_embedding() const { return tokens_; }
  // While set, hidden() stores the hidden states in *hidden: the embeddings' output, then every
  // layer's output (GPT-2: and last the ln_f output), (B,T,C) each (for `saobp inspect`).
  // nullptr stops it.
  void capture_hidden(std::vector<Tensor>* hidden) { capture_ = hidden; }
  // While set, every training forward (training = true) stores each layer's (q, k)
  // (B,NH,T,HS), after RoPE, in *qk, replacing what it held: the input of Entropy-Reg
  // (train/regularizer.h).
  void capture_qk(std::vector<std::pair<Var, Var>>* qk) { qk_ = qk; }

 protected:
  Body(const BodyShape& shape, uint64_t seed, DType dtype, Device device);

  // The checks of hidden()'s inputs; `who` names the model in the errors.
  void check_inputs(const char* who, const Tensor& ids, const Tensor& key_mask) const;
  // Dropout of `x` at `site` (p = shape().dropout).
  Var drop(const Var& x, const std::string& site, uint64_t step, bool training) const;
  // hidden()'s start: the embeddings' output goes to the capture, maps and the (q, k) list are
  // emptied. Returns whether this forward keeps (q, k).
  bool begin(const Var& embeddings, std::vector<AttentionMaps>* maps, bool training);
  // A layer's attention on q, k, v (B,NH,T,HS) with its λ `lam` (layer_lambda): RoPE on q and k
  // (positions = rope), their pair kept when `keep_qk`, the SAOBP attention, its maps appended.
  // Returns the merged heads (B,T,C).
  Var attend(Var q, Var k, const Var& v, const Tensor& key_mask, const Var& lam, bool keep_qk,
             std::vector<AttentionMaps>* maps);
  // attend() for generation: q, k, v (B,NH,n,HS) of n positions after the cache's, RoPE at those
  // positions, attention_extend. Returns the merged heads (B,n,C).
  Var attend_cached(Var q, Var k, const Var& v, AttentionCache& cache) const;
  // The empty cache of every layer, λ of layer l from lambda(l) (Body::lambda_of of its rho).
  DecodeCache make_decode_cache(int64_t batch, int64_t capacity,
                                const std::function<Var(int64_t)>& lambda) const;
  // The checks of extend()'s input: ids (B,n) i32 for the cache's batch, within its capacity.
  void check_extend(const Tensor& ids, const DecodeCache& cache) const;
  // The λ of layer `layer`: its learnable rho when registered (rho_name), else the constant.
  Var lambda_of(int64_t layer, const Var& rho) const;
  // Registers layer `layer`'s learnable λ (the `*.saobp_lambda_rho` tensor of the spec list) and
  // sets it to rho(λ); undefined when the variant has none.
  Var lambda_rho(int64_t layer, const std::string& name);
  // Stores a layer's (or the final) output in the capture.
  void captured(const Var& x) {
    if (capture_) capture_->push_back(x.data());
  }

  BodyShape shape_;
  uint64_t seed_;
  ParamStore params_;
  Var tokens_;

 private:
  std::vector<Tensor>* capture_ = nullptr;
  std::vector<std::pair<Var, Var>>* qk_ = nullptr;
};

}  // namespace saobp
