// DiagnosticsOptions and DiagnosticsAccumulator of src/attention/diagnostics.h: every
// (sample, layer, map, head) of a batch's attention maps through the primitives
// (primitives.cpp), summed into per-layer and per-head means that report() hands out.
// Eigen's double GEMM is instantiated here too: see primitives.cpp for this pragma.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "attention/diagnostics.h"
#include "core/error.h"

namespace saobp {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

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
  if (layer_group < 1) fail(op, "layer_group must be >= 1, got {}", layer_group);
}

nlohmann::json DiagnosticsOptions::to_json() const {
  return {{"beta", beta},
          {"K", K},
          {"sparsity_threshold", sparsity_threshold},
          {"graph_tau", graph_tau},
          {"graph_nodes", graph_nodes},
          {"peak_tau", peak_tau},
          {"sinky_fraction", sinky_fraction},
          {"layer_group", layer_group},
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
  PositionalScores positional;
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
    r.positional = positional_scores(a);
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
  const int64_t first_sample = samples_ + empty_samples_;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = static_cast<int64_t>(idx[static_cast<size_t>(b)].size());
    if (n == 0) {
      ++empty_samples_;
      continue;
    }
    ++samples_;
    if (o.per_sample)
      for (int64_t l = 0; l < L; ++l)
        for (int m = 0; m < 2; ++m)
          for (int64_t h = 0; h < NH; ++h) {
            const ItemOut& r = out[static_cast<size_t>(((b * L + l) * 2 + m) * NH + h)];
            per_sample_.push_back({first_sample + b, l, h, n, m, r.entropy, r.gtd, r.cc, r.bc});
          }
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
          s.diagonal += r.positional.diagonal;
          if (std::isfinite(r.positional.previous)) {
            s.previous += r.positional.previous;
            ++s.previous_n;
          }
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
          (r.sinky ? s.sinky_head_norm : s.other_head_norm) += r.sink_norm + r.other_norm;
          (r.sinky ? s.sinky_head_n : s.other_head_n) += r.sink_n + r.other_n;
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
  r.per_sample = per_sample_;
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
        d.diagonal = div(s.diagonal, samples_);
        d.previous = div(s.previous, s.previous_n);
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
        d.sinky_head_value_norm = div(s.sinky_head_norm, s.sinky_head_n);
        d.other_head_value_norm = div(s.other_head_norm, s.other_head_n);
        d.sinky_head_tokens = s.sinky_head_n;
        d.other_head_tokens = s.other_head_n;
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
      y.diagonal = field(&HeadDiagnostics::diagonal);
      y.previous = field(&HeadDiagnostics::previous);
      y.clustering = field(&HeadDiagnostics::clustering);
      y.betweenness = field(&HeadDiagnostics::betweenness);
      y.peaked_fraction = field(&HeadDiagnostics::peaked_fraction);
      y.sinky_rate = field(&HeadDiagnostics::sinky_rate);
      y.sink_value_norm = field(&HeadDiagnostics::sink_value_norm);
      y.other_value_norm = field(&HeadDiagnostics::other_value_norm);
      y.sinky_head_value_norm = field(&HeadDiagnostics::sinky_head_value_norm);
      y.other_head_value_norm = field(&HeadDiagnostics::other_head_value_norm);
      for (const auto& x : hs) {
        y.sinky_head_tokens += x.sinky_head_tokens;
        y.other_head_tokens += x.other_head_tokens;
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

// ---- sink statistics per layer group ---------------------------------------------------------

std::vector<SinkGroup> sink_groups(const MapDiagnostics& md, const std::vector<double>& skip_rate,
                                   int64_t group) {
  if (group < 1) fail("diagnostics", "layer_group must be >= 1, got {}", group);
  const auto L = static_cast<int64_t>(md.heads.size());
  if (!skip_rate.empty() && static_cast<int64_t>(skip_rate.size()) != L)
    fail("diagnostics", "skip_rate has {} layers, the maps {}", skip_rate.size(), L);
  // A norm pooled by token from the heads' means and counts: Σ mean·n / Σ n.
  struct Pool {
    double sum = 0;
    int64_t n = 0;
    void add(double mean, int64_t k) {
      if (k > 0) sum += mean * static_cast<double>(k), n += k;
    }
    double value() const { return n > 0 ? sum / static_cast<double>(n) : kNaN; }
  };
  const auto make = [&](int64_t first, int64_t last) {
    SinkGroup g;
    g.first_layer = first, g.last_layer = last;
    Pool sink, other, sinky_head, other_head;
    double sinky = 0, skip = 0;
    int64_t heads = 0;
    for (int64_t l = first; l <= last; ++l) {
      for (const HeadDiagnostics& d : md.heads[static_cast<size_t>(l)]) {
        sinky += d.sinky_rate, ++heads;
        sink.add(d.sink_value_norm, d.sink_tokens), other.add(d.other_value_norm, d.other_tokens);
        sinky_head.add(d.sinky_head_value_norm, d.sinky_head_tokens);
        other_head.add(d.other_head_value_norm, d.other_head_tokens);
      }
      if (!skip_rate.empty()) skip += skip_rate[static_cast<size_t>(l)];
    }
    g.sinky_share = heads > 0 ? sinky / static_cast<double>(heads) : kNaN;
    if (!skip_rate.empty()) g.skip_share = skip / static_cast<double>(last - first + 1);
    g.sink_value_norm = sink.value(), g.other_value_norm = other.value();
    g.value_norm_delta = g.sink_value_norm - g.other_value_norm;
    g.sink_tokens = sink.n, g.other_tokens = other.n;
    g.sinky_head_value_norm = sinky_head.value(), g.other_head_value_norm = other_head.value();
    g.sinky_head_tokens = sinky_head.n, g.other_head_tokens = other_head.n;
    return g;
  };
  std::vector<SinkGroup> out;
  for (int64_t first = 0; first < L; first += group)
    out.push_back(make(first, std::min(first + group, L) - 1));
  if (L > 0) out.push_back(make(0, L - 1));
  return out;
}

}  // namespace saobp
