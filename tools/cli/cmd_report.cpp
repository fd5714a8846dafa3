// `saobp report RUN_DIR [RUN_DIR ...] [--out FILE] [--samples N] [--sample-index I]`: one
// self-contained HTML page (inline SVG) comparing training runs (src/report/report.h).
#include <fmt/format.h>

#include "cli/commands.h"
#include "report/report.h"
#include "train/checkpoint.h"

namespace saobp::cli {

void register_report(CLI::App& app) {
  static ReportOptions o;
  CLI::App* sub = app.add_subcommand(
      "report",
      "Write one self-contained HTML report (inline SVG) comparing run directories: curves, Fig. 4 "
      "metrics, heatmaps");
  sub->add_option("runs", o.runs,
                  "run directories (metrics.jsonl, final/), results.json files or eval folders")
      ->required();
  sub->add_option("--out", o.out, "the HTML file to write")->capture_default_str()->check(non_empty_path());
  sub->add_option("--samples", o.samples,
                  "validation samples averaged for the per-layer metrics (without final/analysis.json)")
      ->capture_default_str();
  sub->add_option("--sample-index", o.sample_index, "the validation sample drawn in the heatmaps")
      ->capture_default_str();
  add_command(sub, [] {
    refuse_output_over_inputs(o.out, "--out", o.runs);
    write_report(o);
    fmt::print("wrote {} ({} run(s))\n", o.out, o.runs.size());
    return 0;
  });
}

}  // namespace saobp::cli
