// `saobp report RUN_DIR...`: one self-contained HTML page (inline SVG, no external resource)
// comparing training runs: loss and learning-rate curves, the paper's Fig. 4 per-layer metrics
// at the end of training (A and B), the most positional head of each layer, for models with
// rotary positions the decay bound and the share of q and k per frequency pair, their trends over
// training, the last layer's head entropy, attention heatmaps of one validation sample (Fig. 6)
// and head-skip rates.
//
// A run directory holds metrics.jsonl (src/train/trainer.cpp) and the checkpoint final/; the
// end-of-training metrics come from final/analysis.json (or final/analysis/analysis.json, the
// default of `saobp analyze`) when one exists, else from analyze_checkpoint(final, {samples,
// graph_metrics = false}).
//
// Fine-tuning (`saobp finetune`) adds two sections when the runs have their parts: curves of the
// eval_metrics lines of metrics.jsonl (one chart per split and metric, epoch ends marked), and a
// results table from RUN_DIR/results.json (one row per run, one column per split and metric, the
// example and truncation counts). An argument may also be a results.json file or a folder holding
// only one (`saobp eval --task`): it gets a row of the table and nothing else. Runs without these
// parts render as before.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace saobp {

struct ReportOptions {
  std::vector<std::string> runs;  // run directories, results.json files or folders holding only one
  std::string out = "report.html";
  int64_t samples = 128;     // validation sequences averaged when analysis.json is absent
  int64_t sample_index = 0;  // the validation sample of the heatmaps
};

// The per-layer maps metrics of one attention map (A or B), read from DiagnosticsReport JSON.
struct LayerMetrics {
  std::vector<double> gtd, indirect_entropy, entropy;  // [L]
  std::vector<double> last_layer_head_entropy;         // [NH]
  // The most positional head of each layer: the largest diagonal and previous-token scores over
  // its heads (NaN where the JSON has none).
  std::vector<double> max_diagonal, max_previous;  // [L]
};

// The "rope" section of a DiagnosticsReport JSON (a model with rotary positions).
struct RopeMetrics {
  double base = 0;
  int64_t seq_len = 0;
  std::vector<double> wavelength;  // [P]
  std::vector<std::vector<double>>
      energy;                      // [L][P]: Σ_h q_norm k_norm of each pair, as a share of the layer's sum
  std::vector<double> slow_share;  // [L]
  std::vector<double> distance, bound;  // the decay bound, relative to distance 0
};
// nullopt without "rope"; throws naming `source` and the key when it is there but malformed.
std::optional<RopeMetrics> rope_metrics_from_json(const nlohmann::json& j, const std::string& source);

// Reads the "attn" ("A") or "probs" ("B") map of a DiagnosticsReport::to_json object; `j` may
// also be a wrapper holding it under "report" (analysis.json). Throws naming `source`.
LayerMetrics layer_metrics_from_json(const nlohmann::json& j, const std::string& map,
                                     const std::string& source);

// The page as a string (nothing written). Throws saobp::Error("[report] ...") naming the run
// directory when its metrics.jsonl or final checkpoint is missing, or the results.json that is
// not JSON or has no "metrics" object.
std::string build_report(const ReportOptions& opt);

// build_report, written atomically to opt.out.
void write_report(const ReportOptions& opt);

}  // namespace saobp
