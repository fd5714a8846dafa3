#include "model/blocks.h"

#include "tensor/kernels.h"

namespace saobp {

RngKey dropout_key(uint64_t seed, const std::string& site, uint64_t step) {
  return RngKey{seed, name_stream(site), step << 32};
}

Var layer_lambda(const AttentionSpec& a, const Var& rho, int64_t layer, int64_t heads, const ParamStore& P) {
  if (!uses_lambda(a.variant)) return {};
  if (rho.defined()) return lambda_learnable(rho);
  return lambda_constant(a.lambda_for_layer(layer), heads, P.dtype(), P.device());
}

bool has_lambda_rho(const AttentionSpec& a) { return a.learnable_lambda && uses_lambda(a.variant); }

void init_lambda_rho(Var rho, const AttentionSpec& a, int64_t layer) {
  kern::fill(rho.data(), lambda_to_rho(a.lambda_for_layer(layer)));
}

}  // namespace saobp
