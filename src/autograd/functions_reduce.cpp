// sum and mean: the gradient of a sum is the output gradient broadcast back over the summed
// dims (a strided copy from a stride-0 view); mean scales it by 1/n.
#include "autograd/grad_util.h"
#include "autograd/ops.h"

namespace saobp {

namespace {
// Sum over `dims` (sorted, unique; all dims when empty means full reduction) times alpha.
Var reduce(const Var& x, int64_t dim, bool all, bool keepdim, double alpha_per_n, const char* name) {
  const Tensor X = x.data().contiguous();
  Shape kept = X.shape();
  int64_t n = 1;
  if (all) {
    for (auto& s : kept) s = 1;
    n = X.numel();
  } else {
    const int64_t d = X.wrap_dim(dim);
    n = kept[d];
    kept[d] = 1;
  }
  const double alpha = alpha_per_n > 0 ? 1.0 / std::max<int64_t>(n, 1) : 1.0;
  Tensor out = X.new_empty(kept);
  kern::reduce_sum_to(X, out, alpha, false);
  Shape final_shape;
  if (!all) {
    final_shape = kept;
    if (!keepdim) final_shape.erase(final_shape.begin() + X.wrap_dim(dim));
  } else if (keepdim) {
    final_shape = kept;
  }
  const Shape in_shape = X.shape();
  return make_result(out.view(final_shape), name, {x},
                     [kept, in_shape, alpha](const Tensor& g, GradSlots& gin) {
                       Tensor gb = g.contiguous().view(kept).expand(in_shape);
                       if (alpha == 1.0) {
                         kern::copy(gb, gin[0], true);
                       } else {
                         Tensor t = Tensor::empty(in_shape, g.dtype(), g.device());
                         kern::copy(gb, t, false);
                         kern::axpby(t, alpha, gin[0], 1.0);
                       }
                     });
}
}  // namespace

Var sum(const Var& x) { return reduce(x, 0, true, false, 0, "sum"); }
Var sum(const Var& x, int64_t dim, bool keepdim) { return reduce(x, dim, false, keepdim, 0, "sum"); }
Var mean(const Var& x) { return reduce(x, 0, true, false, 1, "mean"); }
Var mean(const Var& x, int64_t dim, bool keepdim) { return reduce(x, dim, false, keepdim, 1, "mean"); }

}  // namespace saobp
