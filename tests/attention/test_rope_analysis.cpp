// The RoPE analyses (attention/rope_analysis.h) and the positional scores of the diagnostics
// against hand-computed values.
#include <cmath>

#include "attention/diagnostics.h"
#include "attention/rope_analysis.h"
#include "support.h"

using namespace saobp;
using namespace saobp::test;

TEST_CASE("rope analysis: frequencies and RoFormer's decay bound by hand", "[diagnostics][rope]") {
  const std::vector<double> t = rope_thetas(4, 100.0);
  REQUIRE(t.size() == 2);
  CHECK(t[0] == 1.0);
  CHECK(t[1] == Approx(0.1));
  // Distance 0: S_j = j, so the bound is the mean of 1 .. HS/2 = (HS/2 + 1) / 2.
  CHECK(rope_decay_bound(8, 10000.0, {0})[0] == Approx(2.5));
  // HS = 4, base 100, m = 1: |S_1| = |e^i| = 1, |S_2| = |e^i + e^0.1i| = sqrt(2 + 2 cos 0.9).
  CHECK(rope_decay_bound(4, 100.0, {1})[0] == Approx((1 + std::sqrt(2 + 2 * std::cos(0.9))) / 2));
  // The long-term decay: at GPT-2's head size and RoFormer's base the bound falls with distance.
  const std::vector<double> b = rope_decay_bound(64, 10000.0, {0, 10, 100, 1000});
  CHECK(b[1] < b[0]);
  CHECK(b[2] < b[1]);
  CHECK(b[3] < 0.3 * b[0]);  // 4.09 of 16.5
  // A larger base turns every pair more slowly, so the bound decays later: at distance 1000 it is
  // 2.61 for base 100, 4.09 for 10^4 and 7.11 for 10^6 (the curve oscillates: compare far apart).
  CHECK(rope_decay_bound(64, 100.0, {1000})[0] == Approx(2.61).margin(0.01));
  CHECK(rope_decay_bound(64, 1e6, {1000})[0] == Approx(7.11).margin(0.01));
  CHECK_ERROR(rope_thetas(3, 100.0), Catch::Contains("even"));
  CHECK_ERROR(rope_thetas(4, 0.0), Catch::Contains("positive"));
  const std::vector<int64_t> d = rope_decay_distances(1023);
  CHECK(d.front() == 0);
  CHECK(d[64] == 64);
  CHECK(d.back() == 1023);
  for (size_t i = 1; i < d.size(); ++i) CHECK(d[i] > d[i - 1]);
  CHECK(rope_decay_distances(10).back() == 10);
}

TEST_CASE("rope analysis: mean pair norms by hand, the same before and after the rotation",
          "[diagnostics][rope]") {
  // One head, HS 4, two positions; position 1 is padding in the masked case.
  const Tensor q = Tensor::from_vector(std::vector<double>{3, 4, 0, 1, 0, 0, 0, 2}, {1, 1, 2, 4});
  const Tensor k = Tensor::from_vector(std::vector<double>{0, 0, 1, 0, 6, 8, 0, 0}, {1, 1, 2, 4});
  RopePairNorms masked(1, 1, 4);
  masked.add(0, q, k, Tensor::from_vector(std::vector<uint8_t>{1, 0}, {1, 2}));
  CHECK(masked.q_norm()[0][0] == std::vector<double>{5, 1});
  CHECK(masked.k_norm()[0][0] == std::vector<double>{0, 1});
  RopePairNorms all(1, 1, 4);
  all.add(0, q.to(DType::f32), k.to(DType::f32), Tensor());
  CHECK(all.q_norm()[0][0] == std::vector<double>{2.5, 1.5});
  CHECK(all.k_norm()[0][0] == std::vector<double>{5, 0.5});
  // A rotation keeps each pair's norm.
  const Tensor x = randn({2, 3, 7, 8}, 4), y = randn({2, 3, 7, 8}, 5);
  Tensor rx = x.empty_like(), ry = y.empty_like();
  kern::rope(x, 10000.0, false, rx, 0);
  kern::rope(y, 10000.0, false, ry, 0);
  RopePairNorms before(1, 3, 8), after(1, 3, 8);
  before.add(0, x, y, Tensor());
  after.add(0, rx, ry, Tensor());
  for (int h = 0; h < 3; ++h) {
    CHECK(max_abs_diff(before.q_norm()[0][h], after.q_norm()[0][h]) < 1e-12);
    CHECK(max_abs_diff(before.k_norm()[0][h], after.k_norm()[0][h]) < 1e-12);
  }
  CHECK_ERROR(before.add(0, x, randn({2, 3, 7, 6}, 6), Tensor()), Catch::Contains("must be"));
  CHECK_ERROR(before.add(1, x, y, Tensor()), Catch::Contains("layer 1"));
}

TEST_CASE("rope analysis: the share of |q||k| in the slow pairs", "[diagnostics][rope]") {
  RopeReport r;
  r.theta = {1.0, 0.1};
  r.wavelength = {2 * M_PI, 20 * M_PI};  // 6.3 and 62.8
  r.seq_len = 10;                        // pair 1 turns less than once across the sequence
  r.q_norm = {{{1, 2}}};
  r.k_norm = {{{3, 4}}};
  CHECK(r.slow_share()[0] == Approx(8.0 / 11.0));
  r.distances = {0, 1};
  r.bound = {1.5, 1.2};
  CHECK(r.decay_csv() == "distance,bound\n0,1.5\n1,1.2\n");
  CHECK(r.bands_csv().rfind("layer,head,pair,theta,wavelength,q_norm,k_norm\n0,0,0,1,", 0) == 0);
  CHECK(r.to_json()["slow_share"][0] == Approx(8.0 / 11.0));
}

TEST_CASE("diagnostics: diagonal and previous-token scores by hand", "[diagnostics]") {
  RowMatrix a(3, 3);
  a << 1.0, 0.0, 0.0,  //
      0.9, 0.1, 0.0,   //
      0.1, 0.6, 0.3;
  const PositionalScores s = positional_scores(a);
  CHECK(s.diagonal == Approx((1.0 + 0.1 + 0.3) / 3));
  CHECK(s.previous == Approx((0.9 + 0.6) / 2));
  RowMatrix one(1, 1);
  one << 1.0;
  CHECK(positional_scores(one).diagonal == 1.0);
  CHECK(std::isnan(positional_scores(one).previous));
}
