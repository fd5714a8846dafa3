// Finite-difference gradient check in float64, for tests and `saobp gradcheck`.
//
// For f: inputs -> output, draw a random cotangent R (same shape as the output) and take the
// scalar L = Σ f(x) ⊙ R. The analytic gradient is backward() seeded with R; the numeric one is
// the central difference (L(x + h e_i) - L(x - h e_i)) / 2h for every element i of every input.
// The error of one element is |analytic - numeric| / max(1, |numeric|): relative for gradients
// of magnitude above 1, absolute below (where a relative error only measures the h² term).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/var.h"

namespace saobp {

struct GradcheckResult {
  double max_error = 0;                                // the worst element, as defined above
  std::string worst;                                   // "input 1 [3]: analytic 0.25 numeric 0.2500001"
  int64_t checked = 0;                                 // number of elements compared
  std::vector<std::vector<double>> analytic, numeric;  // per input, flattened
};

using GradcheckFn = std::function<Var(const std::vector<Var>&)>;

// inputs must be f64 CPU tensors; each becomes a leaf that requires grad. Inputs listed in
// `skip` (by position) are passed but not checked (e.g. integer-valued ones).
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, uint64_t seed = 42,
                          double h = 1e-6, const std::vector<size_t>& skip = {});

}  // namespace saobp
