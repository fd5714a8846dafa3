// CPU-only build: the CUDA twins of the attention kernels, each throwing "[op] built without
// CUDA" (src/tensor/no_cuda/stubs.cpp holds the tensor kernels' and no_cuda()).
#include "attention/backend.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace saobp::cuda {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                       const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
                       Tensor& aux) {
  no_cuda("attention_forward");
}
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                        const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                        Tensor& glambda) {
  no_cuda("attention_backward");
}
void sink_gate(const Tensor& probs, const Tensor& key_mask, double tau, double fraction, Tensor& keep) {
  no_cuda("sink_gate");
}

}  // namespace saobp::cuda
