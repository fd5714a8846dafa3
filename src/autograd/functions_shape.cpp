// Shape ops. Forwards are views where the layout allows (reshape of contiguous data, transpose,
// permute, slice, split); backwards route the gradient back through the inverse view and add it
// with a strided copy (kern::copy with accumulate).
#include <numeric>

#include "autograd/grad_util.h"
#include "autograd/ops.h"

namespace saobp {

namespace {
// grad (+)= g seen through view(grad): `view` maps the input's gradient buffer onto g's shape.
// For views that cover the whole input (all but slice), a first gradient is copied into a new
// buffer instead of added to zeros.
template <class ViewFn>
void accumulate_through(const Tensor& g, GradSlots& gin, bool covers_all, ViewFn view) {
  bool fresh = false;
  Tensor& grad = covers_all ? gin.slot(0, fresh) : gin[0];
  Tensor dst = view(grad);
  kern::copy(g, dst, !fresh);
}
}  // namespace

Var reshape(const Var& x, const Shape& shape) {
  return make_result(x.data().reshape(shape), "reshape", {x}, [](const Tensor& g, GradSlots& gin) {
    if (gin.steal(0, g)) return;
    // x's gradient is contiguous, so it views in g's shape; g itself may be strided.
    accumulate_through(g, gin, true, [&](Tensor& t) { return t.view(g.shape()); });
  });
}

Var transpose(const Var& x, int64_t d0, int64_t d1) {
  return make_result(x.data().transpose(d0, d1), "transpose", {x}, [d0, d1](const Tensor& g, GradSlots& gin) {
    accumulate_through(g, gin, true, [&](Tensor& t) { return t.transpose(d0, d1); });
  });
}

Var permute(const Var& x, const std::vector<int64_t>& order) {
  return make_result(x.data().permute(order), "permute", {x}, [order](const Tensor& g, GradSlots& gin) {
    accumulate_through(g, gin, true, [&](Tensor& t) { return t.permute(order); });
  });
}

Var slice(const Var& x, int64_t dim, int64_t start, int64_t end) {
  return make_result(x.data().slice(dim, start, end), "slice", {x},
                     [dim, start, end](const Tensor& g, GradSlots& gin) {
                       accumulate_through(g, gin, false, [&](Tensor& t) { return t.slice(dim, start, end); });
                     });
}

std::vector<Var> split(const Var& x, int64_t dim, int64_t piece) {
  if (piece <= 0) fail("split", "piece size {} must be positive", piece);
  const int64_t d = x.data().wrap_dim(dim), n = x.size(d);
  std::vector<Var> out;
  for (int64_t s = 0; s < n; s += piece) out.push_back(slice(x, d, s, std::min(n, s + piece)));
  return out;
}

Var concat(const std::vector<Var>& xs, int64_t dim) {
  if (xs.empty()) fail("concat", "nothing to concatenate");
  const Tensor& first = xs[0].data();
  const int64_t d = first.wrap_dim(dim);
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Var& v : xs) {
    if (v.dim() != first.dim() || v.dtype() != first.dtype())
      fail("concat", "cannot concatenate {} with {}", first.str(), v.data().str());
    for (int64_t i = 0; i < first.dim(); ++i)
      if (i != d && v.size(i) != first.size(i))
        fail("concat", "sizes differ outside dim {}: {} and {}", d, first.str(), v.data().str());
    check_same_device(first, v.data(), "concat");
    shape[d] += v.size(d);
  }
  Tensor out = first.new_empty(shape);
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Var& v : xs) {
    Tensor dst = out.slice(d, at, at + v.size(d));
    kern::copy(v.data(), dst, false);
    starts.push_back(at);
    at += v.size(d);
  }
  return make_result(out, "concat", xs, [starts, d](const Tensor& g, GradSlots& gin) {
    for (size_t i = 0; i < starts.size(); ++i) {
      if (!gin.needs(i)) continue;
      Tensor& gi = gin[i];
      kern::copy(g.slice(d, starts[i], starts[i] + gi.size(d)), gi, true);
    }
  });
}

Var contiguous(const Var& x) {
  if (x.data().is_contiguous()) return x;
  return make_result(x.data().contiguous(), "contiguous", {x}, [](const Tensor& g, GradSlots& gin) {
    if (gin.steal(0, g)) return;
    bool fresh = false;
    Tensor& gx = gin.slot(0, fresh);
    kern::copy(g, gx, !fresh);
  });
}

Var split_heads(const Var& x, int64_t nh) {
  if (x.dim() != 3 || x.size(2) % nh != 0)
    fail("split_heads", "expected (B,T,C) with C divisible by {} heads, got {}", nh, x.data().str());
  return transpose(reshape(x, {x.size(0), x.size(1), nh, x.size(2) / nh}), 1, 2);
}

Var merge_heads(const Var& x) {
  if (x.dim() != 4) fail("merge_heads", "expected (B,NH,T,HS), got {}", x.data().str());
  return reshape(contiguous(transpose(x, 1, 2)), {x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace saobp
