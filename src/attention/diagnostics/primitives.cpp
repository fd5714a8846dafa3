// The single-matrix metrics of src/attention/diagnostics.h: entropy, GTD and indirect entropy
// (the paper's eqs. 2, 13, 14), the cross-layer product, sparsity, the attention graph with
// Barrat clustering and Brandes betweenness, and the sink indicator. Derivations:
// docs/diagnostics.md.
// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 GEMM kernels for double
// (_mm512_extractf64x4_pd / _mm512_insertf64x4 on _mm256_undefined_pd); it must be silenced
// before the intrinsics headers are read, so this comes first.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attention/diagnostics.h"
#include "core/error.h"

namespace saobp {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Σ x² of every entry, a plain loop: Eigen's AVX-512 reductions trip a GCC 12 false
// -Wmaybe-uninitialized (_mm512_extractf64x4_pd).
double squared_norm(const RowMatrix& a) {
  double s = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) s += a.data()[i] * a.data()[i];
  return s;
}

void check_square(const RowMatrix& a, const char* op) {
  if (a.rows() != a.cols() || a.rows() < 1)
    fail(op, "expected a square (n,n) matrix with n >= 1, got ({},{})", a.rows(), a.cols());
}

}  // namespace

// ---- single-matrix primitives ------------------------------------------------------------------

std::vector<double> row_entropies(const RowMatrix& a) {
  check_square(a, "row_entropies");
  const int64_t n = a.rows();
  std::vector<double> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = row_entropy(a.data() + i * n, n);
  return h;
}

double attention_entropy(const RowMatrix& a) {
  const std::vector<double> h = row_entropies(a);
  double s = 0;
  for (double x : h) s += x;
  return s / static_cast<double>(h.size());
}

RowMatrix gtd_global(const RowMatrix& a, double beta, int K) {
  check_square(a, "gtd");
  if (K < 2) fail("gtd", "K must be >= 2 (paths of length 2..K), got {}", K);
  // G = Σ_{t=2}^{K} β^{t-1} A^t = A² Q with Q = Σ_{t=0}^{K-2} β^{t+1} A^t: the powers up to
  // A^{max(2, K-2)} and one last product (2 products for K = 4 instead of 3).
  const int64_t n = a.rows();
  std::vector<RowMatrix> pw(static_cast<size_t>(std::max(2, K - 2) + 1));
  pw[1] = a;
  for (size_t t = 2; t < pw.size(); ++t) {
    pw[t].resize(n, n);
    pw[t].noalias() = pw[t - 1] * a;
  }
  if (K == 2) return beta * pw[2];
  RowMatrix q = RowMatrix::Identity(n, n) * beta;
  double coef = beta;
  for (int t = 1; t <= K - 2; ++t) {
    coef *= beta;
    q += coef * pw[static_cast<size_t>(t)];
  }
  RowMatrix g(n, n);
  g.noalias() = pw[2] * q;
  return g;
}

double gtd_from(const RowMatrix& a, const RowMatrix& g) {
  const double ga = squared_norm(g), aa = squared_norm(a);
  const double den = aa + ga;
  return den > 0 ? ga / den : kNaN;
}

double indirect_entropy_from(const RowMatrix& g) {
  check_square(g, "indirect_entropy");
  const int64_t n = g.rows();
  std::vector<double> q(static_cast<size_t>(n));
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = g.data() + i * n;
    double z = 0;
    for (int64_t j = 0; j < n; ++j) z += row[j];
    if (!(z > 0)) continue;
    for (int64_t j = 0; j < n; ++j) q[static_cast<size_t>(j)] = row[j] / z;
    total += row_entropy(q.data(), n);
  }
  return total / static_cast<double>(n);
}

GtdResult gtd_metrics(const RowMatrix& a, double beta, int K) {
  const RowMatrix g = gtd_global(a, beta, K);
  return {gtd_from(a, g), indirect_entropy_from(g)};
}

double gtd(const RowMatrix& a, double beta, int K) { return gtd_from(a, gtd_global(a, beta, K)); }

double indirect_entropy(const RowMatrix& a, double beta, int K) {
  return indirect_entropy_from(gtd_global(a, beta, K));
}

RowMatrix cross_layer_product(const std::vector<RowMatrix>& head_means) {
  if (head_means.empty()) fail("cross_layer_product", "no layers");
  RowMatrix p = head_means[0];
  RowMatrix next;
  for (size_t l = 1; l < head_means.size(); ++l) {
    if (head_means[l].rows() != p.rows() || head_means[l].cols() != p.cols())
      fail("cross_layer_product", "layer {} is ({},{}), layer 0 is ({},{})", l, head_means[l].rows(),
           head_means[l].cols(), p.rows(), p.cols());
    next.resize(p.rows(), p.cols());
    next.noalias() = head_means[l] * p;  // P_l = M_l P_{l-1}
    p.swap(next);
  }
  return p;
}

double sparsity(const RowMatrix& a, double threshold, bool causal) {
  check_square(a, "sparsity");
  const int64_t n = a.rows();
  int64_t below = 0, total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t end = causal ? i + 1 : n;
    const double* row = a.data() + i * n;
    for (int64_t j = 0; j < end; ++j) below += row[j] < threshold;
    total += end;
  }
  return static_cast<double>(below) / static_cast<double>(total);
}

RowMatrix attention_graph(const RowMatrix& a, double tau, int64_t nodes) {
  check_square(a, "attention_graph");
  if (nodes < 1) fail("attention_graph", "nodes must be >= 1, got {}", nodes);
  const int64_t m = std::min<int64_t>(nodes, a.rows());
  RowMatrix w = RowMatrix::Zero(m, m);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i + 1; j < m; ++j) {
      const double x = a(i, j), y = a(j, i);
      if (std::max(x, y) >= tau) w(i, j) = w(j, i) = 0.5 * (x + y);
    }
  return w;
}

