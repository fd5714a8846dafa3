// The attention op: validation, buffers, and the autograd record around the fused kernels.
#include "attention/attention.h"

#include <cmath>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace saobp {

const char* variant_name(AttnVariant v) {
  switch (v) {
    case AttnVariant::original:
      return "original";
    case AttnVariant::bp_high:
      return "bp_high";
    case AttnVariant::bp_low:
      return "bp_low";
    case AttnVariant::bp_elemmul:
      return "bp_elemmul";
  }
  return "?";
}

AttnVariant parse_variant(const std::string& name) {
  for (AttnVariant v :
       {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low, AttnVariant::bp_elemmul})
    if (name == variant_name(v)) return v;
  fail("attention", "unknown variant '{}' (allowed: original, bp_high, bp_low, bp_elemmul)", name);
}

bool uses_lambda(AttnVariant v) { return v == AttnVariant::bp_high || v == AttnVariant::bp_low; }

std::optional<AttentionSpec::Problem> AttentionSpec::problem(int64_t layers) const {
  const auto bad = [](const char* field, std::string what) { return Problem{field, std::move(what)}; };
  if (!(lambda >= 0 && std::isfinite(lambda)))
    return bad("lambda", fmt::format("λ must be a finite number >= 0, got {}", lambda));
  if (!layer_lambdas.empty() && static_cast<int64_t>(layer_lambdas.size()) != layers)
    return bad("layer_lambdas", fmt::format("has {} entries for {} layers", layer_lambdas.size(), layers));
  for (double l : layer_lambdas)
    if (!(l >= 0 && std::isfinite(l)))
      return bad("layer_lambdas", fmt::format("every λ must be a finite number >= 0, got {}", l));
  if (bp_steps < 1) return bad("bp_steps", fmt::format("must be >= 1, got {}", bp_steps));
  if (!(skip_peak_tau > 0 && skip_peak_tau < 1))
    return bad("skip_peak_tau", fmt::format("must be in (0, 1), got {}", skip_peak_tau));
  if (!(skip_head_fraction >= 0 && skip_head_fraction < 1))
    return bad("skip_head_fraction", fmt::format("must be in [0, 1), got {}", skip_head_fraction));
  if (leaky_bp && !uses_lambda(variant))
    return bad("leaky_bp",
               fmt::format("changes the messages of bp_high and bp_low; {} has none", variant_name(variant)));
  if (tiled && variant == AttnVariant::bp_elemmul)
    return bad("tiled", "bp_elemmul needs A Aᵀ, a T×T product: it has no tiled form (set tiled = false)");
  if (tiled && skip_sinky_heads)
    return bad("tiled",
               "the head skip reads every row of the final attention, which the tiled kernels never hold "
               "(set tiled = false or skip_sinky_heads = false)");
  if (learnable_lambda && uses_lambda(variant))
    for (int64_t l = 0; l < layers; ++l)
      if (!(lambda_for_layer(l) > 0))
        return bad("learnable_lambda",
                   fmt::format("a learnable λ must start > 0 (layer {} has {})", l, lambda_for_layer(l)));
  return std::nullopt;
}

void AttentionSpec::validate(int64_t layers) const {
  if (const auto p = problem(layers)) fail("attention", "{}: {}", p->field, p->what);
}

double AttentionSpec::lambda_for_layer(int64_t layer) const {
  return layer_lambdas.empty() ? lambda : layer_lambdas.at(static_cast<size_t>(layer));
}

bool runs_tiled(const AttentionConfig& cfg, bool maps_wanted) {
  return cfg.tiled && !maps_wanted && !cfg.skip_sinky && cfg.variant != AttnVariant::bp_elemmul;
}

namespace {

// The tiled kernels behind the same autograd record: saved are the row log-sum-exps, the column
// sums of the log-factors and the output (the backward's ρ^S = dO · O), O(T) per head.
// What both kernels' calls start from: contiguous q, k, v (rounded to bf16 when `half`: the
// materialized kernels with bf16 GEMM operands) and λ (BP variants), and the params.
struct Call {
  Tensor Q, K, V, lam;
  AttnParams p;
  bool bp = false;
};
Call prepare_call(const Var& q, const Var& k, const Var& v, const Var& lambda, const AttentionConfig& cfg,
                  bool half) {
  Call c;
  c.Q = q.data().contiguous(), c.K = k.data().contiguous(), c.V = v.data().contiguous();
  if (half) {
    if (c.Q.dtype() != DType::f32)
      fail("attention", "bf16 GEMM operands are rounded from f32; q is {}", c.Q.str());
    c.Q = c.Q.to(DType::bf16), c.K = c.K.to(DType::bf16), c.V = c.V.to(DType::bf16);
  }
  c.p = AttnParams{cfg.variant, cfg.causal, cfg.steps, 1.0 / std::sqrt(static_cast<double>(q.size(3))),
                   cfg.causal && cfg.leak};
  c.bp = uses_lambda(cfg.variant);
  if (c.bp) {
    if (!lambda.defined()) fail("attention", "variant {} needs λ", variant_name(cfg.variant));
    c.lam = lambda.data().contiguous();
  }
  return c;
}

Var attention_tiled(const Var& q, const Var& k, const Var& v, const Tensor& key_mask, const Var& lambda,
                    const AttentionConfig& cfg) {
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2);
  // Named copies, not a structured binding: the lambdas below capture them (clang refuses
  // capturing structured bindings; the fuzz build uses it).
  const Call c = prepare_call(q, k, v, lambda, cfg, false);
  const Tensor Q = c.Q, K = c.K, V = c.V, lam = c.lam;
  const AttnParams p = c.p;
  const bool bp = c.bp;
  const int64_t S = bp ? cfg.steps : 0;
  Tensor out = Q.new_empty(Q.shape()), lse = Q.new_empty({S + 1, B, NH, T}), colsum;
  if (S > 0) colsum = Q.new_empty({S, B, NH, T});
  kern::attention_tiled_forward(Q, K, V, key_mask, lam, p, out, lse, colsum);
  std::vector<Var> inputs{q, k, v};
  if (bp) inputs.push_back(lambda);
  return make_result(out, "attention", inputs,
                     [Q, K, V, key_mask, lam, p, out, lse, colsum, bp](const Tensor& g, GradSlots& gin) {
                       Tensor none, gq = gin.needs(0) ? gin[0] : none, gk = gin.needs(1) ? gin[1] : none,
                                    gv = gin.needs(2) ? gin[2] : none,
                                    gl = bp && gin.needs(3) ? gin[3] : none;
                       kern::attention_tiled_backward(Q, K, V, key_mask, lam, p, out, lse, colsum,
                                                      g.contiguous(), gq, gk, gv, gl);
                     });
}

}  // namespace

