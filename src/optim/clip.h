// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_): the norm of all gradients
// taken together; when it exceeds max_norm every gradient is scaled by max_norm / norm.
#pragma once
#include <vector>

#include "autograd/var.h"

namespace saobp {

// sqrt(Σ over parameters with a gradient of Σ g²), summed in parameter order (deterministic).
// Not finite when any gradient holds a NaN or an Inf: the caller's signal to stop.
double global_grad_norm(const std::vector<Var>& params);

// The factor that brings a global norm `norm` down to max_norm: max_norm / (norm + 1e-6) when
// the norm exceeds it, else 1 (also for max_norm <= 0, no clipping, and a non-finite norm).
// The trainer hands it to AdamW::step, whose update scales each gradient first (one launch).
double clip_scale(double norm, double max_norm);

// Scales the gradients so their global norm is at most max_norm (max_norm <= 0: no clipping)
// and returns the norm before clipping. A non-finite norm leaves the gradients untouched.
double clip_grad_norm(const std::vector<Var>& params, double max_norm);

}  // namespace saobp
