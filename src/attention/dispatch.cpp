// The one place where an attention kernel call picks its backend, as src/tensor/dispatch.cpp
// does for the tensor kernels.
#include "attention/backend.h"

namespace saobp::kern {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                       const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
                       Tensor& aux) {
  SAOBP_ON_DEVICE(out, attention_forward(q, k, v, key_mask, lambda, p, out, probs, saved, aux));
}
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                        const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                        Tensor& glambda) {
  SAOBP_ON_DEVICE(
      gout, attention_backward(q, k, v, key_mask, lambda, p, probs, saved, aux, gout, gq, gk, gv, glambda));
}
void sink_gate(const Tensor& probs, const Tensor& key_mask, double tau, double fraction, Tensor& keep) {
  SAOBP_ON_DEVICE(keep, sink_gate(probs, key_mask, tau, fraction, keep));
}

}  // namespace saobp::kern
