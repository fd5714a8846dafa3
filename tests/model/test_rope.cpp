// Rotary position embedding: the kernel and the differentiable op (autograd/ops.h `rope`).
#include <cmath>

#include "support.h"

using namespace saobp;
using namespace saobp::test;

namespace {

Tensor rope_of(const Tensor& x, double base, bool inverse) {
  Tensor y = x.empty_like();
  kern::rope(x, base, inverse, y, 0);
  return y;
}

// (1,1,T,HS) with every row equal to v.
Tensor repeat_rows(const std::vector<double>& v, int64_t T) {
  std::vector<double> all;
  for (int64_t t = 0; t < T; ++t) all.insert(all.end(), v.begin(), v.end());
  return Tensor::from_vector(all, {1, 1, T, static_cast<int64_t>(v.size())});
}

}  // namespace

TEST_CASE("rope: gradcheck of the op in f64", "[model][gradcheck]") {
  require_gradcheck([](const std::vector<Var>& v) { return rope(v[0], 10000.0); }, {randn({2, 2, 5, 6}, 3)});
  // Large angles (base 2) and a 3-d input (..., T, HS).
  require_gradcheck([](const std::vector<Var>& v) { return rope(v[0], 2.0); }, {randn({3, 7, 4}, 4)});
}

TEST_CASE("rope: position 0 is the identity and pair 0 turns by t radians", "[model]") {
  const Tensor x = randn({1, 2, 3, 4}, 5);
  const Tensor y = rope_of(x, 10000.0, false);
  const auto xv = values(x), yv = values(y);
  for (int h = 0; h < 2; ++h) {
    const size_t r0 = static_cast<size_t>(h * 12);
    for (int c = 0; c < 4; ++c) CHECK(yv[r0 + c] == xv[r0 + c]);
    for (int t = 1; t < 3; ++t) {  // θ_0 = 1: angle t
      const size_t r = r0 + static_cast<size_t>(4 * t);
      CHECK(yv[r] == Approx(xv[r] * std::cos(t) - xv[r + 1] * std::sin(t)).margin(1e-14));
      CHECK(yv[r + 1] == Approx(xv[r] * std::sin(t) + xv[r + 1] * std::cos(t)).margin(1e-14));
      // pair 1: θ_1 = base^(-2/4) = 0.01
      CHECK(yv[r + 2] ==
            Approx(xv[r + 2] * std::cos(0.01 * t) - xv[r + 3] * std::sin(0.01 * t)).margin(1e-14));
    }
  }
}

TEST_CASE("rope: rotation preserves norms, inverse undoes forward", "[model]") {
  const int64_t HS = 8;
  const Tensor x = randn({2, 3, 9, HS}, 6);
  const Tensor y = rope_of(x, 100.0, false);
  const auto xv = values(x), yv = values(y);
  for (size_t r = 0; r < xv.size() / HS; ++r) {
    for (size_t i = 0; i < HS; i += 2) {  // each pair keeps its length
      const double nx = std::hypot(xv[r * HS + i], xv[r * HS + i + 1]);
      const double ny = std::hypot(yv[r * HS + i], yv[r * HS + i + 1]);
      CHECK(std::abs(nx - ny) < 1e-12);
    }
  }
  CHECK(max_abs_diff(values(rope_of(y, 100.0, true)), xv) < 1e-12);
  // In place (y aliases x) gives the same result.
  Tensor z = x.clone();
  kern::rope(z, 100.0, false, z, 0);
  CHECK(bitwise_equal(z, y));
  // f32 agrees with f64.
  CHECK(max_abs_diff(values(rope_of(x.to(DType::f32), 100.0, false)), yv) < 1e-5);
}

TEST_CASE("rope: <rope(q)_t, rope(k)_s> depends only on t - s", "[model]") {
  const int64_t HS = 16, T = 24;
  const std::vector<double> q = values(randn({HS}, 7)), k = values(randn({HS}, 8));
  const auto rq = values(rope_of(repeat_rows(q, T), 10000.0, false));
  const auto rk = values(rope_of(repeat_rows(k, T), 10000.0, false));
  auto dot = [&](int64_t t, int64_t s) {
    double d = 0;
    for (int64_t c = 0; c < HS; ++c)
      d += rq[static_cast<size_t>(t * HS + c)] * rk[static_cast<size_t>(s * HS + c)];
    return d;
  };
  for (int64_t t = 0; t < 8; ++t)
    for (int64_t s = 0; s < 8; ++s)
      for (int64_t shift : {1, 5, 16}) CHECK(std::abs(dot(t + shift, s + shift) - dot(t, s)) < 1e-12);
  // ... and does depend on it (the embedding is not trivial).
  CHECK(std::abs(dot(3, 0) - dot(0, 0)) > 1e-3);
}

TEST_CASE("rope: rejects an odd head size and non-positive base", "[model]") {
  Tensor x = randn({1, 1, 2, 3}, 9), y = x.empty_like();
  CHECK_ERROR(kern::rope(x, 10000.0, false, y, 0), Catch::Contains("[rope]"));
  Tensor x2 = randn({1, 1, 2, 4}, 9), y2 = x2.empty_like();
  CHECK_ERROR(kern::rope(x2, 0.0, false, y2, 0), Catch::Contains("base"));
  CHECK_ERROR(kern::rope(x2, 10000.0, false, y2, -1), Catch::Contains("offset"));
}

TEST_CASE("rope: rows at an offset are the same rows of the whole sequence, bit for bit", "[model]") {
  // Generation rotates the new rows of q and k at positions [P, P + n): each must equal row P + t
  // of a whole-sequence rotation (the logits of incremental decoding equal the full forward's).
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = randn({2, 3, 40, 8}, 11).to(dt);
    const Tensor whole = rope_of(x, 500.0, false);
    for (int64_t P : {0, 1, 17, 39}) {
      const int64_t n = std::min<int64_t>(3, 40 - P);
      const Tensor part = x.slice(2, P, P + n).contiguous();
      Tensor y = part.empty_like();
      kern::rope(part, 500.0, false, y, P);
      CHECK(bitwise_equal(y, whole.slice(2, P, P + n).contiguous()));
      Tensor back = y.empty_like();  // the inverse at the same offset undoes it
      kern::rope(y, 500.0, true, back, P);
      CHECK(max_abs_diff(values(back), values(part)) < (dt == DType::f32 ? 1e-5 : 1e-12));
    }
  }
  // The differentiable op passes the offset through its backward too.
  require_gradcheck([](const std::vector<Var>& v) { return rope(v[0], 10000.0, 7); },
                    {randn({1, 2, 3, 4}, 12)});
}
