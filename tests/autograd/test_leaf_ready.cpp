// Var::backward's leaf-ready hook: each leaf that requires grad is reported once, as soon as its
// gradient is final (after the last node that feeds it), in the order gradients become final.
// GradSum relies on it to start a bucket's all-reduce while the backward goes on.
#include <algorithm>

#include "support.h"

using namespace saobp;
using saobp::test::randn;
using saobp::test::values;

namespace {

// What the hook saw: the leaf and a copy of its gradient at that moment (empty: undefined).
struct Report {
  VarImpl* leaf;
  std::vector<double> grad;
};

std::function<void(VarImpl&)> recorder(std::vector<Report>& out) {
  return [&out](VarImpl& v) {
    out.push_back({&v, v.grad.defined() ? values(v.grad) : std::vector<double>{}});
  };
}

size_t times(const std::vector<Report>& r, const Var& v) {
  return static_cast<size_t>(
      std::count_if(r.begin(), r.end(), [&](const Report& x) { return x.leaf == v.impl().get(); }));
}

}  // namespace

TEST_CASE("leaf-ready hook: an MLP's parameters are reported once each, final, output layer first",
          "[autograd]") {
  // x: (4,3) -> matmul w1 (3,5) + b1 -> gelu -> matmul w2 (5,2) + b2 -> Σ out². The backward
  // runs the output layer's nodes first (b2's add, then w2's matmul) and w1's matmul last.
  const Var x(randn({4, 3}, 1));  // data: no gradient wanted, never reported
  Var w1(randn({3, 5}, 2), true), b1(randn({5}, 3), true), w2(randn({5, 2}, 4), true),
      b2(randn({2}, 5), true);
  const Var h = gelu(add(matmul(x, w1), b1));
  const Var out = add(matmul(h, w2), b2);
  std::vector<Report> seen;
  sum(mul(out, out)).backward(Tensor(), recorder(seen));

  REQUIRE(seen.size() == 4);
  for (const Var* p : {&w1, &b1, &w2, &b2}) {
    CHECK(times(seen, *p) == 1);
    for (const Report& r : seen)
      if (r.leaf == p->impl().get()) CHECK(r.grad == values(p->grad()));  // final when reported
  }
  CHECK(times(seen, x) == 0);
  CHECK(seen.front().leaf == b2.impl().get());
  CHECK(seen[1].leaf == w2.impl().get());
  CHECK(seen.back().leaf == w1.impl().get());

  // The same gradients as a backward without the hook.
  Var v1(w1.data(), true), c1(b1.data(), true), v2(w2.data(), true), c2(b2.data(), true);
  const Var o2 = add(matmul(gelu(add(matmul(x, v1), c1)), v2), c2);
  sum(mul(o2, o2)).backward();
  CHECK(values(v1.grad()) == values(w1.grad()));
  CHECK(values(c2.grad()) == values(b2.grad()));
}

TEST_CASE("leaf-ready hook: a leaf used by several nodes is reported once, after the last", "[autograd]") {
  // y = Σ (x·x + 3x) · a: x feeds mul (twice), scale, and is final only after both; a is final
  // after the outer mul, which runs first.
  Var x(Tensor::from_vector(std::vector<double>{0.5, -1.5, 2.0}), true);
  Var a(Tensor::from_vector(std::vector<double>{1.0, 2.0, -1.0}), true);
  std::vector<Report> seen;
  sum(mul(add(mul(x, x), scale(x, 3.0)), a)).backward(Tensor(), recorder(seen));
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].leaf == a.impl().get());
  CHECK(seen[1].leaf == x.impl().get());
  CHECK(seen[1].grad == values(x.grad()));
  CHECK(values(x.grad()) == std::vector<double>{(2 * 0.5 + 3) * 1, (2 * -1.5 + 3) * 2, (2 * 2.0 + 3) * -1});

  // Backward from a leaf itself: the seed is its gradient, reported once.
  Var leaf(Tensor::from_vector(std::vector<double>{4.0}), true);
  seen.clear();
  leaf.backward(Tensor(), recorder(seen));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].leaf == leaf.impl().get());
  CHECK(seen[0].grad == std::vector<double>{1.0});
}
