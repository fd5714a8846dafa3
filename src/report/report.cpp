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
  if (const auto it = m.find("heads"); it != m.end() && it->is_array())
    for (const auto& layer : *it) {
      double diagonal = kNaN, previous = kNaN;
      if (layer.is_array())
        for (const auto& head : layer)
          if (head.is_object()) {
            diagonal = std::fmax(diagonal, number(head, "diagonal"));  // fmax skips a NaN side
            previous = std::fmax(previous, number(head, "previous"));
          }
      out.max_diagonal.push_back(diagonal);
      out.max_previous.push_back(previous);
    }
  return out;
}

std::optional<RopeMetrics> rope_metrics_from_json(const nlohmann::json& j, const std::string& source) {
  const nlohmann::json* r = &j;
  if (!r->contains("rope") && r->contains("report")) r = &(*r)["report"];
  const auto it = r->find("rope");
  if (it == r->end() || it->is_null()) return std::nullopt;
  const nlohmann::json& rope = *it;
  auto bad = [&](const char* key) -> void {
    fail("report", "{}: rope.{} is missing or malformed (rerun `saobp analyze`)", source, key);
  };
  if (!rope.is_object()) bad("(section)");
  RopeMetrics m;
  m.base = number(rope, "base");
  m.seq_len = static_cast<int64_t>(number(rope, "seq_len"));
  m.wavelength = numbers(rope, "wavelength");
  m.slow_share = numbers(rope, "slow_share");
  const size_t P = m.wavelength.size();
  if (P == 0) bad("wavelength");
  const auto q = rope.find("q_norm"), k = rope.find("k_norm");
  if (q == rope.end() || k == rope.end() || !q->is_array() || !k->is_array() || q->size() != k->size())
    bad("q_norm");
  for (size_t l = 0; l < q->size(); ++l) {
    const nlohmann::json &ql = (*q)[l], &kl = (*k)[l];
    if (!ql.is_array() || !kl.is_array() || ql.size() != kl.size()) bad("q_norm");
    std::vector<double> e(P, 0.0);
    double total = 0;
    for (size_t h = 0; h < ql.size(); ++h) {
      if (!ql[h].is_array() || !kl[h].is_array() || ql[h].size() != P || kl[h].size() != P) bad("q_norm");
      for (size_t i = 0; i < P; ++i) {
        if (!ql[h][i].is_number() || !kl[h][i].is_number()) bad("q_norm");
        const double x = ql[h][i].get<double>() * kl[h][i].get<double>();
        e[i] += x;
        total += x;
      }
    }
    for (double& x : e) x = total > 0 ? x / total : kNaN;
    m.energy.push_back(std::move(e));
  }
  const auto d = rope.find("decay");
  if (d == rope.end() || !d->is_object()) bad("decay");
  m.distance = numbers(*d, "distance");
  m.bound = numbers(*d, "bound");
  if (m.bound.empty() || m.bound.size() != m.distance.size() || !(m.bound.front() > 0)) bad("decay");
  const double b0 = m.bound.front();
  for (double& b : m.bound) b /= b0;
  return m;
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
    positional_heads(p, runs);
    rope_figures(p, runs);
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
