#include "report/runs.h"

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "report/svg.h"

namespace saobp::report {

namespace fs = std::filesystem;

double number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

std::vector<double> numbers(const nlohmann::json& j, const char* key) {
  std::vector<double> v;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return v;
  for (const auto& x : *it) v.push_back(x.is_number() ? x.get<double>() : kNaN);
  return v;
}

namespace {

void push_layers(LayerSeries& s, const std::vector<double>& v, size_t line) {
  if (s.size() < v.size()) s.resize(v.size());
  for (auto& layer : s) layer.resize(line + 1, kNaN);
  for (size_t l = 0; l < v.size(); ++l) s[l][line] = v[l];
}

// Bookkeeping numbers that sit beside the metrics of a split (counts, sizes, speeds): neither
// curves nor results columns.
bool is_bookkeeping(const std::string& key) {
  static const std::set<std::string> k = {"examples", "total",        "HasAns_total",   "NoAns_total",
                                          "missing",  "tokens",       "windows",        "max_length",
                                          "stride",   "tokens_per_s", "examples_per_s", "truncated_prompts"};
  return k.count(key) > 0;
}

}  // namespace

std::vector<std::pair<MetricKey, double>> split_metrics(const nlohmann::json& j) {
  std::vector<std::pair<MetricKey, double>> out;
  if (!j.is_object()) return out;
  for (const auto& [split, ms] : j.items()) {
    if (!ms.is_object()) continue;
    for (const auto& [key, v] : ms.items())
      if (v.is_number() && !is_bookkeeping(key)) out.push_back({{split, key}, v.get<double>()});
  }
  return out;
}

Metrics read_metrics(const std::string& path) {
  Metrics m;
  const std::string text = read_file(path);
  size_t pos = 0, lineno = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    check_json_depth(line, path, "report", lineno);
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("report", "{}:{}: not a JSON line: {}", path, lineno, e.what());
    }
    if (!j.is_object()) fail("report", "{}:{}: not a JSON object", path, lineno);
    const double step = number(j, "step");
    if (j.contains("eval_loss")) {
      const size_t i = m.eval_step.size();
      m.eval_step.push_back(step);
      m.eval_loss.push_back(number(j, "eval_loss"));
      m.eval_accuracy.push_back(number(j, "eval_accuracy"));
      m.eval_epoch.push_back(number(j, "epoch"));
      if (auto em = j.find("eval_metrics"); em != j.end())
        for (const auto& [key, v] : split_metrics(*em)) {
          std::vector<double>& s = m.eval_metrics[key];
          s.resize(i, kNaN);
          s.push_back(v);
        }
      push_layers(m.eval_gtd, numbers(j, "eval_gtd"), i);
      push_layers(m.eval_entropy, numbers(j, "eval_entropy"), i);
      push_layers(m.eval_gtd_softmax, numbers(j, "eval_gtd_softmax"), i);
      push_layers(m.eval_entropy_softmax, numbers(j, "eval_entropy_softmax"), i);
    } else if (j.contains("loss")) {
      m.step.push_back(step);
      m.loss.push_back(number(j, "loss"));
      m.lr.push_back(number(j, "lr"));
      if (j.contains("skip_rate")) {
        const size_t i = m.skip_step.size();
        m.skip_step.push_back(step);
        push_layers(m.skip_rate, numbers(j, "skip_rate"), i);
      }
    }
  }
  for (auto& [key, s] : m.eval_metrics) s.resize(m.eval_step.size(), kNaN);
  return m;
}

nlohmann::json read_results(const std::string& path) {
  nlohmann::json j;
  try {
    j = read_json_file(path, "report");
  } catch (const nlohmann::json::exception& e) {
    fail("report", "{}: not JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("metrics") || !j["metrics"].is_object())
    fail("report",
         "{}: no \"metrics\" object (expected the results.json of `saobp finetune` or `saobp eval --task`)",
         path);
  (void)JsonFields(j, path, "report").boolean("zero_shot", false);  // the one key read as a type
  return j;
}

std::string base_name(const std::string& dir) {
  fs::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  const std::string n = p.filename().string();
  return n.empty() ? dir : n;
}

Run load_run(const std::string& dir, size_t index, const ReportOptions& opt) {
  Run r;
  r.dir = dir;
  r.name = base_name(dir);
  r.color = svg::palette(index);
  if (!fs::is_directory(dir)) fail("report", "run directory {} does not exist", dir);
  const fs::path metrics = fs::path(dir) / "metrics.jsonl", final_dir = fs::path(dir) / "final";
  if (!fs::is_regular_file(metrics))
    fail("report",
         "run {} has no metrics.jsonl (expected {}) nor results.json: is it a `saobp train` run directory?",
         dir, metrics.string());
  if (!fs::is_regular_file(final_dir / "config.json") || !fs::is_regular_file(final_dir / "config.toml"))
    fail("report",
         "run {} has no final checkpoint ({} with config.json and config.toml): did training finish?", dir,
         final_dir.string());
  nlohmann::json hf;
  try {
    hf = read_json_file((final_dir / "config.json").string(), "report");
  } catch (const nlohmann::json::exception& e) {
    fail("report", "{}: not JSON: {}", (final_dir / "config.json").string(), e.what());
  }
  r.cfg = load_config((final_dir / "config.toml").string());
  const JsonFields saobp_keys(hf, (final_dir / "config.json").string(), "report");
  r.variant = saobp_keys.string("saobp_attention", std::string(variant_name(r.cfg.model.attention.variant)));
  r.lambda = saobp_keys.number("saobp_lambda", r.cfg.model.attention.lambda);
  r.label = fmt::format("{} ({})", r.name, r.variant);
  r.identical = r.variant == "original";
  r.metrics = read_metrics(metrics.string());

  // `saobp analyze --out final` writes final/analysis.json; its default --out, final/analysis/.
  fs::path analysis = final_dir / "analysis.json";
  if (!fs::is_regular_file(analysis)) analysis = final_dir / "analysis" / "analysis.json";
  nlohmann::json report;
  if (fs::is_regular_file(analysis)) {
    try {
      report = read_json_file(analysis.string(), "report");
    } catch (const nlohmann::json::exception& e) {
      fail("report", "{}: not JSON: {} (rerun `saobp analyze` or delete it)", analysis.string(), e.what());
    }
    r.analysis_from = analysis.string();
  } else {
    AnalysisOptions ao;
    ao.samples = opt.samples;
    ao.graph_metrics = false;
    report = analyze_checkpoint(final_dir.string(), ao).to_json();
    r.analysis_from = fmt::format("computed over {} validation samples", opt.samples);
  }
  r.a = layer_metrics_from_json(report, "attn", r.analysis_from);
  r.b = layer_metrics_from_json(report, "probs", r.analysis_from);
  r.rope = rope_metrics_from_json(report, r.analysis_from);
  r.sample = inspect_sample(final_dir.string(), opt.sample_index);
  if (fs::is_regular_file(fs::path(dir) / "results.json"))
    r.results_path = (fs::path(dir) / "results.json").string();
  return r;
}

}  // namespace saobp::report
