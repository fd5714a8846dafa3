// Attention diagnostics of the paper. Each works on a stack of attention matrices (A or B),
// per head, averaging over the query rows that are tokens (padding rows are excluded).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace saobp {

// Eq. 2 of one row: H(A_i) = -Σ_j A_ij log A_ij (0 log 0 = 0), in nats. The one implementation
// of the entropy: the training log, the diagnostics (diagnostics.h) and the indirect entropy
// (eq. 14, on G's normalized rows) all call it.
double row_entropy(const double* row, int64_t n);

// Eq. 2: H(A) = mean over the token rows i of H(A_i).
// probs: (B,NH,T,T); key_mask: (B,T) u8 or undefined. Returns the entropy of each head averaged
// over the batch: (NH) values, in nats.
std::vector<double> attention_entropy(const Tensor& probs, const Tensor& key_mask = Tensor());

// The mean over heads of attention_entropy: one number per layer for the training log.
double mean_attention_entropy(const Tensor& probs, const Tensor& key_mask = Tensor());

}  // namespace saobp
