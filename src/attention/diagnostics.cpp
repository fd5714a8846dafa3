// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 GEMM kernels for double
// (_mm512_extractf64x4_pd / _mm512_insertf64x4 on _mm256_undefined_pd); it must be silenced
// before the intrinsics headers are read, so this comes first.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "attention/diagnostics.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>

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

// ---- options -------------------------------------------------------------------------------------

void DiagnosticsOptions::validate() const {
  const char* op = "diagnostics";
  if (!(beta > 0 && beta < 1)) fail(op, "beta must be in (0,1), got {}", beta);
  if (K < 2) fail(op, "K must be >= 2, got {}", K);
  if (!(sparsity_threshold >= 0)) fail(op, "sparsity_threshold must be >= 0, got {}", sparsity_threshold);
  if (!(graph_tau >= 0)) fail(op, "graph_tau must be >= 0, got {}", graph_tau);
  if (graph_nodes < 1) fail(op, "graph_nodes must be >= 1, got {}", graph_nodes);
  if (!(peak_tau >= 0 && peak_tau <= 1)) fail(op, "peak_tau must be in [0,1], got {}", peak_tau);
  if (!(sinky_fraction >= 0 && sinky_fraction <= 1))
    fail(op, "sinky_fraction must be in [0,1], got {}", sinky_fraction);
}

nlohmann::json DiagnosticsOptions::to_json() const {
  return {{"beta", beta},
          {"K", K},
          {"sparsity_threshold", sparsity_threshold},
          {"graph_tau", graph_tau},
          {"graph_nodes", graph_nodes},
          {"peak_tau", peak_tau},
          {"sinky_fraction", sinky_fraction},
          {"causal", causal},
          {"graph_metrics", graph_metrics}};
}

// ---- accumulator ---------------------------------------------------------------------------------

namespace {

// Any host-readable floating tensor as contiguous doubles (copied from the device if needed).
std::vector<double> host_f64(const Tensor& t) {
  const Tensor c = t.contiguous();
  if (c.dtype() == DType::f64) return c.to_vector<double>();
  if (c.dtype() == DType::f32) {
    const std::vector<float> f = c.to_vector<float>();
    return std::vector<double>(f.begin(), f.end());
  }
  return c.to(DType::f64).to_vector<double>();
}

// What one (sample, layer, map, head) contributes.
struct ItemOut {
  double entropy = 0, gtd = 0, ind = 0, sparsity = 0, cc = kNaN, bc = kNaN, peaked = 0;
  bool sinky = false;
  int64_t cc_undefined = 0;
  double sink_norm = 0, other_norm = 0;
  int64_t sink_n = 0, other_n = 0;
  std::vector<double> row_h;
};

RowMatrix extract(const double* base, int64_t T, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  RowMatrix a(n, n);
  for (int64_t r = 0; r < n; ++r) {
    const double* row = base + idx[static_cast<size_t>(r)] * T;
    for (int64_t c = 0; c < n; ++c) a(r, c) = row[idx[static_cast<size_t>(c)]];
  }
  return a;
}

double nan_mean(const std::vector<double>& v) {
  double s = 0;
  int64_t k = 0;
  for (double x : v)
    if (std::isfinite(x)) {
      s += x;
      ++k;
    }
  return k ? s / static_cast<double>(k) : kNaN;
}

}  // namespace

DiagnosticsAccumulator::DiagnosticsAccumulator(DiagnosticsOptions options) : opt_(options) {
  opt_.validate();
}