Var attention(const Var& q, const Var& k, const Var& v, const Tensor& key_mask, const Var& lambda,
              const AttentionConfig& cfg, AttentionMaps* maps) {
  if (q.dim() != 4) fail("attention", "q must be (B,NH,T,HS), got {}", q.data().str());
  if (runs_tiled(cfg, maps != nullptr)) return attention_tiled(q, k, v, key_mask, lambda, cfg);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2);
  // Named copies, not a structured binding: the lambdas below capture them (clang refuses
  // capturing structured bindings; the fuzz build uses it).
  const bool half = cfg.gemm_inputs == GemmInputs::bf16;
  const Call c = prepare_call(q, k, v, lambda, cfg, half);
  const Tensor Q = c.Q, K = c.K, V = c.V, lam = c.lam;
  const AttnParams p = c.p;
  const bool bp = c.bp;
  // The output and the maps in q's own dtype (f32 when Q, K and V went to bf16).
  const Tensor& like = q.data();
  Tensor out = like.new_empty(Q.shape()), probs = like.new_empty({B, NH, T, T}), saved, aux;
  if (bp) saved = like.new_empty({cfg.steps, B, NH, T, T});
  if (cfg.variant == AttnVariant::bp_elemmul) {
    saved = like.new_empty({1, B, NH, T, T});
    aux = like.new_empty({B, NH, T});
  }
  kern::attention_forward(Q, K, V, key_mask, lam, p, out, probs, saved, aux);
  // Head skip: keep (B,NH) is 0 for a sinky (sample, head). Its output is zeroed here and its
  // incoming gradient below, so q, k, v and λ get exactly zero gradient from it.
  Tensor keep;
  if (cfg.skip_sinky) {
    keep = like.new_empty({B, NH});
    kern::sink_gate(probs, key_mask, cfg.skip_peak_tau, cfg.skip_head_fraction, keep);
    Tensor gated = like.new_empty(Q.shape());
    kern::binary(BinaryOp::mul, out, keep.view({B, NH, 1, 1}), gated);
    out = gated;
  }
  if (maps) {
    maps->probs = probs;
    maps->attn = saved.defined() ? saved.slice(0, 0, 1).squeeze(0) : probs;
    maps->keep = keep;
    maps->values = half ? v.data().contiguous() : V;
  }
  std::vector<Var> inputs{q, k, v};
  if (bp) inputs.push_back(lambda);
  return make_result(
      out, "attention", inputs,
      [Q, K, V, key_mask, lam, p, probs, saved, aux, bp, keep](const Tensor& g, GradSlots& gin) {
        Tensor none, gq = gin.needs(0) ? gin[0] : none, gk = gin.needs(1) ? gin[1] : none,
                     gv = gin.needs(2) ? gin[2] : none, gl = bp && gin.needs(3) ? gin[3] : none;
        Tensor gout = g.contiguous();
        if (keep.defined()) {
          Tensor gated = gout.new_empty(gout.shape());
          kern::binary(BinaryOp::mul, gout, keep.view({keep.size(0), keep.size(1), 1, 1}), gated);
          gout = gated;
        }
        kern::attention_backward(Q, K, V, key_mask, lam, p, probs, saved, aux, gout, gq, gk, gv, gl);
      });
}

Var lambda_constant(double lambda, int64_t nh, DType dtype, Device device) {
  if (!(lambda >= 0)) fail("attention", "λ must be >= 0, got {}", lambda);
  return Var(Tensor::full({nh}, lambda, dtype, device));
}

Var lambda_learnable(const Var& rho) { return softplus(rho); }

double lambda_to_rho(double lambda) {
  if (!(lambda > 0)) fail("attention", "a learnable λ starts > 0, got {}", lambda);
  return lambda > 30 ? lambda : std::log(std::expm1(lambda));
}

}  // namespace saobp
