// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 GEMM kernels for double
// (_mm512_extractf64x4_pd / _mm512_insertf64x4 on _mm256_undefined_pd); it must be silenced
// before the intrinsics headers are read, so this comes first.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <tuple>

#include "attention/diagnostics.h"
#include "support.h"

using namespace saobp;

namespace {

RowMatrix identity(int64_t n) { return RowMatrix::Identity(n, n); }
RowMatrix uniform(int64_t n) { return RowMatrix::Constant(n, n, 1.0 / static_cast<double>(n)); }
// Every row puts all its mass on key `col`: the one-hot sink column.
RowMatrix sink_column(int64_t n, int64_t col) {
  RowMatrix a = RowMatrix::Zero(n, n);
  a.col(col).setOnes();
  return a;
}
// Row i attends key (i + 1) mod n.
RowMatrix cyclic(int64_t n) {
  RowMatrix a = RowMatrix::Zero(n, n);
  for (int64_t i = 0; i < n; ++i) a(i, (i + 1) % n) = 1;
  return a;
}
// max |a_ij| by a plain loop (Eigen's AVX-512 reductions trip a GCC 12 false warning).
double max_abs(const RowMatrix& a) {
  double m = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i]));
  return m;
}
double entry_sum(const RowMatrix& a) {
  double s = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) s += a.data()[i];
  return s;
}
// A symmetric weighted graph from an edge list.
RowMatrix graph(int64_t n, const std::vector<std::tuple<int, int, double>>& edges) {
  RowMatrix w = RowMatrix::Zero(n, n);
  for (auto [i, j, x] : edges) w(i, j) = w(j, i) = x;
  return w;
}
// Σ_{t=2}^{K} β^{t-1}: the GTD discount sum.
double discount_sum(double beta, int K) {
  double s = 0;
  for (int t = 2; t <= K; ++t) s += std::pow(beta, t - 1);
  return s;
}

// Random masked softmax maps (B,NH,T,T) with logits N(0, std²); padding keys get 0, padding rows
// get garbage (they must be ignored).
Tensor random_maps(int64_t B, int64_t NH, int64_t T, const std::vector<uint8_t>& km, uint64_t seed,
                   double std, DType dtype = DType::f64) {
  std::vector<double> x = test::randn({B, NH, T, T}, seed, DType::f64, std).to_vector<double>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        double* row = x.data() + ((b * NH + h) * T + i) * T;
        const bool row_token = km.empty() || km[static_cast<size_t>(b * T + i)];
        if (!row_token) {
          for (int64_t j = 0; j < T; ++j) row[j] = 7.0;  // garbage
          continue;
        }
        double mx = -1e300;
        for (int64_t j = 0; j < T; ++j)
          if (km.empty() || km[static_cast<size_t>(b * T + j)]) mx = std::max(mx, row[j]);
        double z = 0;
        for (int64_t j = 0; j < T; ++j) {
          row[j] = (km.empty() || km[static_cast<size_t>(b * T + j)]) ? std::exp(row[j] - mx) : 0.0;
          z += row[j];
        }
        for (int64_t j = 0; j < T; ++j) row[j] /= z;
      }
  Tensor t = Tensor::from_vector(x, {B, NH, T, T});
  return dtype == DType::f64 ? t : t.to(dtype);
}

}  // namespace

TEST_CASE("diagnostics: entropy of identity, uniform, sink column and permutation", "[diagnostics]") {
  CHECK(attention_entropy(identity(5)) == 0.0);
  CHECK(attention_entropy(uniform(4)) == Approx(std::log(4.0)).epsilon(1e-15));
  CHECK(attention_entropy(sink_column(6, 2)) == 0.0);
  CHECK(attention_entropy(cyclic(5)) == 0.0);
  RowMatrix a(2, 2);
  a << 0.5, 0.5, 1.0, 0.0;
  const std::vector<double> h = row_entropies(a);
  CHECK(h[0] == Approx(std::log(2.0)));
  CHECK(h[1] == 0.0);
  CHECK(attention_entropy(a) == Approx(std::log(2.0) / 2));
}

TEST_CASE("diagnostics: GTD of idempotent matrices equals the closed form", "[diagnostics]") {
  // A² = A gives A^t = A, so G = s A with s = Σ_{t=2}^{K} β^{t-1} = β (1 - β^{K-1}) / (1 - β),
  // GTD = s² |A|² / (|A|² + s² |A|²) = s² / (1 + s²) whatever A, and G~ = A (rows sum to 1), so
  // H_ind = H(A).
  RowMatrix block = RowMatrix::Zero(5, 5);
  block.topLeftCorner(2, 2).setConstant(0.5);
  block.bottomRightCorner(3, 3).setConstant(1.0 / 3);
  const std::vector<std::pair<double, int>> params = {{0.9, 4}, {0.5, 2}, {0.3, 7}};
  for (auto [beta, K] : params) {
    const double s = discount_sum(beta, K);
    CHECK(s == Approx(beta * (1 - std::pow(beta, K - 1)) / (1 - beta)).epsilon(1e-14));
    const double want = s * s / (1 + s * s);
    for (const RowMatrix& a : {identity(4), uniform(6), sink_column(5, 3), block}) {
      REQUIRE(max_abs(a * a - a) < 1e-15);
      const GtdResult r = gtd_metrics(a, beta, K);
      CHECK(r.gtd == Approx(want).epsilon(1e-13));
      CHECK(r.gtd > 0);
      CHECK(r.gtd < 1);
      CHECK(r.indirect_entropy == Approx(attention_entropy(a)).margin(1e-13));
    }
  }
  // The paper's setting: s = 0.9 + 0.81 + 0.729 = 2.439.
  CHECK(gtd(uniform(8)) == Approx(2.439 * 2.439 / (1 + 2.439 * 2.439)).epsilon(1e-13));
  CHECK(indirect_entropy(uniform(8)) == Approx(std::log(8.0)).epsilon(1e-13));
}