void DiagnosticsAccumulator::add(const std::vector<AttentionMaps>& layers, const Tensor& key_mask,
                                 const std::vector<Tensor>* values) {
  const char* op = "diagnostics";
  if (layers.empty()) fail(op, "no layers given");
  const Tensor& a0 = layers[0].attn;
  if (!a0.defined() || a0.dim() != 4 || a0.size(2) != a0.size(3))
    fail(op, "layer 0 attn must be (B,NH,T,T), got {}", a0.defined() ? a0.str() : "undefined");
  const int64_t B = a0.size(0), NH = a0.size(1), T = a0.size(2), L = static_cast<int64_t>(layers.size());
  for (int64_t l = 0; l < L; ++l) {
    const AttentionMaps& m = layers[static_cast<size_t>(l)];
    if (!m.attn.defined()) fail(op, "layer {} attn is undefined", l);
    check_shape(m.attn, {B, NH, T, T}, op, "attn");
    if (m.probs.defined()) check_shape(m.probs, {B, NH, T, T}, op, "probs");
  }
  if (key_mask.defined()) check_shape(key_mask, {B, T}, op, "key_mask");
  if (values) {
    if (static_cast<int64_t>(values->size()) != L)
      fail(op, "values has {} layers, maps have {}", values->size(), L);
    for (const Tensor& v : *values) {
      if (!v.defined() || v.dim() != 4 || v.size(0) != B || v.size(1) != NH || v.size(2) != T)
        fail(op, "values must be (B,NH,T,HS) = ({},{},{},HS), got {}", B, NH, T,
             v.defined() ? v.str() : "undefined");
    }
  }
  if (L_ == 0) {
    L_ = L;
    NH_ = NH;
    for (int m = 0; m < 2; ++m) {
      sums_[m].assign(static_cast<size_t>(L * NH), Sums{});
      cross_gtd_[m].assign(static_cast<size_t>(L), 0.0);
      cross_ind_[m].assign(static_cast<size_t>(L), 0.0);
      cross_n_[m].assign(static_cast<size_t>(L), 0);
    }
  } else if (L != L_ || NH != NH_) {
    fail(op, "batch has {} layers x {} heads, earlier batches had {} x {}", L, NH, L_, NH_);
  }
  if (values) has_values_ = true;

  // Host copies: maps[l][m] (m = 0: A, 1: B), values[l].
  std::vector<std::array<std::vector<double>, 2>> maps(static_cast<size_t>(L));
  std::vector<std::vector<double>> vals(static_cast<size_t>(values ? L : 0));
  std::vector<int64_t> HS(static_cast<size_t>(L), 0);
  for (int64_t l = 0; l < L; ++l) {
    const AttentionMaps& m = layers[static_cast<size_t>(l)];
    maps[static_cast<size_t>(l)][0] = host_f64(m.attn);
    maps[static_cast<size_t>(l)][1] = m.probs.defined() ? host_f64(m.probs) : maps[static_cast<size_t>(l)][0];
    if (values) {
      vals[static_cast<size_t>(l)] = host_f64((*values)[static_cast<size_t>(l)]);
      HS[static_cast<size_t>(l)] = (*values)[static_cast<size_t>(l)].size(3);
    }
  }
  const std::vector<uint8_t> km =
      key_mask.defined() ? key_mask.contiguous().to_vector<uint8_t>() : std::vector<uint8_t>();
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      if (km.empty() || km[static_cast<size_t>(b * T + t)]) idx[static_cast<size_t>(b)].push_back(t);

  const DiagnosticsOptions o = opt_;
  const int64_t items = B * L * 2 * NH;
  std::vector<ItemOut> out(static_cast<size_t>(items));
  // Every item writes only its own slot; Eigen runs single-threaded inside the parallel region,
  // so each value is computed the same way whatever the thread count.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t h = it % NH, m = (it / NH) % 2, l = (it / (2 * NH)) % L, b = it / (2 * NH * L);
    const std::vector<int64_t>& ix = idx[static_cast<size_t>(b)];
    const int64_t n = static_cast<int64_t>(ix.size());
    if (n == 0) continue;
    const double* base = maps[static_cast<size_t>(l)][static_cast<size_t>(m)].data() + (b * NH + h) * T * T;
    const RowMatrix a = extract(base, T, ix);
    ItemOut& r = out[static_cast<size_t>(it)];
    r.row_h = row_entropies(a);
    double hs = 0;
    for (double x : r.row_h) hs += x;
    r.entropy = hs / static_cast<double>(n);
    const GtdResult g = gtd_metrics(a, o.beta, o.K);
    r.gtd = g.gtd;
    r.ind = g.indirect_entropy;
    r.sparsity = sparsity(a, o.sparsity_threshold, o.causal);
    if (o.graph_metrics) {
      const RowMatrix w = attention_graph(a, o.graph_tau, o.graph_nodes);
      const ClusteringResult cc = barrat_clustering(w);
      r.cc = cc.mean;
      r.cc_undefined = cc.undefined_nodes;
      const std::vector<double> bc = brandes_betweenness(w);
      double s = 0;
      for (double x : bc) s += x;
      r.bc = s / static_cast<double>(bc.size());
    }
    const SinkResult sk = sink_indicator(a, o.peak_tau, o.sinky_fraction);
    r.peaked = sk.peaked_fraction;
    r.sinky = sk.sinky;
    if (values) {
      const int64_t hsz = HS[static_cast<size_t>(l)];
      const double* v = vals[static_cast<size_t>(l)].data() + (b * NH + h) * T * hsz;
      size_t next_sink = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double* vj = v + ix[static_cast<size_t>(j)] * hsz;
        double ss = 0;
        for (int64_t c = 0; c < hsz; ++c) ss += vj[c] * vj[c];
        const double norm = std::sqrt(ss);
        if (next_sink < sk.sink_tokens.size() && sk.sink_tokens[next_sink] == j) {
          ++next_sink;
          r.sink_norm += norm;
          ++r.sink_n;
        } else {
          r.other_norm += norm;
          ++r.other_n;
        }
      }
    }
  }

  // Cross-layer GTD per (sample, map): P_l = M_l P_{l-1}, M_l = mean over heads.
  std::vector<std::vector<GtdResult>> cross(static_cast<size_t>(B * 2));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t it = 0; it < B * 2; ++it) {
    const int64_t m = it % 2, b = it / 2;
    const std::vector<int64_t>& ix = idx[static_cast<size_t>(b)];
    const int64_t n = static_cast<int64_t>(ix.size());
    if (n == 0) continue;
    RowMatrix p, next(n, n), mean(n, n);
    for (int64_t l = 0; l < L; ++l) {
      mean.setZero();
      for (int64_t h = 0; h < NH; ++h)
        mean += extract(maps[static_cast<size_t>(l)][static_cast<size_t>(m)].data() + (b * NH + h) * T * T, T,
                        ix);
      mean /= static_cast<double>(NH);
      if (l == 0) {
        p = mean;
      } else {
        next.noalias() = mean * p;
        p.swap(next);
      }
      cross[static_cast<size_t>(it)].push_back(gtd_metrics(p, o.beta, o.K));
    }
  }

  // Reduce in sample order.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = static_cast<int64_t>(idx[static_cast<size_t>(b)].size());
    if (n == 0) {
      ++empty_samples_;
      continue;
    }
    ++samples_;
    if (static_cast<int64_t>(position_count_.size()) < n) position_count_.resize(static_cast<size_t>(n), 0);
    for (int64_t p = 0; p < n; ++p) ++position_count_[static_cast<size_t>(p)];
    for (int64_t l = 0; l < L; ++l)
      for (int64_t m = 0; m < 2; ++m) {
        for (int64_t h = 0; h < NH; ++h) {
          const ItemOut& r = out[static_cast<size_t>(((b * L + l) * 2 + m) * NH + h)];
          Sums& s = sums_[m][static_cast<size_t>(l * NH + h)];
          s.entropy += r.entropy;
          if (std::isfinite(r.gtd)) {
            s.gtd += r.gtd;
            s.indirect_entropy += r.ind;
            ++s.gtd_n;
          }
          s.sparsity += r.sparsity;
          s.peaked += r.peaked;
          s.sinky += r.sinky ? 1.0 : 0.0;
          if (o.graph_metrics) {
            if (std::isfinite(r.cc)) {
              s.clustering += r.cc;
              ++s.clustering_n;
            } else {
              ++s.clustering_nan;
            }
            s.clustering_undefined_nodes += r.cc_undefined;
            s.betweenness += r.bc;
            ++s.betweenness_n;
          }
          s.sink_norm += r.sink_norm;
          s.other_norm += r.other_norm;
          s.sink_n += r.sink_n;
          s.other_n += r.other_n;
          if (static_cast<int64_t>(s.position_entropy.size()) < n)
            s.position_entropy.resize(static_cast<size_t>(n), 0.0);
          for (int64_t p = 0; p < n; ++p)
            s.position_entropy[static_cast<size_t>(p)] += r.row_h[static_cast<size_t>(p)];
        }
        const GtdResult& c = cross[static_cast<size_t>(b * 2 + m)][static_cast<size_t>(l)];
        if (std::isfinite(c.gtd)) {
          cross_gtd_[m][static_cast<size_t>(l)] += c.gtd;
          cross_ind_[m][static_cast<size_t>(l)] += c.indirect_entropy;
          ++cross_n_[m][static_cast<size_t>(l)];
        }
      }
  }
}

