#include "report/report.h"

#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "report/runs.h"
#include "report/sections.h"
#include "report/svg.h"

namespace saobp {

namespace fs = std::filesystem;
using namespace report;

LayerMetrics layer_metrics_from_json(const nlohmann::json& j, const std::string& map,
                                     const std::string& source) {
  const nlohmann::json* r = &j;
  if (!r->contains(map) && r->contains("report")) r = &(*r)["report"];
  if (!r->is_object() || !r->contains(map) || !(*r)[map].is_object() || !(*r)[map].contains("layers"))
    fail("report", "{}: no \"{}\" map with \"layers\" (expected DiagnosticsReport JSON from `saobp analyze`)",
         source, map);
  const nlohmann::json& m = (*r)[map];
  LayerMetrics out;
  for (const auto& layer : m["layers"]) {
    out.gtd.push_back(number(layer, "gtd"));
    out.indirect_entropy.push_back(number(layer, "indirect_entropy"));
    out.entropy.push_back(number(layer, "entropy"));
  }
  out.last_layer_head_entropy = numbers(m, "last_layer_head_entropy");
  return out;
}

std::string build_report(const ReportOptions& opt) {
  if (opt.runs.empty()) fail("report", "no run directory given");
  if (opt.samples < 1) fail("report", "--samples must be >= 1, got {}", opt.samples);
  if (opt.sample_index < 0) fail("report", "--sample-index must be >= 0, got {}", opt.sample_index);
  // An argument is a run directory (metrics.jsonl and final/, a results.json beside them when
  // fine-tuned), a results.json file, or a folder holding a results.json only (`saobp eval --task`).
  std::vector<Run> runs;
  std::vector<Result> results;
  std::vector<Correlation> correlation_files, cost_files;
  size_t evaluations = 0;
  for (const std::string& arg : opt.runs) {
    const fs::path p(arg);
    std::string file;
    if (fs::is_regular_file(p))
      file = arg;
    else if (fs::is_directory(p) && !fs::exists(p / "metrics.jsonl") &&
             fs::is_regular_file(p / "results.json"))
      file = (p / "results.json").string();
    if (fs::is_regular_file(p)) {
      // `saobp correlate --out` and `saobp cost --out` files are drawn in sections of their own.
      nlohmann::json j;
      try {
        j = read_json_file(file, "report");
      } catch (const nlohmann::json::exception&) {
        j = nullptr;  // read_results names the file and the parse error
      }
      if (j.is_object() && j.contains("cost_table")) {
        // What sections.cpp draws: a row per variant, each named by its attention.
        const nlohmann::json& t = j["cost_table"];
        const auto variants = t.is_object() ? t.find("variants") : t.end();
        if (!t.is_object() || variants == t.end() || !variants->is_array() || variants->empty())
          fail("report",
               "{}: cost_table holds no \"variants\" (a saobp cost --out file has one row per attention)",
               file);
        for (size_t i = 0; i < variants->size(); ++i) {
          const nlohmann::json& v = (*variants)[i];
          if (!v.is_object() || !v.contains("attention") || !v["attention"].is_string())
            fail("report", "{}: cost_table.variants[{}] is {}, not a row with an \"attention\" name", file, i,
                 json_excerpt(v));
        }
        cost_files.push_back({file, j});
        continue;
      }
      if (j.is_object() && j.contains("points") && j.contains("pearson_r")) {
        // What sections.cpp draws: a point {"x", "y"} per element of "points", the labels strings.
        const JsonFields c(j, file, "report");
        for (const char* label : {"x", "y", "over"}) (void)c.string(label, "");
        (void)c.integer("left_out", 0);
        const nlohmann::json& points = *c.find("points");
        if (!points.is_array()) c.type_error("points", "an array of points", points);
        for (size_t i = 0; i < points.size(); ++i) {
          const JsonFields pt(points[i], fmt::format("{}: points[{}]", file, i), "report");
          (void)pt.number("x"), (void)pt.number("y");
        }
        correlation_files.push_back({file, j});
        continue;
      }
    }
    if (!file.empty()) {
      const fs::path folder = fs::absolute(file).parent_path();
      results.push_back({base_name(folder.string()), "", file, read_results(file)});
      ++evaluations;
      continue;
    }
    runs.push_back(load_run(arg, runs.size(), opt));
    const Run& r = runs.back();
    if (!r.results_path.empty())
      results.push_back({r.name, r.color, r.results_path, read_results(r.results_path)});
  }

  Page p;
  header(p, runs, evaluations, opt);
  results_table(p, results);
  correlations(p, correlation_files);
  cost_tables(p, cost_files);
  if (!runs.empty()) {
    training_curves(p, runs);
    finetune_curves(p, runs);
    layer_figures(p, runs);
    head_entropy(p, runs);
    trends(p, runs);
    heatmaps(p, runs, opt);
    skip_rates(p, runs);
  }

  std::string names;
  for (const Run& r : runs) names += (names.empty() ? "" : ", ") + r.label;
  for (const Result& r : results)
    if (r.color.empty()) names += (names.empty() ? "" : ", ") + r.name;
  std::string ids;
  for (const std::string& id : p.figures) ids += (ids.empty() ? "" : " ") + id;
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>saobp report: "
      "{}</title>\n{}</head>\n<body data-figures=\"{}\">\n{}{}</body>\n</html>\n",
      svg::escape(names), kStyle, svg::escape(ids), p.html, kCheckScript);
}

void write_report(const ReportOptions& opt) { write_file_atomic(opt.out, build_report(opt)); }

}  // namespace saobp