TEST_CASE("diagnostics: GTD and indirect entropy of a cyclic permutation", "[diagnostics]") {
  // n = 5: P², P³, P⁴ are permutations with disjoint supports, so |G|² = n (β² + β⁴ + β⁶),
  // |A|² = n, and each row of G holds β, β², β³.
  const double b = 0.9;
  const double g2 = b * b + std::pow(b, 4) + std::pow(b, 6);
  const GtdResult r = gtd_metrics(cyclic(5));
  CHECK(r.gtd == Approx(g2 / (1 + g2)).epsilon(1e-14));
  const double s = b + b * b + b * b * b;
  double H = 0;
  for (double q : {b / s, b * b / s, b * b * b / s}) H -= q * std::log(q);
  CHECK(r.indirect_entropy == Approx(H).epsilon(1e-14));
  // G itself (eq. 12) on a 2-cycle: P² = I, P³ = P, P⁴ = I.
  const RowMatrix g = gtd_global(cyclic(2));
  CHECK(g(0, 0) == Approx(b + b * b * b));
  CHECK(g(0, 1) == Approx(b * b));
  // Strictly inside (0,1) for random stochastic matrices.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::vector<double> x = random_maps(1, 1, 9, {}, seed, 2.0).to_vector<double>();
    const RowMatrix a = Eigen::Map<const RowMatrix>(x.data(), 9, 9);
    const double v = gtd(a);
    CHECK(v > 0);
    CHECK(v < 1);
  }
  // The factored evaluation A² Σ β^{t+1} A^t equals the plain sum of eq. 12 for every K.
  const std::vector<double> x = random_maps(1, 1, 7, {}, 9, 1.0).to_vector<double>();
  const RowMatrix a = Eigen::Map<const RowMatrix>(x.data(), 7, 7);
  for (int K : {2, 3, 4, 5, 7}) {
    RowMatrix p = a, want = RowMatrix::Zero(7, 7);
    for (int t = 2; t <= K; ++t) {
      p = (p * a).eval();
      want += std::pow(0.7, t - 1) * p;
    }
    CHECK(max_abs(gtd_global(a, 0.7, K) - want) < 1e-14);
  }
  CHECK_ERROR(gtd(uniform(3), 0.9, 1), Catch::Contains("K must be >= 2"));
  CHECK(std::isnan(gtd(RowMatrix::Zero(3, 3))));
}

TEST_CASE("diagnostics: cross-layer product puts the first layer rightmost", "[diagnostics]") {
  // M0 = everyone reads token 0; M1 = row i reads token i+1. M1 M0 = M0 (a sink at 0), while
  // M0 M1 would be a sink at 1.
  const RowMatrix p = cross_layer_product({sink_column(4, 0), cyclic(4)});
  CHECK(max_abs(p - sink_column(4, 0)) == 0.0);
  const RowMatrix q = cross_layer_product({cyclic(4), cyclic(4), cyclic(4)});
  CHECK(q(0, 3) == 1.0);
  CHECK_ERROR(cross_layer_product({}), Catch::Contains("no layers"));
}

TEST_CASE("diagnostics: sparsity over valid entries, causal upper triangle excluded", "[diagnostics]") {
  CHECK(sparsity(identity(4)) == Approx(12.0 / 16));
  CHECK(sparsity(identity(4), 1e-3, true) == Approx(6.0 / 10));
  CHECK(sparsity(uniform(4)) == 0.0);
  CHECK(sparsity(uniform(4), 0.3) == 1.0);
  CHECK(sparsity(uniform(4), 0.25) == 0.0);  // strictly below
  CHECK(sparsity(sink_column(5, 0), 1e-3, true) == Approx(10.0 / 15));
}

TEST_CASE("diagnostics: attention graph thresholds and symmetrizes", "[diagnostics]") {
  RowMatrix a(3, 3);
  a << 0.9, 1e-5, 0.0999, 0.5, 0.5, 0.0, 1e-5, 2e-5, 0.99997;
  const RowMatrix w = attention_graph(a, 1e-4, 40);
  CHECK(w(0, 0) == 0.0);  // no self-loop
  CHECK(w(0, 1) == Approx((1e-5 + 0.5) / 2));
  CHECK(w(1, 0) == w(0, 1));
  CHECK(w(0, 2) == Approx((0.0999 + 1e-5) / 2));
  CHECK(w(1, 2) == 0.0);                           // both directions below τ
  CHECK(attention_graph(a, 1e-4, 2).rows() == 2);  // the first `nodes` tokens
  CHECK(attention_graph(uniform(50), 1e-4, 40).rows() == 40);
}

