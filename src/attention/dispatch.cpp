// The one place where an attention kernel call is checked and picks its backend, as
// src/tensor/dispatch.cpp does for the tensor kernels: the checks of checks.cpp and the
// outputs' here, once for both twins, then the twin of the device of the output.
#include "attention/backend.h"

namespace saobp::kern {

void set_tiled_schedule(TiledSchedule s) { cpu::set_tiled_schedule(s); }

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                       const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
                       Tensor& aux) {
  check_attention(q, k, v, key_mask, lambda, p, probs, saved, aux);
  require_same_device("attention", out, {&q});
  check_shape(out, q.shape(), "attention", "output");
  check_dtype(out, probs.dtype(), "attention", "output");
  require_contiguous("attention", out, "output");
  SAOBP_ON_DEVICE(out, attention_forward, q, k, v, key_mask, lambda, p, out, probs, saved, aux);
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                        const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                        Tensor& glambda) {
  const char* op = "attention_backward";
  const AttnDims d = check_attention(q, k, v, key_mask, lambda, p, probs, saved, aux);
  require_same_device(op, gout, {&q, &gq, &gk, &gv, &glambda});
  check_shape(gout, q.shape(), op, "gout");
  check_dtype(gout, probs.dtype(), op, "gout");
  require_contiguous(op, gout, "gout");
  for (const Tensor* g : {&gq, &gk, &gv})
    if (g->defined()) {
      check_shape(*g, q.shape(), op, "gq, gk and gv");
      check_dtype(*g, probs.dtype(), op, "gq, gk and gv");
    }
  if (glambda.defined() && (lambda.defined() || uses_lambda(p.variant)))
    check_shape(glambda, {d.NH}, op, "glambda");
  require_contiguous(op, {{gq, "gq"}, {gk, "gk"}, {gv, "gv"}, {glambda, "glambda"}});
  SAOBP_ON_DEVICE(gout, attention_backward, q, k, v, key_mask, lambda, p, probs, saved, aux, gout, gq, gk, gv,
                  glambda);
}

void attention_tiled_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                             const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse,
                             Tensor& colsum) {
  check_attention_tiled(q, k, v, key_mask, lambda, p, lse, colsum);
  require_same_device("attention_tiled", out, {&q});
  check_shape(out, q.shape(), "attention_tiled", "output");
  require_contiguous("attention_tiled", out, "output");
  SAOBP_ON_DEVICE(out, attention_tiled_forward, q, k, v, key_mask, lambda, p, out, lse, colsum);
}

void attention_tiled_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                              const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                              const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                              Tensor& glambda) {
  const char* op = "attention_tiled_backward";
  const AttnDims d = check_attention_tiled(q, k, v, key_mask, lambda, p, lse, colsum);
  require_same_device(op, gout, {&q, &out, &gq, &gk, &gv, &glambda});
  for (const Tensor* t : {&out, &gout}) {
    check_shape(*t, q.shape(), op, "out and gout");
    require_contiguous(op, *t, "out and gout");
  }
  for (const Tensor* g : {&gq, &gk, &gv})
    if (g->defined()) check_shape(*g, q.shape(), op, "gq, gk and gv");
  if (glambda.defined() && uses_lambda(p.variant)) check_shape(glambda, {d.NH}, op, "glambda");
  require_contiguous(op, {{gq, "gq"}, {gk, "gk"}, {gv, "gv"}, {glambda, "glambda"}});
  SAOBP_ON_DEVICE(gout, attention_tiled_backward, q, k, v, key_mask, lambda, p, out, lse, colsum, gout, gq,
                  gk, gv, glambda);
}

void sink_gate(const Tensor& probs, const Tensor& key_mask, double tau, double fraction, Tensor& keep) {
  check_sink_gate(probs, key_mask, keep);
  SAOBP_ON_DEVICE(keep, sink_gate, probs, key_mask, tau, fraction, keep);
}

}  // namespace saobp::kern
