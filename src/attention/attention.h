// Self-attention with the SAOBP refinement, as one differentiable op.
//
// Semantics (binding; docs/saobp-gradients.md §1 explains each choice):
//   s = Q Kᵀ / sqrt(HS);  allowed(j,k) = key k is a token and, when causal, k <= j;
//   A = softmax of s over the allowed keys of each row;
//   original:   B = A
//   bp_high:    w = e^λ;  bp_low: w = e^-λ;  c = 1 - 1/w
//               B_j = softmax over allowed k of  s_jk + Σ_{i ∈ N(j)} log(1 - c A_ik)
//               N(j) = token rows i != j (encoder) or token rows i < j (causal); padding never
//               sends. cfg.leak (causal, an ablation): N(j) = token rows i != j, which leaks. With steps > 1,
//               each step replaces A in the messages by the previous B.
//   bp_elemmul: B = row-normalize(A Aᵀ) over the allowed entries
//   output = B V.   λ = 0 gives exactly `original`.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "attention/kernels.h"
#include "autograd/ops.h"
#include "autograd/var.h"

namespace saobp {

struct AttentionConfig {
  AttnVariant variant = AttnVariant::original;
  bool causal = false;
  int steps = 1;  // BP steps (bp_high, bp_low)
  // Head skip (the head-skip note, docs/references.md): a (sample, head) whose final attention (B; A for
  // original) has more than skip_head_fraction of its token rows peaked (row max > skip_peak_tau) is skipped:
  // its output is exactly zero and it receives zero gradient.
  bool skip_sinky = false;
  double skip_peak_tau = 0.95, skip_head_fraction = 0.8;
  // Causal only, an ablation: the SAOBP messages of row j come from every other token row i != j,
  // later rows included, while the keys stay k <= j. Row i > j attends to keys k <= j, so the
  // future reaches the past through the messages: a reading of the paper's decoder that leaks.
  bool leak = false;
  // The tiled kernels (attention_tiled_forward/backward): O(T) memory instead of S + 1 maps of T×T
  // per head, the same function to float rounding. original, bp_high and bp_low; a call that asks
  // for the maps (diagnostics), bp_elemmul or the head skip (it reads every row of B) takes the
  // materialized kernels.
  bool tiled = false;
  // The operands of the materialized kernels' GEMMs (train.precision, docs/precision.md). bf16:
  // q, k and v rounded once and kept in bf16 for the backward; B rounded on its way into B V and
  // Bᵀ dO, the output gradient dO into dO Vᵀ and Bᵀ dO, and ds into ds K and dsᵀ Q; every sum is
  // f32, and the maps (scores, softmax, the BP messages and beliefs) stay f32. The tiled kernels
  // compute their products inside and stay f32 (so do the diagnostics, which read f32 maps).
  GemmInputs gemm_inputs = GemmInputs::f32;
};

// Whether a call with these settings runs the tiled kernels.
bool runs_tiled(const AttentionConfig& cfg, bool maps_wanted);

const char* variant_name(AttnVariant v);
// "original", "bp_high", "bp_low", "bp_elemmul"; throws naming the allowed values otherwise.
AttnVariant parse_variant(const std::string& name);

// A model's attention settings, resolved per layer: what a run config's [model] attention keys
// hold (train/config.h keeps one in ModelSection), and what the models read in every layer. Each
// field is named as its key, except `variant` (model.attention).
// λ per model size in the paper: 0.2 (Mini), 0.08 (Small), 0.05 (Medium). The open questions
// of the paper are options: a per-layer λ list, a learnable per-head λ, and multi-step BP.
struct AttentionSpec {
  AttnVariant variant = AttnVariant::original;  // original | bp_high | bp_low | bp_elemmul
  double lambda = 0.2;
  std::vector<double> layer_lambdas;  // if not empty: λ of layer l (one entry per layer)
  bool learnable_lambda = false;      // per-head λ = softplus(rho), rho initialized from λ
  int bp_steps = 1;                   // BP steps (AttentionConfig::steps)
  bool skip_sinky_heads = false;      // the head skip of the head-skip note (AttentionConfig::skip_sinky)
  double skip_peak_tau = 0.95, skip_head_fraction = 0.8;
  // A decoder's BP messages from every other row, later ones included (AttentionConfig::leak): an
  // ablation that lets the future reach the past, for reading the paper's decoder perplexities.
  bool leaky_bp = false;
  // The tiled kernels (AttentionConfig::tiled): O(T) memory per head for original, bp_high and
  // bp_low; not with bp_elemmul or the head skip (problem() refuses both).
  bool tiled = false;
  // The per-call settings of layer `layer`'s attention.
  AttentionConfig call_config(bool causal) const {
    return {
        variant, causal, bp_steps, skip_sinky_heads, skip_peak_tau, skip_head_fraction, causal && leaky_bp,
        tiled};
  }
  // The first rule the spec breaks for a model of `layers` layers: the field at fault and what is
  // wrong with it ("bp_steps", "must be >= 1, got 0"); nullopt when it breaks none. The one place
  // these rules live: load_config reports a problem at the key's file and line, validate throws.
  struct Problem {
    std::string field, what;
  };
  std::optional<Problem> problem(int64_t layers) const;
  // Throws "[attention] <field>: <what>" for the first problem.
  void validate(int64_t layers) const;
  double lambda_for_layer(int64_t layer) const;
  bool operator==(const AttentionSpec&) const = default;
};

// What an attention call can hand back for diagnostics: A (softmax) and B (what multiplied V).
struct AttentionMaps {
  Tensor attn;    // (B,NH,T,T) A
  Tensor probs;   // (B,NH,T,T) B (== attn for original)
  Tensor keep;    // (B,NH) 1 = head used, 0 = skipped as sinky; undefined without the skip
  Tensor values;  // (B,NH,T,HS) V (the sink indicator compares the norms of sink tokens' values)
  // Filled by the model (Body), not by attention(): q and k (B,NH,T,HS) as attention read them
  // (after RoPE), and before RoPE (undefined when the model has no rotary positions).
  Tensor queries, keys, raw_queries, raw_keys;
};

// q, k, v: (B,NH,T,HS). key_mask: (B,T) u8 with 1 for tokens, or undefined (no padding).
// lambda: (NH) per-head λ >= 0 (BP variants; a constant or a learnable Var); ignored otherwise.
// The fused CPU/GPU kernel with the hand-derived backward (src/attention/cpu/, src/attention/cuda/).
Var attention(const Var& q, const Var& k, const Var& v, const Tensor& key_mask, const Var& lambda,
              const AttentionConfig& cfg, AttentionMaps* maps = nullptr);

// The same computation composed from autograd primitives (matmul, masked softmax, log1p, ...):
// the reference the fused op is tested against. Slow; for tests and `saobp gradcheck`.
Var attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& key_mask, const Var& lambda,
                        const AttentionConfig& cfg);

// Eq. 11 multiplied out for BP-High/Low (our reading of Algorithm 1 as printed), one step, in
// f64: the product of the messages M_ik = w S_i + (1 - w) A_ik over the senders, normalized.
// Returns B (B,NH,T,T).
// Overflows for large λ·T (that is why the op works in log space); for tests on small T.
Tensor literal_bp_probs(const Tensor& q, const Tensor& k, const Tensor& key_mask,
                        const std::vector<double>& lambda, const AttentionConfig& cfg);

// Per-head λ for a layer: a constant (NH) Var of `lambda`, or softplus(rho) for a learnable
// parameter rho (NH). softplus keeps λ >= 0 and passes its gradient to rho.
Var lambda_constant(double lambda, int64_t nh, DType dtype = DType::f32, Device device = Device::cpu());
Var lambda_learnable(const Var& rho);
// The rho whose softplus is λ (initialization of a learnable λ): log(e^λ - 1).
double lambda_to_rho(double lambda);

}  // namespace saobp