TEST_CASE("diagnostics: Barrat clustering on small graphs", "[diagnostics]") {
  // Any triangle: c = 1 at every node, whatever the weights.
  const ClusteringResult tri = barrat_clustering(graph(3, {{0, 1, 1.0}, {0, 2, 2.0}, {1, 2, 3.0}}));
  for (double c : tri.per_node) CHECK(c == Approx(1.0));
  CHECK(tri.undefined_nodes == 0);
  // Triangle 0-1-2 with a pendant 3 on 0: c0 = (w01 + w02) / (s0 (k0 - 1)) = 3 / (6 * 2).
  const ClusteringResult pend =
      barrat_clustering(graph(4, {{0, 1, 1.0}, {0, 2, 2.0}, {1, 2, 3.0}, {0, 3, 3.0}}));
  CHECK(pend.per_node[0] == Approx(0.25));
  CHECK(pend.per_node[1] == Approx(1.0));
  CHECK(pend.per_node[2] == Approx(1.0));
  CHECK(std::isnan(pend.per_node[3]));
  CHECK(pend.undefined_nodes == 1);
  CHECK(pend.mean == Approx(2.25 / 3));
  // Complete graph with unequal weights: c = Σ_j w_ij (k-1) / (s_i (k-1)) = 1.
  RowMatrix k5 = RowMatrix::Zero(5, 5);
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j) k5(i, j) = k5(j, i) = 0.1 * (i + 1) + 0.01 * j;
  CHECK(barrat_clustering(k5).mean == Approx(1.0));
  // Star: the centre has no triangle (0), the leaves have degree 1 (undefined).
  const ClusteringResult star =
      barrat_clustering(graph(5, {{0, 1, 1.0}, {0, 2, 1.0}, {0, 3, 1.0}, {0, 4, 1.0}}));
  CHECK(star.per_node[0] == 0.0);
  CHECK(star.undefined_nodes == 4);
  CHECK(star.mean == 0.0);
  // No edges: nothing defined, NaN mean, no crash.
  const ClusteringResult empty = barrat_clustering(RowMatrix::Zero(4, 4));
  CHECK(std::isnan(empty.mean));
  CHECK(empty.undefined_nodes == 4);
  CHECK(std::isnan(barrat_clustering(RowMatrix::Zero(1, 1)).mean));
}

TEST_CASE("diagnostics: Brandes betweenness on small graphs", "[diagnostics]") {
  const std::vector<double> path =
      brandes_betweenness(graph(5, {{0, 1, 1.0}, {1, 2, 1.0}, {2, 3, 1.0}, {3, 4, 1.0}}));
  CHECK(path == std::vector<double>{0, 3, 4, 3, 0});
  const std::vector<double> star =
      brandes_betweenness(graph(5, {{0, 1, 1.0}, {0, 2, 1.0}, {0, 3, 1.0}, {0, 4, 1.0}}));
  CHECK(star == std::vector<double>{6, 0, 0, 0, 0});
  // 4-cycle: each opposite pair has two shortest paths, each through one of the other nodes.
  const std::vector<double> c4 =
      brandes_betweenness(graph(4, {{0, 1, 1.0}, {1, 2, 1.0}, {2, 3, 1.0}, {3, 0, 1.0}}));
  for (double x : c4) CHECK(x == 0.5);
  // Unweighted: weights do not change the result. Complete graph: all zero.
  const std::vector<double> tri = brandes_betweenness(graph(3, {{0, 1, 0.1}, {0, 2, 5.0}, {1, 2, 3.0}}));
  CHECK(tri == std::vector<double>{0, 0, 0});
  CHECK(brandes_betweenness(attention_graph(uniform(6))) == std::vector<double>(6, 0.0));
  // Disconnected pieces and isolated nodes contribute nothing.
  const std::vector<double> two = brandes_betweenness(graph(6, {{0, 1, 1.0}, {1, 2, 1.0}, {3, 4, 1.0}}));
  CHECK(two == std::vector<double>{0, 1, 0, 0, 0, 0});
  CHECK(brandes_betweenness(RowMatrix::Zero(1, 1)) == std::vector<double>{0});
}

TEST_CASE("diagnostics: sink indicator on sink, uniform and identity maps", "[diagnostics]") {
  const SinkResult s = sink_indicator(sink_column(5, 3));
  CHECK(s.peaked_fraction == 1.0);
  CHECK(s.sinky);
  CHECK(s.sink_tokens == std::vector<int64_t>{3});
  const SinkResult u = sink_indicator(uniform(5));
  CHECK(u.peaked_fraction == 0.0);
  CHECK_FALSE(u.sinky);
  CHECK(u.sink_tokens.empty());
  CHECK(sink_indicator(identity(3)).sink_tokens == std::vector<int64_t>{0, 1, 2});
  // 4 of 5 rows peaked: 0.8 is not > 0.8. Row max exactly 0.95 is not peaked.
  RowMatrix a = sink_column(5, 0);
  a.row(4) = uniform(5).row(0);
  CHECK(sink_indicator(a).peaked_fraction == Approx(0.8));
  CHECK_FALSE(sink_indicator(a).sinky);
  RowMatrix e(2, 2);
  e << 0.95, 0.05, 0.05, 0.95;
  CHECK(sink_indicator(e).peaked_fraction == 0.0);
}

