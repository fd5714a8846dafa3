// Attention diagnostics of the paper (sections 5 and 7, appendices B, E, F) and of the head-skip
// seed (sink indicator), computed per layer and head on A (softmax) and on B (refined).
// docs/diagnostics.md gives every definition with its equation and the choices made where the
// paper is silent.
//
// Two levels:
//   * single-matrix primitives on a row-major (n x n) double matrix: the n real tokens of one
//     sample, one head (padding already removed). Unit-tested against hand-computed values.
//   * DiagnosticsAccumulator: feed batches of AttentionMaps (every layer) + key_mask (+ values),
//     get per-layer / per-head averages over all samples fed, as JSON or CSV.
//
// Padding: a sample's (T x T) map is restricted to the (n x n) submatrix of its n token rows and
// columns (key_mask == 1), in order. Rows are NOT renormalized (the paper does not; the attention
// op already gives zero mass to padding keys, so rows of the submatrix sum to 1).
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/metrics.h"
#include "attention/rope_analysis.h"
#include "tensor/tensor.h"

namespace saobp {

// One attention matrix of one sample and head: row i = query i, column j = key j.
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ---- single-matrix primitives (a: (n,n), n >= 1) ----------------------------------------------

// Eq. 2 per row (row_entropy, metrics.h): (n) values.
std::vector<double> row_entropies(const RowMatrix& a);
// Eq. 2: H(A) = (1/n) Σ_i H(A_i).
double attention_entropy(const RowMatrix& a);

// Eq. 12: G = Σ_{t=2}^{K} β^{t-1} A^t, evaluated as A² Σ_{t=0}^{K-2} β^{t+1} A^t (Eigen
// products; 2 of them for K = 4). K >= 2.
RowMatrix gtd_global(const RowMatrix& a, double beta = 0.9, int K = 4);
// Eq. 13 from A and its G: |G|_F² / (|A|_F² + |G|_F²); NaN when both norms are 0.
double gtd_from(const RowMatrix& a, const RowMatrix& g);
// Eq. 14 from G: H_ind = -(1/n) Σ_i Σ_j G~_ij log G~_ij with G~_ij = G_ij / Σ_k G_ik; a row of G
// with sum <= 0 (impossible for a stochastic A) contributes 0.
double indirect_entropy_from(const RowMatrix& g);

struct GtdResult {
  double gtd = 0;               // eq. 13
  double indirect_entropy = 0;  // eq. 14
};
GtdResult gtd_metrics(const RowMatrix& a, double beta = 0.9, int K = 4);
double gtd(const RowMatrix& a, double beta = 0.9, int K = 4);
double indirect_entropy(const RowMatrix& a, double beta = 0.9, int K = 4);

// Cross-layer matrix (appendix B, Table 6): P = M_{L-1} ··· M_1 M_0, the product of the
// layers' head-averaged attention matrices, the first layer rightmost (token i of the last
// layer reads the input tokens through every layer). `head_means` in layer order; all (n,n).
RowMatrix cross_layer_product(const std::vector<RowMatrix>& head_means);

// Appendix E: fraction of the valid entries with A_ij < threshold. causal: only the n(n+1)/2
// entries j <= i are valid (the structurally-zero upper triangle is excluded).
double sparsity(const RowMatrix& a, double threshold = 1e-3, bool causal = false);

// Fig. 2 attention graph: the first min(nodes, n) tokens; undirected edge {i,j} (i != j) iff
// max(A_ij, A_ji) >= tau, weight w_ij = (A_ij + A_ji) / 2; no self-loops. Returns the
// symmetric weight matrix (m,m), 0 = no edge.
RowMatrix attention_graph(const RowMatrix& a, double tau = 1e-4, int64_t nodes = 40);

// Barrat et al. 2004 weighted clustering on an undirected weighted graph (w symmetric, w_ij > 0
// = edge, diagonal ignored):
//   c_i = 1 / (s_i (k_i - 1)) Σ_{j != h} (w_ij + w_ih)/2 a_ij a_ih a_jh   (ordered pairs)
// c_i is NaN for k_i < 2 (undefined). mean: over nodes with c_i defined, NaN if none.
struct ClusteringResult {
  std::vector<double> per_node;
  double mean = std::numeric_limits<double>::quiet_NaN();
  int64_t undefined_nodes = 0;  // nodes with degree < 2
};
ClusteringResult barrat_clustering(const RowMatrix& w);

// Brandes 2001 betweenness, unweighted (edge iff w_ij > 0; hop distances), undirected,
// unnormalized, each unordered pair {s,t} counted once (networkx normalized=False):
//   BC(v) = Σ_{s<t, s,t != v} σ_st(v) / σ_st.  Zero for every node of a complete graph.
std::vector<double> brandes_betweenness(const RowMatrix& w);

// The head-skip note's sink indicator (docs/references.md) on one matrix: a row is peaked when
// max_j A_ij > peak_tau; the head is sinky when (# peaked rows) / n > sinky_fraction.
// sink_tokens: the distinct argmax columns of the peaked rows (first maximum on ties), ascending.
struct SinkResult {
  double peaked_fraction = 0;
  bool sinky = false;
  std::vector<int64_t> sink_tokens;
};
SinkResult sink_indicator(const RowMatrix& a, double peak_tau = 0.95, double sinky_fraction = 0.8);
// Positional heads (the connection-bottleneck slides): the mean attention of a row to its own
// token, (1/n) Σ_i a_ii, and to the token before it, (1/(n-1)) Σ_{i>=1} a_{i,i-1} (NaN for n = 1).
// A head whose mean over samples exceeds 1/2 is a diagonal or previous-token head.
struct PositionalScores {
  double diagonal = 0, previous = 0;
};
PositionalScores positional_scores(const RowMatrix& a);

// ---- batched accumulation ---------------------------------------------------------------------

struct DiagnosticsOptions {
  double beta = 0.9;  // GTD discount, eq. 12
  int K = 4;          // GTD longest path, eq. 12
  double sparsity_threshold = 1e-3;
  double graph_tau = 1e-4;
  int graph_nodes = 40;
  double peak_tau = 0.95;
  double sinky_fraction = 0.8;
  // Consecutive layers per group of the sink statistics (sink_groups): 4, as the head-skip note
  // groups GPT-2 medium's 24 layers (0-3, 4-7, ..., 20-23); the last group may be shorter.
  int layer_group = 4;
  bool causal = false;        // decoder maps: sparsity ignores the upper triangle
  bool graph_metrics = true;  // CC and BC (the costliest part after GTD)
  bool per_sample = false;    // keep every (sample, layer, map, head)'s values (per_sample_csv)
  void validate() const;      // throws naming the offending field
  nlohmann::json to_json() const;
};

// One (layer, head) of one map, averaged over the samples fed (a NaN metric of a sample is left
// out of that metric's mean and counted instead).
struct HeadDiagnostics {
  double entropy = 0;                                             // eq. 2
  double gtd = 0;                                                 // eq. 13
  double indirect_entropy = 0;                                    // eq. 14
  double sparsity = 0;                                            // appendix E
  double clustering = std::numeric_limits<double>::quiet_NaN();   // Barrat, mean over samples
  double betweenness = std::numeric_limits<double>::quiet_NaN();  // node-mean BC, mean over samples
  int64_t clustering_nan_samples = 0;      // samples whose graph has no node of degree >= 2
  int64_t clustering_undefined_nodes = 0;  // degree < 2 nodes, summed over samples
  double peaked_fraction = 0;              // the head-skip note, mean over samples
  double sinky_rate = 0;                   // fraction of samples for which the head is sinky
  double sink_value_norm = std::numeric_limits<double>::quiet_NaN();   // mean |v_j| over sink tokens
  double other_value_norm = std::numeric_limits<double>::quiet_NaN();  // mean |v_j| over the others
  int64_t sink_tokens = 0, other_tokens = 0;                           // token counts behind the two norms
  // Mean |v_j| over every token of the samples in which the head is sinky / is not, and the
  // token counts behind them (the value norms of sink heads vs the other heads).
  double sinky_head_value_norm = std::numeric_limits<double>::quiet_NaN();
  double other_head_value_norm = std::numeric_limits<double>::quiet_NaN();
  int64_t sinky_head_tokens = 0, other_head_tokens = 0;
  double diagonal = 0;                                         // positional_scores, mean over samples
  double previous = std::numeric_limits<double>::quiet_NaN();  // over samples with n >= 2
  std::vector<double> position_entropy;                        // eq. 2 of row p, mean over samples with n > p
};

// A or B over all layers.
struct MapDiagnostics {
  std::vector<std::vector<HeadDiagnostics>> heads;  // [L][NH]
  std::vector<HeadDiagnostics> layers;              // [L]: head means (NaN-skipping; counts summed)
  std::vector<double> cross_gtd;                    // [L]: GTD of M_l ··· M_0, mean over samples
  std::vector<double> cross_indirect_entropy;       // [L]: eq. 14 of the same product
  // Fig. 4 column 4: entropy of each head of the last layer (== heads.back()[h].entropy).
  std::vector<double> last_layer_head_entropy;
};

// The head-skip note's table of sink statistics, for one group of consecutive layers of one map:
//   sinky_share  the share of (sample, layer, head) triples whose head is sinky: the mean of the
//                group's heads' sinky_rate (every head sees the same samples);
//   skip_share   the share of (sample, layer, head) triples the model's head skip dropped: the
//                mean of skip_rate over the group's layers (NaN when the model skips no head);
//   sink_value_norm / other_value_norm: mean |v_j| over the sink tokens / the other tokens of
//                every (sample, layer, head) of the group, pooled by token (the note's "sink
//                tokens" vs "random tokens" rows), value_norm_delta = sink - other (its Δ_v);
//   sinky_head_value_norm / other_head_value_norm: mean |v_j| over every token of the (sample,
//                head) pairs that are sinky / are not, pooled by token.
// Norms are NaN without values or without a token of their kind.
struct SinkGroup {
  int64_t first_layer = 0, last_layer = 0;  // inclusive
  double sinky_share = 0;
  double skip_share = std::numeric_limits<double>::quiet_NaN();
  double sink_value_norm = std::numeric_limits<double>::quiet_NaN();
  double other_value_norm = std::numeric_limits<double>::quiet_NaN();
  double value_norm_delta = std::numeric_limits<double>::quiet_NaN();
  int64_t sink_tokens = 0, other_tokens = 0;
  double sinky_head_value_norm = std::numeric_limits<double>::quiet_NaN();
  double other_head_value_norm = std::numeric_limits<double>::quiet_NaN();
  int64_t sinky_head_tokens = 0, other_head_tokens = 0;
};
// The groups of `group` consecutive layers of md (layer 0 first), the whole model last (first
// 0, last L - 1). skip_rate: per layer (DiagnosticsReport::skip_rate), or empty.
std::vector<SinkGroup> sink_groups(const MapDiagnostics& md, const std::vector<double>& skip_rate,
                                   int64_t group);

// One (sample, layer, map, head) of the samples fed (analyze --per-sample, the scatter of the
// paper's Fig. 2). sample: the index among all samples fed, in order (a sample with no token has
// no rows); tokens: its real tokens n; clustering and betweenness NaN without graph_metrics.
struct SampleDiagnostics {
  int64_t sample = 0, layer = 0, head = 0, tokens = 0;
  int map = 0;  // 0 = A (softmax), 1 = B (refined)
  double entropy = 0, gtd = 0, clustering = 0, betweenness = 0;
};

struct DiagnosticsReport {
  DiagnosticsOptions options;
  int64_t samples = 0;        // samples averaged (those with at least one token)
  int64_t empty_samples = 0;  // samples with no token, skipped
  int64_t layers = 0, heads = 0;
  std::vector<int64_t> position_count;  // samples with a token at position p
  bool has_values = false;
  MapDiagnostics attn;   // A
  MapDiagnostics probs;  // B
  // Per layer, the fraction of (sample, head) pairs the model's head skip dropped (empty when
  // the model does not skip heads). Filled by the caller that ran the model (analyze).
  std::vector<double> skip_rate;
  // A model with rotary positions: its frequency bands and decay bound (filled by analyze).
  std::optional<RopeReport> rope;
  // The inputs measured, when they are not the checkpoint's own held-out stream (analyze --data
  // TASK:DIR: the benchmark, split, rows); null otherwise.
  nlohmann::json data;
  // Every (sample, layer, map, head) in sample order, then layer, map, head (options.per_sample).
  std::vector<SampleDiagnostics> per_sample;

