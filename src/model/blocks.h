// What the BERT and GPT-2 blocks share beside their parameters: the Philox key of a dropout
// site and the λ of a layer's SAOBP attention.
#pragma once
#include <cstdint>
#include <string>

#include "attention/attention.h"
#include "model/params.h"

namespace saobp {

// The dropout mask of `site` ("layer.0.attention", "transformer.h.0.mlp.dropout", ...) at
// training step `step`: Philox stream from the site's name, counter from the step, so a mask does
// not depend on the order sites run or on the thread count.
RngKey dropout_key(uint64_t seed, const std::string& site, uint64_t step);

// The λ Var of layer `layer`'s attention: undefined when the variant takes none; softplus(rho)
// of the layer's learnable per-head parameter when `rho` is defined; else the constant λ of the
// layer (AttentionSpec::lambda_for_layer) for each of `heads` heads.
Var layer_lambda(const AttentionSpec& a, const Var& rho, int64_t layer, int64_t heads, const ParamStore& P);

// Whether the model registers a learnable per-head λ (the `*.saobp_lambda_rho` parameter), and
// that parameter's initial value, rho(λ of the layer) in every head.
bool has_lambda_rho(const AttentionSpec& a);
void init_lambda_rho(Var rho, const AttentionSpec& a, int64_t layer);

}  // namespace saobp