DiagnosticsReport DiagnosticsAccumulator::report() const {
  DiagnosticsReport r;
  r.options = opt_;
  r.samples = samples_;
  r.empty_samples = empty_samples_;
  r.layers = L_;
  r.heads = NH_;
  r.position_count = position_count_;
  r.has_values = has_values_;
  const auto div = [](double s, int64_t k) { return k > 0 ? s / static_cast<double>(k) : kNaN; };
  for (int m = 0; m < 2; ++m) {
    MapDiagnostics& md = m == 0 ? r.attn : r.probs;
    md.heads.assign(static_cast<size_t>(L_), std::vector<HeadDiagnostics>(static_cast<size_t>(NH_)));
    for (int64_t l = 0; l < L_; ++l) {
      for (int64_t h = 0; h < NH_; ++h) {
        const Sums& s = sums_[m][static_cast<size_t>(l * NH_ + h)];
        HeadDiagnostics& d = md.heads[static_cast<size_t>(l)][static_cast<size_t>(h)];
        d.entropy = div(s.entropy, samples_);
        d.gtd = div(s.gtd, s.gtd_n);
        d.indirect_entropy = div(s.indirect_entropy, s.gtd_n);
        d.sparsity = div(s.sparsity, samples_);
        d.clustering = div(s.clustering, s.clustering_n);
        d.clustering_nan_samples = s.clustering_nan;
        d.clustering_undefined_nodes = s.clustering_undefined_nodes;
        d.betweenness = div(s.betweenness, s.betweenness_n);
        d.peaked_fraction = div(s.peaked, samples_);
        d.sinky_rate = div(s.sinky, samples_);
        d.sink_value_norm = div(s.sink_norm, s.sink_n);
        d.other_value_norm = div(s.other_norm, s.other_n);
        d.sink_tokens = s.sink_n;
        d.other_tokens = s.other_n;
        d.position_entropy.resize(s.position_entropy.size());
        for (size_t p = 0; p < s.position_entropy.size(); ++p)
          d.position_entropy[p] = div(s.position_entropy[p], position_count_[p]);
      }
      // Layer row: NaN-skipping mean over heads; counts summed.
      const auto& hs = md.heads[static_cast<size_t>(l)];
      const auto field = [&](double HeadDiagnostics::*f) {
        std::vector<double> v;
        for (const auto& x : hs) v.push_back(x.*f);
        return nan_mean(v);
      };
      HeadDiagnostics y;
      y.entropy = field(&HeadDiagnostics::entropy);
      y.gtd = field(&HeadDiagnostics::gtd);
      y.indirect_entropy = field(&HeadDiagnostics::indirect_entropy);
      y.sparsity = field(&HeadDiagnostics::sparsity);
      y.clustering = field(&HeadDiagnostics::clustering);
      y.betweenness = field(&HeadDiagnostics::betweenness);
      y.peaked_fraction = field(&HeadDiagnostics::peaked_fraction);
      y.sinky_rate = field(&HeadDiagnostics::sinky_rate);
      y.sink_value_norm = field(&HeadDiagnostics::sink_value_norm);
      y.other_value_norm = field(&HeadDiagnostics::other_value_norm);
      for (const auto& x : hs) {
        y.clustering_nan_samples += x.clustering_nan_samples;
        y.clustering_undefined_nodes += x.clustering_undefined_nodes;
        y.sink_tokens += x.sink_tokens;
        y.other_tokens += x.other_tokens;
      }
      y.position_entropy.resize(position_count_.size());
      for (size_t p = 0; p < position_count_.size(); ++p) {
        std::vector<double> v;
        for (const auto& x : hs) v.push_back(p < x.position_entropy.size() ? x.position_entropy[p] : kNaN);
        y.position_entropy[p] = nan_mean(v);
      }
      md.layers.push_back(y);
      md.cross_gtd.push_back(div(cross_gtd_[m][static_cast<size_t>(l)], cross_n_[m][static_cast<size_t>(l)]));
      md.cross_indirect_entropy.push_back(
          div(cross_ind_[m][static_cast<size_t>(l)], cross_n_[m][static_cast<size_t>(l)]));
    }
    if (L_ > 0)
      for (const auto& x : md.heads.back()) md.last_layer_head_entropy.push_back(x.entropy);
  }
  return r;
}