TEST_CASE("diagnostics: accumulator matches the primitives", "[diagnostics]") {
  // L = 2, NH = 2, T = 4, one sample. Layer 0: head 0 uniform, head 1 sink at token 2.
  // Layer 1: head 0 identity, head 1 cyclic. B = A except layer 1 head 1 (uniform).
  const int64_t T = 4;
  auto pack = [&](const std::vector<RowMatrix>& heads) {
    std::vector<double> v;
    for (const RowMatrix& m : heads) v.insert(v.end(), m.data(), m.data() + m.size());
    return Tensor::from_vector(v, {1, static_cast<int64_t>(heads.size()), T, T});
  };
  std::vector<AttentionMaps> layers(2);
  layers[0].attn = pack({uniform(T), sink_column(T, 2)});
  layers[1].attn = pack({identity(T), cyclic(T)});
  layers[1].probs = pack({identity(T), uniform(T)});
  // Values: token j of every head has |v_j| = j + 1 (HS = 2: (j + 1, 0)).
  std::vector<double> vv;
  for (int h = 0; h < 2; ++h)
    for (int64_t j = 0; j < T; ++j) vv.insert(vv.end(), {static_cast<double>(j + 1), 0.0});
  const std::vector<Tensor> values = {Tensor::from_vector(vv, {1, 2, T, 2}),
                                      Tensor::from_vector(vv, {1, 2, T, 2})};
  DiagnosticsAccumulator acc;
  acc.add(layers, Tensor(), &values);
  const DiagnosticsReport r = acc.report();
  REQUIRE(r.samples == 1);
  REQUIRE(r.layers == 2);
  REQUIRE(r.heads == 2);
  const HeadDiagnostics& u = r.attn.heads[0][0];
  CHECK(u.entropy == Approx(std::log(4.0)));
  REQUIRE(u.position_entropy.size() == 4);
  for (double x : u.position_entropy) CHECK(x == Approx(std::log(4.0)));
  CHECK(u.gtd == Approx(gtd(uniform(T))));
  CHECK(u.sparsity == 0.0);
  CHECK(u.clustering == Approx(1.0));  // complete graph
  CHECK(u.betweenness == 0.0);
  CHECK(u.sink_tokens == 0);
  CHECK(u.other_value_norm == Approx(2.5));
  const HeadDiagnostics& s = r.attn.heads[0][1];
  CHECK(s.peaked_fraction == 1.0);
  CHECK(s.sinky_rate == 1.0);
  CHECK(s.sink_value_norm == Approx(3.0));
  CHECK(s.other_value_norm == Approx((1 + 2 + 4) / 3.0));
  CHECK(s.sparsity == Approx(12.0 / 16));
  // The sink graph is a star on token 2: BC(2) = C(3,2) = 3, node mean 3/4; CC: centre 0, leaves NaN.
  CHECK(s.betweenness == Approx(0.75));
  CHECK(s.clustering == 0.0);
  CHECK(s.clustering_undefined_nodes == 3);
  // Layer 0 head means; cross-layer GTD of layer 0 is the GTD of the head mean.
  CHECK(r.attn.layers[0].entropy == Approx(std::log(4.0) / 2));
  const RowMatrix m0 = 0.5 * (uniform(T) + sink_column(T, 2));
  const RowMatrix m1a = 0.5 * (identity(T) + cyclic(T));
  const RowMatrix m1b = 0.5 * (identity(T) + uniform(T));
  CHECK(r.attn.cross_gtd[0] == Approx(gtd(m0)));
  CHECK(r.attn.cross_gtd[1] == Approx(gtd(cross_layer_product({m0, m1a}))));
  CHECK(r.probs.cross_gtd[1] == Approx(gtd(cross_layer_product({m0, m1b}))));
  CHECK(r.attn.cross_indirect_entropy[1] == Approx(indirect_entropy(m1a * m0)));
  // B == A where probs is undefined; differs in layer 1 head 1.
  CHECK(r.probs.heads[0][1].gtd == r.attn.heads[0][1].gtd);
  CHECK(r.attn.heads[1][1].gtd == Approx(gtd(cyclic(T))));
  CHECK(r.probs.heads[1][1].entropy == Approx(std::log(4.0)));
  CHECK(r.attn.last_layer_head_entropy == std::vector<double>{0.0, 0.0});
  // Output helpers.
  const nlohmann::json j = r.to_json();
  CHECK(j["samples"] == 1);
  CHECK(j["attn"]["heads"].size() == 2);
  CHECK(j["options"]["K"] == 4);
  const std::string hc = r.heads_csv(), lc = r.layers_csv(), pc = r.positions_csv();
  CHECK(std::count(hc.begin(), hc.end(), '\n') == 1 + 2 * 2 * 2);
  CHECK(std::count(lc.begin(), lc.end(), '\n') == 1 + 2 * 2);
  CHECK(std::count(pc.begin(), pc.end(), '\n') == 1 + 2 * 2 * 3 * 4);
  CHECK(hc.rfind("map,layer,head,entropy,gtd,", 0) == 0);
}