  nlohmann::json to_json() const;
  // One row per (map, layer): map,layer,<metrics>,cross_gtd,cross_indirect_entropy.
  std::string layers_csv() const;
  // One row per (map, layer, head).
  std::string heads_csv() const;
  // One row per (map, layer, head, position); head "mean" = the layer's head mean.
  std::string positions_csv() const;
  // One row per entry of per_sample: sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness.
  std::string per_sample_csv() const;
};

class DiagnosticsAccumulator {
 public:
  explicit DiagnosticsAccumulator(DiagnosticsOptions options = {});
  // layers: the maps of every layer, each attn/probs (B,NH,T,T) (probs undefined = attn);
  // key_mask: (B,T) u8 (1 = token) or undefined; values: per layer (B,NH,T,HS), or null.
  // Samples are processed in parallel (OpenMP) and reduced in sample order: the result does
  // not depend on the thread count.
  void add(const std::vector<AttentionMaps>& layers, const Tensor& key_mask = Tensor(),
           const std::vector<Tensor>* values = nullptr);
  DiagnosticsReport report() const;
  int64_t samples() const { return samples_; }

  // Sums of one (map, layer, head) over samples. Internal, public for the report builder.
  struct Sums {
    double entropy = 0, gtd = 0, indirect_entropy = 0, sparsity = 0, peaked = 0, sinky = 0;
    double clustering = 0, betweenness = 0;
    int64_t clustering_n = 0, clustering_nan = 0, clustering_undefined_nodes = 0, betweenness_n = 0;
    int64_t gtd_n = 0;
    double sink_norm = 0, other_norm = 0;
    int64_t sink_n = 0, other_n = 0;
    double sinky_head_norm = 0, other_head_norm = 0;
    int64_t sinky_head_n = 0, other_head_n = 0;
    double diagonal = 0, previous = 0;
    int64_t previous_n = 0;
    std::vector<double> position_entropy;
  };

 private:
  DiagnosticsOptions opt_;
  int64_t L_ = 0, NH_ = 0;
  int64_t samples_ = 0, empty_samples_ = 0;
  std::vector<SampleDiagnostics> per_sample_;  // opt_.per_sample
  bool has_values_ = false;
  std::vector<int64_t> position_count_;
  std::vector<Sums> sums_[2];                        // [map][l * NH + h]
  std::vector<double> cross_gtd_[2], cross_ind_[2];  // [map][l]
  std::vector<int64_t> cross_n_[2];
};

}  // namespace saobp
