// The sections of the `saobp report` page, each appended to a Page in the order the page shows
// them; a section without data is left out. Internal to src/report/.
#pragma once
#include <string>
#include <vector>

#include "report/runs.h"

namespace saobp::report {

struct Page {
  std::string html;
  std::vector<std::string> figures;  // every chart id, checked by the inline script
  int sections = 0;                  // numbered in order: a section without data is left out
  void section(const char* id, const std::string& title);
  void add(const std::string& id, const std::string& svg);
  void caption(const std::string& text);
};

// The title, the generation time and a table of the runs (family, size, variant, losses).
void header(Page& p, const std::vector<Run>& runs, size_t evaluations, const ReportOptions& opt);
// One row per results.json, one column per (split, metric) of its final "metrics".
void results_table(Page& p, const std::vector<Result>& results);
// Loss and learning rate over the steps.
void training_curves(Page& p, const std::vector<Run>& runs);
// Fine-tuning: one chart per (split, metric) over the evaluations, epoch ends marked.
void finetune_curves(Page& p, const std::vector<Run>& runs);
// The paper's Fig. 4: GTD, indirect entropy and entropy per layer at the end of training (A and B).
void layer_figures(Page& p, const std::vector<Run>& runs);
// The most positional head of each layer (diagonal and previous-token scores of B).
void positional_heads(Page& p, const std::vector<Run>& runs);
// Runs with rotary positions: the decay bound against distance and where q and k put their norm
// among the pairs (nothing without such a run).
void rope_figures(Page& p, const std::vector<Run>& runs);
// The last layer's entropy per head.
void head_entropy(Page& p, const std::vector<Run>& runs);
// The per-layer metrics of the held-out probe over training.
void trends(Page& p, const std::vector<Run>& runs);
// Attention heatmaps of one validation sample (Fig. 6).
void heatmaps(Page& p, const std::vector<Run>& runs, const ReportOptions& opt);
// A JSON input of the report that is not a run's results: a `saobp correlate --out` file or a
// `saobp cost --out` file.
struct Correlation {
  std::string path;
  nlohmann::json j;
};
// One scatter per correlation file: the points, the least-squares line, r, p and rho.
void correlations(Page& p, const std::vector<Correlation>& cs);
// The cost table of each `saobp cost --out` file.
void cost_tables(Page& p, const std::vector<Correlation>& costs);
// Head-skip rates per layer over training.
void skip_rates(Page& p, const std::vector<Run>& runs);

// The page's <style> and the inline script the headless-browser test reads.
extern const char* const kStyle;
extern const char* const kCheckScript;

}  // namespace saobp::report