TEST_CASE("diagnostics: padded batch equals the unpadded samples", "[diagnostics]") {
  // Sample 0 has tokens at positions {0, 2, 3, 5} of T = 6 (garbage elsewhere); sample 1 is full.
  // Feeding the padded batch must give bitwise the same report as feeding sample 0 alone as a
  // T = 4 batch and then sample 1 alone.
  const int64_t T = 6, NH = 2, L = 2, HS = 3;
  const std::vector<int64_t> keep = {0, 2, 3, 5};
  const std::vector<uint8_t> km = {1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1};
  std::vector<AttentionMaps> padded(L), small(L), full(L);
  std::vector<Tensor> vp, vs, vf;
  for (int64_t l = 0; l < L; ++l) {
    for (int which = 0; which < 2; ++which) {
      const Tensor t = random_maps(2, NH, T, km, 10 + 2 * l + which, 2.5);
      const Tensor s = t.slice(0, 0, 1).contiguous();
      std::vector<double> x = s.to_vector<double>(), y;
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t i : keep)
          for (int64_t j : keep) y.push_back(x[static_cast<size_t>((h * T + i) * T + j)]);
      const Tensor sm = Tensor::from_vector(y, {1, NH, 4, 4});
      const Tensor fl = t.slice(0, 1, 2).contiguous();
      (which ? padded[l].probs : padded[l].attn) = t;
      (which ? small[l].probs : small[l].attn) = sm;
      (which ? full[l].probs : full[l].attn) = fl;
    }
    const Tensor v = test::randn({2, NH, T, HS}, 50 + l);
    std::vector<double> x = v.slice(0, 0, 1).contiguous().to_vector<double>(), y;
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i : keep)
        for (int64_t c = 0; c < HS; ++c) y.push_back(x[static_cast<size_t>((h * T + i) * HS + c)]);
    vp.push_back(v);
    vs.push_back(Tensor::from_vector(y, {1, NH, 4, HS}));
    vf.push_back(v.slice(0, 1, 2).contiguous());
  }
  DiagnosticsAccumulator a, b;
  a.add(padded, test::mask_of(km, {2, T}), &vp);
  b.add(small, Tensor(), &vs);
  b.add(full, test::mask_of(std::vector<uint8_t>(6, 1), {1, T}), &vf);
  const DiagnosticsReport ra = a.report(), rb = b.report();
  CHECK(ra.samples == 2);
  CHECK(ra.position_count == std::vector<int64_t>{2, 2, 2, 2, 1, 1});
  CHECK(ra.to_json().dump() == rb.to_json().dump());
  CHECK(ra.heads_csv() == rb.heads_csv());
  // Sample with no token at all: skipped and counted.
  DiagnosticsAccumulator c;
  c.add(padded, test::mask_of(std::vector<uint8_t>(12, 0), {2, T}));
  CHECK(c.report().samples == 0);
  CHECK(c.report().empty_samples == 2);
  CHECK(std::isnan(c.report().attn.heads[0][0].entropy));
}

TEST_CASE("diagnostics: results do not depend on the thread count", "[diagnostics]") {
  const int64_t B = 5, NH = 3, T = 24, L = 3;
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t t = 15; t < T; ++t) km[static_cast<size_t>(2 * T + t)] = 0;
  km[static_cast<size_t>(4 * T + 3)] = 0;
  std::vector<AttentionMaps> layers(L);
  std::vector<Tensor> values;
  for (int64_t l = 0; l < L; ++l) {
    layers[l].attn = random_maps(B, NH, T, km, 100 + l, 3.0, DType::f32);
    layers[l].probs = random_maps(B, NH, T, km, 200 + l, 1.5, DType::f32);
    values.push_back(test::randn({B, NH, T, 8}, 300 + l, DType::f32));
  }
  const Tensor mask = test::mask_of(km, {B, T});
  auto run = [&] {
    DiagnosticsOptions o;
    o.graph_nodes = 12;
    DiagnosticsAccumulator acc(o);
    acc.add(layers, mask, &values);
    acc.add(layers, mask, &values);
    return acc.report().to_json().dump();
  };
  const std::string one = test::with_threads(1, run), two = test::with_threads(2, run);
  CHECK(one == two);
  // Sanity of the values on random maps.
  DiagnosticsAccumulator acc;
  acc.add(layers, mask, &values);
  const DiagnosticsReport r = acc.report();
  for (const MapDiagnostics* md : {&r.attn, &r.probs})
    for (int64_t l = 0; l < L; ++l) {
      CHECK(md->layers[l].gtd > 0);
      CHECK(md->layers[l].gtd < 1);
      CHECK(md->cross_gtd[l] > 0);
      CHECK(md->cross_gtd[l] < 1);
      CHECK(md->layers[l].entropy > 0);
      CHECK(md->layers[l].entropy < std::log(static_cast<double>(T)));
    }
}