// ---- output --------------------------------------------------------------------------------------

namespace {

// NaN -> null in JSON (nlohmann writes non-finite numbers as null anyway; explicit here).
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json head_json(const HeadDiagnostics& d) {
  nlohmann::json pos = nlohmann::json::array();
  for (double x : d.position_entropy) pos.push_back(num(x));
  return {{"entropy", num(d.entropy)},
          {"gtd", num(d.gtd)},
          {"indirect_entropy", num(d.indirect_entropy)},
          {"sparsity", num(d.sparsity)},
          {"clustering", num(d.clustering)},
          {"clustering_nan_samples", d.clustering_nan_samples},
          {"clustering_undefined_nodes", d.clustering_undefined_nodes},
          {"betweenness", num(d.betweenness)},
          {"peaked_fraction", num(d.peaked_fraction)},
          {"sinky_rate", num(d.sinky_rate)},
          {"sink_value_norm", num(d.sink_value_norm)},
          {"other_value_norm", num(d.other_value_norm)},
          {"sink_tokens", d.sink_tokens},
          {"other_tokens", d.other_tokens},
          {"position_entropy", pos}};
}

nlohmann::json map_json(const MapDiagnostics& md) {
  nlohmann::json layers = nlohmann::json::array(), heads = nlohmann::json::array(),
                 cg = nlohmann::json::array(), ci = nlohmann::json::array(), last = nlohmann::json::array();
  for (const auto& y : md.layers) layers.push_back(head_json(y));
  for (const auto& hl : md.heads) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& d : hl) row.push_back(head_json(d));
    heads.push_back(row);
  }
  for (double x : md.cross_gtd) cg.push_back(num(x));
  for (double x : md.cross_indirect_entropy) ci.push_back(num(x));
  for (double x : md.last_layer_head_entropy) last.push_back(num(x));
  return {{"layers", layers},
          {"heads", heads},
          {"cross_layer", {{"gtd", cg}, {"indirect_entropy", ci}}},
          {"last_layer_head_entropy", last}};
}

