#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "tensor/kernels.h"

namespace saobp {

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, uint64_t seed, double h,
                          const std::vector<size_t>& skip) {
  for (const Tensor& t : inputs)
    if (t.dtype() != DType::f64 || !t.device().is_cpu())
      fail("gradcheck", "inputs must be f64 CPU tensors, got {}", t.str());
  auto leaves = [&](const std::vector<Tensor>& xs, bool grad) {
    std::vector<Var> v;
    for (const Tensor& t : xs) v.emplace_back(t, grad);
    return v;
  };
  std::vector<Tensor> xs;
  for (const Tensor& t : inputs) xs.push_back(t.clone());

  // Analytic.
  std::vector<Var> vars = leaves(xs, true);
  Var out = f(vars);
  Tensor R = Tensor::empty(out.shape(), DType::f64);
  kern::fill_random(R, RandomKind::normal, 0.0, 1.0, RngKey{seed, 977, 0});
  out.backward(R);
  const std::vector<double> r = R.to_vector<double>();
  auto objective = [&]() {
    NoGradGuard ng;
    const std::vector<double> y = f(leaves(xs, false)).data().contiguous().to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };

  GradcheckResult res;
  for (size_t k = 0; k < xs.size(); ++k) {
    const int64_t n = xs[k].numel();
    std::vector<double> an(static_cast<size_t>(n), 0.0), nu(static_cast<size_t>(n), 0.0);
    if (vars[k].grad().defined()) an = vars[k].grad().contiguous().to_vector<double>();
    const bool skipped = std::find(skip.begin(), skip.end(), k) != skip.end();
    if (!skipped) {
      double* p = xs[k].data<double>();
      for (int64_t i = 0; i < n; ++i) {
        const double x0 = p[i];
        p[i] = x0 + h;
        const double up = objective();
        p[i] = x0 - h;
        const double down = objective();
        p[i] = x0;
        nu[static_cast<size_t>(i)] = (up - down) / (2 * h);
        const double a = an[static_cast<size_t>(i)], m = nu[static_cast<size_t>(i)];
        const double err = std::abs(a - m) / std::max(1.0, std::abs(m));
        ++res.checked;
        if (err > res.max_error || !std::isfinite(err)) {
          res.max_error = std::isfinite(err) ? err : INFINITY;
          res.worst = fmt::format("input {} [{}]: analytic {:.10g} numeric {:.10g}", k, i, a, m);
        }
      }
    }
    res.analytic.push_back(std::move(an));
    res.numeric.push_back(std::move(nu));
  }
  return res;
}

}  // namespace saobp