TEST_CASE("diagnostics: causal flag and bad inputs", "[diagnostics]") {
  // Causal uniform maps: row i spreads over i + 1 keys; sparsity counts the lower triangle only.
  const int64_t T = 5;
  std::vector<double> c(static_cast<size_t>(T * T), 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) c[static_cast<size_t>(i * T + j)] = 1.0 / static_cast<double>(i + 1);
  std::vector<AttentionMaps> layers(1);
  layers[0].attn = Tensor::from_vector(c, {1, 1, T, T});
  DiagnosticsOptions o;
  o.causal = true;
  o.graph_metrics = false;
  DiagnosticsAccumulator acc(o);
  acc.add(layers);
  const DiagnosticsReport r = acc.report();
  CHECK(r.attn.heads[0][0].sparsity == 0.0);
  CHECK(std::isnan(r.attn.heads[0][0].clustering));
  CHECK(std::isnan(r.attn.heads[0][0].sink_value_norm));
  CHECK(r.attn.heads[0][0].position_entropy[3] == Approx(std::log(4.0)));
  DiagnosticsAccumulator enc;
  enc.add(layers);
  CHECK(enc.report().attn.heads[0][0].sparsity == Approx(10.0 / 25));

  o = DiagnosticsOptions{};
  o.beta = 1.0;
  CHECK_ERROR(DiagnosticsAccumulator{o}, Catch::Contains("beta"));
  DiagnosticsAccumulator bad;
  CHECK_ERROR(bad.add({}), Catch::Contains("no layers"));
  std::vector<AttentionMaps> wrong(1);
  wrong[0].attn = Tensor::zeros({1, 1, 3, 4}, DType::f64);
  CHECK_ERROR(bad.add(wrong), Catch::Contains("(B,NH,T,T)"));
  CHECK_ERROR(bad.add(layers, Tensor::zeros({1, 4}, DType::u8)), Catch::Contains("key_mask"));
  const std::vector<Tensor> vals = {Tensor::zeros({1, 2, T, 3}, DType::f64)};
  CHECK_ERROR(bad.add(layers, Tensor(), &vals), Catch::Contains("values"));
  bad.add(layers);
  std::vector<AttentionMaps> two(2, layers[0]);
  CHECK_ERROR(bad.add(two), Catch::Contains("earlier batches"));
}