std::string csv_num(double x) { return std::isfinite(x) ? fmt::format("{:.10g}", x) : std::string("nan"); }

constexpr const char* kMetricHeader =
    "entropy,gtd,indirect_entropy,sparsity,clustering,clustering_nan_samples,clustering_undefined_nodes,"
    "betweenness,peaked_fraction,sinky_rate,sink_value_norm,other_value_norm,sink_tokens,other_tokens";

std::string csv_metrics(const HeadDiagnostics& d) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_num(d.entropy), csv_num(d.gtd),
                     csv_num(d.indirect_entropy), csv_num(d.sparsity), csv_num(d.clustering),
                     d.clustering_nan_samples, d.clustering_undefined_nodes, csv_num(d.betweenness),
                     csv_num(d.peaked_fraction), csv_num(d.sinky_rate), csv_num(d.sink_value_norm),
                     csv_num(d.other_value_norm), d.sink_tokens, d.other_tokens);
}

const char* map_name(int m) { return m == 0 ? "A" : "B"; }

}  // namespace

nlohmann::json DiagnosticsReport::to_json() const {
  return {{"options", options.to_json()},
          {"samples", samples},
          {"empty_samples", empty_samples},
          {"layers", layers},
          {"heads", heads},
          {"has_values", has_values},
          {"position_count", position_count},
          {"attn", map_json(attn)},
          {"probs", map_json(probs)},
          {"skip_rate", skip_rate}};
}

std::string DiagnosticsReport::layers_csv() const {
  std::string s = fmt::format("map,layer,{},cross_gtd,cross_indirect_entropy\n", kMetricHeader);
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.layers.size(); ++l)
      s += fmt::format("{},{},{},{},{}\n", map_name(m), l, csv_metrics(md.layers[l]),
                       csv_num(md.cross_gtd[l]), csv_num(md.cross_indirect_entropy[l]));
  }
  return s;
}

std::string DiagnosticsReport::heads_csv() const {
  std::string s = fmt::format("map,layer,head,{}\n", kMetricHeader);
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.heads.size(); ++l)
      for (size_t h = 0; h < md.heads[l].size(); ++h)
        s += fmt::format("{},{},{},{}\n", map_name(m), l, h, csv_metrics(md.heads[l][h]));
  }
  return s;
}

std::string DiagnosticsReport::positions_csv() const {
  std::string s = "map,layer,head,position,entropy,samples\n";
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.heads.size(); ++l) {
      for (size_t h = 0; h < md.heads[l].size(); ++h)
        for (size_t p = 0; p < md.heads[l][h].position_entropy.size(); ++p)
          s += fmt::format("{},{},{},{},{},{}\n", map_name(m), l, h, p,
                           csv_num(md.heads[l][h].position_entropy[p]), position_count[p]);
      for (size_t p = 0; p < md.layers[l].position_entropy.size(); ++p)
        s += fmt::format("{},{},mean,{},{},{}\n", map_name(m), l, p,
                         csv_num(md.layers[l].position_entropy[p]), position_count[p]);
    }
  }
  return s;
}

}  // namespace saobp
