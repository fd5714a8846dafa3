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
// Points where either value is missing or not finite are left out (and counted).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace saobp::study {

// {"x", "y", "over": "runs" | "checkpoints" | "runs and checkpoints", "points": [{"source",
// "label", "x", "y"}], "left_out", "n", "pearson_r", "pearson_p", "spearman_rho", "slope",
// "intercept"}. Throws naming the folder when it is neither kind, and when fewer than 2 points
// remain.
nlohmann::json correlate_sources(const std::vector<std::string>& sources, const std::string& x,
                                 const std::string& y);

}  // namespace saobp::study
