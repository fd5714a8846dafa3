// Correlation of one metric with another over checkpoints or runs (as the paper's Figs. 3 and 9
// correlate GTD with task performance over checkpoints, and its Table 6 single-layer and
// cross-layer GTD with it): Pearson r with its two-sided p-value, Spearman's rho and the
// least-squares line (core/stats.h), with every point for a plot.
//
// Sources, each a folder:
//   a study folder (study.json): one point per pretraining run of the study. A metric name
//     "NAME" is the run's own final metric ("entropy_L1", "loss"); "TASK:NAME" is the metric of
//     the fine-tuning run of TASK started from that run ("glue/sst2:dev.accuracy").
//   a run folder (metrics.jsonl): one point per evaluation line (per checkpoint), metrics named
//     as in the study table ("entropy_L1", "gtd_L0", "cross_gtd_L1", "accuracy", "dev.accuracy").
//   an analysis folder (per_sample.csv of `saobp analyze --per-sample`): one point per (sample,
//     layer, head), as the paper's Fig. 2 plots GTD against CC and BC; a metric is a column
//     ("gtd", "entropy", "clustering", "betweenness", "tokens") of the refined map B, or of A with
//     the prefix "A." ("A.gtd"; "B.gtd" is "gtd"). The graph's τ and node count are analyze's
//     --graph-tau and --graph-nodes.
// Points where either value is missing or not finite are left out (and counted).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace saobp::study {

struct CorrelateOptions {
  std::vector<int64_t> layers;  // analysis folders: only these layers' rows (empty: every layer)
  int64_t from_step = 0;        // run folders: only the evaluations at this step or later
};

// {"x", "y", "over": "runs", "checkpoints", "(sample, layer, head) rows" or several of them
// joined by " and ", "points": [{"source", "label", "x", "y"}], "left_out", "n", "pearson_r",
// "pearson_p", "spearman_rho", "slope", "intercept"} (analysis folders add "graph": each one's τ
// and node count). Throws naming the folder when it is none of the kinds, the file and line of a
// malformed per_sample.csv, a metric that has a value in none of the study and run folders (listing
// those that have), and when fewer than 2 points remain.
nlohmann::json correlate_sources(const std::vector<std::string>& sources, const std::string& x,
                                 const std::string& y, const CorrelateOptions& opt = {});

}  // namespace saobp::study