ClusteringResult barrat_clustering(const RowMatrix& w) {
  check_square(w, "barrat_clustering");
  const int64_t m = w.rows();
  ClusteringResult r;
  r.per_node.assign(static_cast<size_t>(m), kNaN);
  std::vector<int64_t> nb;
  double sum = 0;
  int64_t defined = 0;
  for (int64_t i = 0; i < m; ++i) {
    nb.clear();
    double s = 0;
    for (int64_t j = 0; j < m; ++j)
      if (j != i && w(i, j) > 0) {
        nb.push_back(j);
        s += w(i, j);
      }
    const int64_t k = static_cast<int64_t>(nb.size());
    if (k < 2) {
      ++r.undefined_nodes;
      continue;
    }
    // Σ_{j != h} (w_ij + w_ih)/2 a_ij a_ih a_jh = Σ_j w_ij t_ij, t_ij = #{h in N(i): a_jh}
    // (each ordered pair contributes w_ij/2 + w_ih/2, and the pairs (j,h), (h,j) both appear).
    double num = 0;
    for (int64_t j : nb) {
      int64_t t = 0;
      for (int64_t h : nb) t += (h != j && w(j, h) > 0);
      num += w(i, j) * static_cast<double>(t);
    }
    const double c = num / (s * static_cast<double>(k - 1));
    r.per_node[static_cast<size_t>(i)] = c;
    sum += c;
    ++defined;
  }
  r.mean = defined ? sum / static_cast<double>(defined) : kNaN;
  return r;
}

std::vector<double> brandes_betweenness(const RowMatrix& w) {
  check_square(w, "brandes_betweenness");
  const int64_t m = w.rows();
  std::vector<std::vector<int64_t>> adj(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j)
      if (j != i && (w(i, j) > 0 || w(j, i) > 0)) adj[static_cast<size_t>(i)].push_back(j);
  std::vector<double> bc(static_cast<size_t>(m), 0.0), sigma(static_cast<size_t>(m)),
      delta(static_cast<size_t>(m));
  std::vector<int64_t> dist(static_cast<size_t>(m)), order;
  order.reserve(static_cast<size_t>(m));
  for (int64_t s = 0; s < m; ++s) {
    std::fill(sigma.begin(), sigma.end(), 0.0);
    std::fill(delta.begin(), delta.end(), 0.0);
    std::fill(dist.begin(), dist.end(), -1);
    order.clear();
    sigma[static_cast<size_t>(s)] = 1;
    dist[static_cast<size_t>(s)] = 0;
    order.push_back(s);
    for (size_t q = 0; q < order.size(); ++q) {  // BFS; `order` is the queue and the stack
      const int64_t v = order[q];
      for (int64_t x : adj[static_cast<size_t>(v)]) {
        if (dist[static_cast<size_t>(x)] < 0) {
          dist[static_cast<size_t>(x)] = dist[static_cast<size_t>(v)] + 1;
          order.push_back(x);
        }
        if (dist[static_cast<size_t>(x)] == dist[static_cast<size_t>(v)] + 1)
          sigma[static_cast<size_t>(x)] += sigma[static_cast<size_t>(v)];
      }
    }
    // Dependency accumulation in order of non-increasing distance: δ(v) = Σ_{x: v pred of x}
    // σ(v)/σ(x) (1 + δ(x)).
    for (size_t q = order.size(); q-- > 1;) {
      const int64_t x = order[q];
      for (int64_t v : adj[static_cast<size_t>(x)])
        if (dist[static_cast<size_t>(v)] == dist[static_cast<size_t>(x)] - 1)
          delta[static_cast<size_t>(v)] += sigma[static_cast<size_t>(v)] / sigma[static_cast<size_t>(x)] *
                                           (1 + delta[static_cast<size_t>(x)]);
      bc[static_cast<size_t>(x)] += delta[static_cast<size_t>(x)];
    }
  }
  for (double& b : bc) b *= 0.5;  // undirected: every pair was counted from both ends
  return bc;
}

SinkResult sink_indicator(const RowMatrix& a, double peak_tau, double sinky_fraction) {
  check_square(a, "sink_indicator");
  const int64_t n = a.rows();
  SinkResult r;
  std::vector<uint8_t> is_sink(static_cast<size_t>(n), 0);
  int64_t peaked = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = a.data() + i * n;
    int64_t arg = 0;
    for (int64_t j = 1; j < n; ++j)
      if (row[j] > row[arg]) arg = j;
    if (row[arg] > peak_tau) {
      ++peaked;
      is_sink[static_cast<size_t>(arg)] = 1;
    }
  }
  r.peaked_fraction = static_cast<double>(peaked) / static_cast<double>(n);
  r.sinky = r.peaked_fraction > sinky_fraction;
  for (int64_t j = 0; j < n; ++j)
    if (is_sink[static_cast<size_t>(j)]) r.sink_tokens.push_back(j);
  return r;
}

PositionalScores positional_scores(const RowMatrix& a) {
  const int64_t n = a.rows();
  PositionalScores r;
  for (int64_t i = 0; i < n; ++i) r.diagonal += a(i, i);
  r.diagonal /= static_cast<double>(n);
  if (n < 2) {
    r.previous = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  for (int64_t i = 1; i < n; ++i) r.previous += a(i, i - 1);
  r.previous /= static_cast<double>(n - 1);
  return r;
}

}  // namespace saobp