TEST_CASE("diagnostics: sink statistics per layer group against hand-computed values", "[diagnostics]") {
  // L = 3, NH = 2, T = 4, two samples; groups of 2 layers: {0,1}, {2}, then all. Each map is
  // sink_column(T, c) (every row peaked on c: a sinky head, sink token c) or uniform (no peaked
  // row). |v_j| = (j + 1)(l + 1): per head and sample, the four tokens' norms sum to 10 (l + 1).
  //   layer 0: head 0 sink at 0 in both samples; head 1 uniform.
  //   layer 1: head 0 uniform; head 1 sink at 3 in sample 0, uniform in sample 1.
  //   layer 2: head 0 sink at 1 in sample 0, uniform in sample 1; head 1 sink at 1 in both.
  const int64_t T = 4, L = 3, NH = 2, B = 2;
  const RowMatrix U = uniform(T);
  const std::vector<std::vector<std::vector<RowMatrix>>> m = {
      // [l][b][h]
      {{sink_column(T, 0), U}, {sink_column(T, 0), U}},
      {{U, sink_column(T, 3)}, {U, U}},
      {{sink_column(T, 1), sink_column(T, 1)}, {U, sink_column(T, 1)}}};
  std::vector<AttentionMaps> layers(L);
  std::vector<Tensor> values;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> a, v;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        const RowMatrix& x = m[static_cast<size_t>(l)][static_cast<size_t>(b)][static_cast<size_t>(h)];
        a.insert(a.end(), x.data(), x.data() + x.size());
        for (int64_t j = 0; j < T; ++j) v.insert(v.end(), {static_cast<double>((j + 1) * (l + 1)), 0.0});
      }
    layers[static_cast<size_t>(l)].attn = Tensor::from_vector(a, {B, NH, T, T});
    values.push_back(Tensor::from_vector(v, {B, NH, T, 2}));
  }
  DiagnosticsOptions o;
  o.graph_metrics = false;
  o.layer_group = 2;
  DiagnosticsAccumulator acc(o);
  acc.add(layers, Tensor(), &values);
  DiagnosticsReport r = acc.report();
  // Per head: layer 1 head 1 is sinky in one sample of two; its sinky sample's tokens (2+4+6+8)
  // against the other sample's (the same).
  const HeadDiagnostics& h11 = r.attn.heads[1][1];
  CHECK(h11.sinky_rate == 0.5);
  CHECK(h11.sinky_head_value_norm == Approx(5.0));
  CHECK(h11.sinky_head_tokens == 4);
  CHECK(h11.other_head_tokens == 4);
  CHECK(std::isnan(r.attn.heads[0][1].sinky_head_value_norm));  // never sinky

  r.skip_rate = {0.1, 0.3, 0.5};
  const std::vector<SinkGroup> g = sink_groups(r.attn, r.skip_rate, r.options.layer_group);
  REQUIRE(g.size() == 3);
  CHECK((g[0].first_layer == 0 && g[0].last_layer == 1));
  CHECK((g[1].first_layer == 2 && g[1].last_layer == 2));
  CHECK((g[2].first_layer == 0 && g[2].last_layer == 2));
  // Layers 0-1: sinky (sample, layer, head) triples: L0H0 twice, L1H1 once: 3 of 8.
  CHECK(g[0].sinky_share == Approx(3.0 / 8));
  CHECK(g[0].skip_share == Approx(0.2));
  // Sink tokens: L0H0 token 0 (norm 1) twice, L1H1 token 3 (norm 8) once: 10 / 3. The others:
  // L0H0 2+3+4 twice (18, 6 tokens), L0H1 10 twice (20, 8), L1H0 20 twice (40, 8), L1H1 2+4+6 in
  // sample 0 (12, 3) and 20 in sample 1 (20, 4): 110 / 29.
  CHECK(g[0].sink_value_norm == Approx(10.0 / 3));
  CHECK(g[0].sink_tokens == 3);
  CHECK(g[0].other_value_norm == Approx(110.0 / 29));
  CHECK(g[0].other_tokens == 29);
  CHECK(g[0].value_norm_delta == Approx(10.0 / 3 - 110.0 / 29));
  // Sinky heads' tokens: L0H0 both samples (10 + 10), L1H1 sample 0 (20): 40 / 12; the other
  // heads': L0H1 (20), L1H0 (40), L1H1 sample 1 (20): 80 / 20.
  CHECK(g[0].sinky_head_value_norm == Approx(40.0 / 12));
  CHECK(g[0].sinky_head_tokens == 12);
  CHECK(g[0].other_head_value_norm == Approx(4.0));
  CHECK(g[0].other_head_tokens == 20);
  // Layer 2 (norms 3, 6, 9, 12): sinky 3 of 4; sink token 1 (norm 6) three times; others
  // 3+9+12 three times and 30 once: 102 / 13; sinky heads 90 / 12, the other head 30 / 4.
  CHECK(g[1].sinky_share == Approx(0.75));
  CHECK(g[1].skip_share == Approx(0.5));
  CHECK(g[1].sink_value_norm == Approx(6.0));
  CHECK(g[1].other_value_norm == Approx(102.0 / 13));
  CHECK(g[1].sinky_head_value_norm == Approx(7.5));
  CHECK(g[1].other_head_value_norm == Approx(7.5));
  // All layers: 6 of 12 sinky; the pools summed.
  CHECK(g[2].sinky_share == Approx(0.5));
  CHECK(g[2].skip_share == Approx(0.3));
  CHECK(g[2].sink_value_norm == Approx(28.0 / 6));
  CHECK(g[2].other_value_norm == Approx(212.0 / 42));
  CHECK(g[2].sinky_head_value_norm == Approx(130.0 / 24));
  CHECK(g[2].other_head_value_norm == Approx(110.0 / 24));
  // No head skip: NaN skip shares; in analysis.json under sink_groups, the layer group recorded.
  CHECK(std::isnan(sink_groups(r.attn, {}, 2)[0].skip_share));
  const nlohmann::json j = r.to_json();
  CHECK(j["sink_groups"]["layer_group"] == 2);
  CHECK(j["options"]["layer_group"] == 2);
  REQUIRE(j["sink_groups"]["attn"].size() == 3);
  CHECK(j["sink_groups"]["attn"][1]["sinky_share"].get<double>() == Approx(0.75));
  CHECK(j["sink_groups"]["probs"][0]["sink_value_norm"].get<double>() == Approx(10.0 / 3));  // B = A here
  // One group per layer, and bad groupings.
  CHECK(sink_groups(r.attn, {}, 1).size() == 4);
  CHECK(sink_groups(r.attn, {}, 4).size() == 2);
  CHECK_ERROR(sink_groups(r.attn, {}, 0), Catch::Contains("layer_group"));
  CHECK_ERROR(sink_groups(r.attn, {0.1}, 2), Catch::Contains("skip_rate"));
  o.layer_group = 0;
  CHECK_ERROR(DiagnosticsAccumulator{o}, Catch::Contains("layer_group"));
}

// Timing of the full metric set at the paper's scale: 1024 samples, T = 128, 4 layers x 4 heads,
// A and B (f32 maps, as the model hands them). Hidden: `saobp_tests "[diagnostics-bench]"`.
TEST_CASE("diagnostics: timing for 1024 samples of BERT-Mini maps", "[.][diagnostics-bench]") {
  const int64_t B = 64, NH = 4, T = 128, L = 4, HS = 64;
  std::vector<AttentionMaps> layers(L);
  std::vector<Tensor> values;
  for (int64_t l = 0; l < L; ++l) {
    layers[l].attn = random_maps(B, NH, T, {}, 1000 + l, 3.0, DType::f32);
    layers[l].probs = random_maps(B, NH, T, {}, 2000 + l, 2.0, DType::f32);
    values.push_back(test::randn({B, NH, T, HS}, 3000 + l, DType::f32));
  }
  for (bool graphs : {false, true}) {
    DiagnosticsOptions o;
    o.graph_metrics = graphs;
    DiagnosticsAccumulator acc(o);
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 16; ++rep) acc.add(layers, Tensor(), &values);
    const DiagnosticsReport r = acc.report();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "diagnostics: " << r.samples << " samples x " << L << " layers x " << NH
              << " heads x 2 maps, T = " << T << ", graph_metrics = " << graphs
              << ", threads = " << omp_get_max_threads() << ": " << s << " s\n";
    CHECK(r.samples == 1024);
  }
}

