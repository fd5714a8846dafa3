#include "optim/clip.h"

#include <cmath>

#include "tensor/kernels.h"

namespace saobp {

double global_grad_norm(const std::vector<Var>& params) {
  // Each gradient's sum of squares goes to its own slot of `sums`, on the gradients' device (one
  // launch on a GPU), and the host reads them all at once: one wait for a GPU. The slots are f64
  // (a f32 sum widened exactly) and are added in parameter order in double.
  std::vector<Tensor> grads;
  for (const Var& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0;
  Tensor sums = Tensor::empty({static_cast<int64_t>(grads.size())}, DType::f64, grads.front().device());
  kern::multi_sum_squares(grads, sums);
  double total = 0;
  for (double x : sums.to_vector<double>()) total += x;
  return std::sqrt(total);
}

double clip_scale(double norm, double max_norm) {
  return max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

double clip_grad_norm(const std::vector<Var>& params, double max_norm) {
  const double norm = global_grad_norm(params);
  const double scale = clip_scale(norm, max_norm);
  if (scale != 1.0)
    for (Var p : params)
      if (p.grad().defined()) kern::axpby(p.grad(), scale, p.grad(), 0.0);
  return norm;
}

}  // namespace saobp
