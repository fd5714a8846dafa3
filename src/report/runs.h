// The inputs of `saobp report`, read: a run directory's metrics.jsonl (every logged step and
// evaluation), its final checkpoint's per-layer metrics (final/analysis.json, or computed by
// analyze_checkpoint) and heatmap sample, and the results.json files of fine-tuning runs and
// `saobp eval --task`. Internal to src/report/ (report.h is the public surface).
#pragma once
#include <cstddef>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "report/report.h"
#include "train/analysis.h"
#include "train/config.h"

namespace saobp::report {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// j[key] as a number, NaN when absent or not a number.
double number(const nlohmann::json& j, const char* key);
// j[key] as numbers (non-numbers NaN), empty when absent or not an array.
std::vector<double> numbers(const nlohmann::json& j, const char* key);

// Per-layer series over the eval (or log) lines: [layer][line]; a line without the layer is NaN.
using LayerSeries = std::vector<std::vector<double>>;

using MetricKey = std::pair<std::string, std::string>;  // (split, metric)

// The (split, metric) numbers of an {"<split>": {"<metric>": value, ...}, ...} object, without
// the bookkeeping numbers beside them (counts, sizes, speeds).
std::vector<std::pair<MetricKey, double>> split_metrics(const nlohmann::json& j);

struct Metrics {
  std::vector<double> step, loss, lr;                       // every logged step
  std::vector<double> eval_step, eval_loss, eval_accuracy;  // every evaluation
  std::vector<double> eval_epoch;                           // the epoch an evaluation ends, else NaN
  std::map<MetricKey, std::vector<double>> eval_metrics;    // fine-tuning: per evaluation, NaN if absent
  LayerSeries eval_gtd, eval_entropy, eval_gtd_softmax, eval_entropy_softmax;
  std::vector<double> skip_step;
  LayerSeries skip_rate;
};

// metrics.jsonl; a line that is not a JSON object is an error naming the file and line.
Metrics read_metrics(const std::string& path);

// A results.json of `saobp finetune` (in its run directory) or `saobp eval --task`.
struct Result {
  std::string name, color, path;  // color: the run's, "" for an evaluation without a run
  nlohmann::json j;
};

// A results.json; not JSON or without a "metrics" object is an error naming the file.
nlohmann::json read_results(const std::string& path);

struct Run {
  std::string dir, name, variant, label, color;
  RunConfig cfg;
  double lambda = kNaN;
  Metrics metrics;
  LayerMetrics a, b;
  std::optional<RopeMetrics> rope;  // a model with rotary positions
  bool identical = false;           // A == B (attention "original")
  std::string analysis_from;        // where a/b came from
  Inspection sample;
  std::string results_path;  // RUN_DIR/results.json of a fine-tuning run, "" when absent
};

// The last component of a directory path ("runs/a/" -> "a").
std::string base_name(const std::string& dir);

// Run `index` of the report (its colour is the palette's index-th); errors name the directory.
Run load_run(const std::string& dir, size_t index, const ReportOptions& opt);

}  // namespace saobp::report