// Thread CPU time of each primitive on 256 random 128 x 128 maps (robust to a loaded machine).
TEST_CASE("diagnostics: primitive cost", "[.][diagnostics-bench]") {
  const int64_t N = 256, T = 128;
  const std::vector<double> x = random_maps(N, 1, T, {}, 77, 3.0).to_vector<double>();
  std::vector<RowMatrix> m;
  for (int64_t i = 0; i < N; ++i) m.push_back(Eigen::Map<const RowMatrix>(x.data() + i * T * T, T, T));
  auto cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double sink = 0;
  auto time = [&](const char* name, auto&& f) {
    const double t0 = cpu();
    for (const RowMatrix& a : m) sink += f(a);
    std::cout << name << ": " << (cpu() - t0) / static_cast<double>(N) * 1e3 << " ms/matrix (CPU)\n";
  };
  time("entropy", [](const RowMatrix& a) { return attention_entropy(a); });
  time("gtd_global", [](const RowMatrix& a) { return entry_sum(gtd_global(a)); });
  time("gtd_metrics", [](const RowMatrix& a) { return gtd_metrics(a).gtd; });
  time("product", [](const RowMatrix& a) {
    RowMatrix p(a.rows(), a.cols());
    p.noalias() = a * a;
    return p(0, 0);
  });
  time("sparsity", [](const RowMatrix& a) { return sparsity(a); });
  time("graph", [](const RowMatrix& a) { return entry_sum(attention_graph(a)); });
  time("barrat", [](const RowMatrix& a) { return barrat_clustering(attention_graph(a)).mean; });
  time("brandes", [](const RowMatrix& a) { return brandes_betweenness(attention_graph(a))[0]; });
  time("sink", [](const RowMatrix& a) { return sink_indicator(a).peaked_fraction; });
  CHECK(std::isfinite(sink));
}

TEST_CASE("diagnostics: per-sample rows match the means, skip empty samples, ignore the thread count",
          "[diagnostics]") {
  const int64_t B = 4, NH = 2, T = 10, L = 2;
  std::vector<uint8_t> km(static_cast<size_t>(B * T), 1);
  for (int64_t t = 6; t < T; ++t) km[static_cast<size_t>(1 * T + t)] = 0;  // sample 1: 6 tokens
  for (int64_t t = 0; t < T; ++t) km[static_cast<size_t>(3 * T + t)] = 0;  // sample 3: none
  std::vector<AttentionMaps> layers(L);
  for (int64_t l = 0; l < L; ++l) {
    layers[l].attn = random_maps(B, NH, T, km, 400 + l, 2.0);
    layers[l].probs = random_maps(B, NH, T, km, 500 + l, 1.0);
  }
  const Tensor mask = test::mask_of(km, {B, T});
  auto run = [&] {
    DiagnosticsOptions o;
    o.per_sample = true;
    DiagnosticsAccumulator acc(o);
    acc.add(layers, mask);
    acc.add(layers, mask);  // samples 4..7
    return acc.report();
  };
  const DiagnosticsReport r = test::with_threads(1, run);
  CHECK(r.per_sample_csv() == test::with_threads(2, run).per_sample_csv());
  // 6 samples with tokens (3 and 7 have none) x L x 2 maps x NH.
  REQUIRE(r.per_sample.size() == static_cast<size_t>(6 * L * 2 * NH));
  const std::string csv = r.per_sample_csv();
  CHECK(csv.rfind("sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 6 * L * 2 * NH);
  std::vector<int64_t> seen;
  for (const SampleDiagnostics& d : r.per_sample) {
    if (seen.empty() || seen.back() != d.sample) seen.push_back(d.sample);
    CHECK(d.tokens == (d.sample % 4 == 1 ? 6 : T));
  }
  CHECK(seen == std::vector<int64_t>{0, 1, 2, 4, 5, 6});
  // The per-sample values average to the per-head report (same samples, same order).
  for (int m = 0; m < 2; ++m)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < NH; ++h) {
        double e = 0, g = 0, cc = 0;
        for (const SampleDiagnostics& d : r.per_sample)
          if (d.map == m && d.layer == l && d.head == h)
            e += d.entropy / 6, g += d.gtd / 6, cc += d.clustering / 6;
        const HeadDiagnostics& hd = (m ? r.probs : r.attn).heads[l][h];
        CHECK(std::abs(e - hd.entropy) < 1e-12);
        CHECK(std::abs(g - hd.gtd) < 1e-12);
        CHECK(std::abs(cc - hd.clustering) < 1e-12);
      }
  // Off by default: no rows kept.
  DiagnosticsAccumulator plain;
  plain.add(layers, mask);
  CHECK(plain.report().per_sample.empty());
}
