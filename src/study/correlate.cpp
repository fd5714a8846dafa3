// correlate_sources of src/study/correlate.h.
#include "study/correlate.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/stats.h"
#include "study/study.h"

namespace fs = std::filesystem;

namespace saobp::study {

namespace {

std::optional<double> find_metric(const std::vector<std::pair<std::string, double>>& m,
                                  const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name && std::isfinite(v)) return v;
  return std::nullopt;
}

nlohmann::json parse_json_file(const std::string& path) {
  try {
    return read_json_file(path, "correlate");
  } catch (const nlohmann::json::exception& e) {
    fail("correlate", "{}: {}", path, e.what());
  }
}

// The metrics of a study run: its results.json (pretraining: "metrics" name -> value; fine-tuning:
// split -> name -> value).
std::vector<std::pair<std::string, double>> run_metrics(const fs::path& study, const std::string& id) {
  const std::string path = (study / "runs" / id / "results.json").string();
  const nlohmann::json r = parse_json_file(path);
  if (!r.is_object()) fail("correlate", "{}: the top level is {}, not an object", path, json_excerpt(r));
  const auto task = r.find("task");
  if (task == r.end() || !task->is_string() || *task != "pretrain") return finetune_metrics(r);
  const auto metrics = r.find("metrics");
  if (metrics == r.end() || !metrics->is_object())
    fail("correlate", "{}: \"metrics\" is {}, not an object of name: value", path,
         metrics == r.end() ? "missing" : json_excerpt(*metrics));
  std::vector<std::pair<std::string, double>> m;
  for (const auto& [k, v] : metrics->items()) m.push_back({k, v.is_number() ? v.get<double>() : NAN});
  return m;
}

// A study.json's cells as correlate reads them: each one's task, run ids and (fine-tuning cells)
// the pretraining run each run started from. Errors name the file and the key.
struct StudyCell {
  std::string task;
  std::vector<std::string> runs, from;
};
std::vector<StudyCell> study_cells(const std::string& path) {
  const nlohmann::json t = parse_json_file(path);
  if (!t.is_object()) fail("correlate", "{}: the top level is {}, not an object", path, json_excerpt(t));
  const auto cells = t.find("cells");
  if (cells == t.end() || !cells->is_array())
    fail("correlate", "{}: \"cells\" is {}, not an array", path,
         cells == t.end() ? "missing" : json_excerpt(*cells));
  auto strings = [&](const nlohmann::json& cell, size_t i, const char* key, bool required) {
    std::vector<std::string> out;
    const auto it = cell.find(key);
    if (it == cell.end() && !required) return out;
    if (it == cell.end() || !it->is_array())
      fail("correlate", "{}: cells[{}].{} is {}, not an array of run ids", path, i, key,
           it == cell.end() ? "missing" : json_excerpt(*it));
    for (const nlohmann::json& v : *it) {
      if (!v.is_string())
        fail("correlate", "{}: cells[{}].{} holds {}, not a run id", path, i, key, json_excerpt(v));
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  std::vector<StudyCell> out;
  for (size_t i = 0; i < cells->size(); ++i) {
    const nlohmann::json& cell = (*cells)[i];
    if (!cell.is_object())
      fail("correlate", "{}: cells[{}] is {}, not an object", path, i, json_excerpt(cell));
    const auto task = cell.find("task");
    if (task == cell.end() || !task->is_string())
      fail("correlate", "{}: cells[{}].task is {}, not a string", path, i,
           task == cell.end() ? "missing" : json_excerpt(*task));
    out.push_back(
        {task->get<std::string>(), strings(cell, i, "runs", true), strings(cell, i, "from", false)});
  }
  return out;
}

// ---- analysis folders: per_sample.csv ---------------------------------------------------------

constexpr const char* kSampleHeader = "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness";
constexpr std::array<const char*, 5> kSampleColumns = {"tokens", "entropy", "gtd", "clustering",
                                                       "betweenness"};

// "[A.|B.]COLUMN" -> (map 0 = A or 1 = B, column index); throws naming the columns.
std::pair<int, size_t> sample_metric(const std::string& name) {
  int map = 1;
  std::string col = name;
  if (name.starts_with("A.") || name.starts_with("B.")) map = name[0] == 'A' ? 0 : 1, col = name.substr(2);
  for (size_t c = 0; c < kSampleColumns.size(); ++c)
    if (col == kSampleColumns[c]) return {map, c};
  fail("correlate",
       "metric '{}' of an analysis folder: expected [A.|B.]NAME, NAME one of tokens, entropy, gtd, "
       "clustering, "
       "betweenness",
       name);
}

// A field of a foreign file in a message: quoted, at most 40 bytes.
std::string excerpt(const std::string& field) { return json_excerpt(nlohmann::json(field)); }

// One (sample, layer, head) of per_sample.csv: its values on A and on B (NaN where absent).
struct SampleHead {
  std::array<std::array<double, 5>, 2> v;
};

// per_sample.csv, every row checked: the header, 9 fields, integers and numbers ("nan" allowed
// for the metrics). Keyed by (sample, layer, head) in file order.
std::map<std::array<int64_t, 3>, SampleHead> read_per_sample(const std::string& path) {
  const std::string text = read_file(path);
  std::map<std::array<int64_t, 3>, SampleHead> out;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1, ++line_no;
    if (line_no == 1) {
      if (line != kSampleHeader)
        fail("correlate", "{}:1: the header is {}, not per_sample.csv's '{}'", path, excerpt(line),
             kSampleHeader);
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> f;
    for (size_t a = 0;;) {
      const size_t b = line.find(',', a);
      f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    if (f.size() != 9) fail("correlate", "{}:{}: {} fields, per_sample.csv has 9", path, line_no, f.size());
    auto integer = [&](size_t i, const char* what) {
      int64_t v = -1;
      const auto [p, ec] = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v);
      if (ec != std::errc() || p != f[i].data() + f[i].size() || v < 0)
        fail("correlate", "{}:{}: {} {} is not a count", path, line_no, what, excerpt(f[i]));
      return v;
    };
    const int64_t sample = integer(0, "sample"), layer = integer(1, "layer"), head = integer(3, "head");
    if (f[2] != "A" && f[2] != "B")
      fail("correlate", "{}:{}: map {} is neither A nor B", path, line_no, excerpt(f[2]));
    SampleHead& s = out.try_emplace({sample, layer, head},
                                    SampleHead{{{{NAN, NAN, NAN, NAN, NAN}, {NAN, NAN, NAN, NAN, NAN}}}})
                        .first->second;
    for (size_t c = 0; c < kSampleColumns.size(); ++c) {
      const std::string& t = f[4 + c];
      char* stop = nullptr;
      const double v = t.empty() ? NAN : std::strtod(t.c_str(), &stop);
      if (t.empty() || stop != t.c_str() + t.size())
        fail("correlate", "{}:{}: {} {} is not a number", path, line_no, kSampleColumns[c], excerpt(t));
      s.v[f[2] == "A" ? 0 : 1][c] = v;
    }
  }
  if (line_no == 0) fail("correlate", "{}: empty file (per_sample.csv has a header line)", path);
  return out;
}

// "TASK:NAME" -> (TASK, NAME); "NAME" -> ("pretrain", NAME).
std::pair<std::string, std::string> split_name(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return {"pretrain", s};
  return {s.substr(0, colon), s.substr(colon + 1)};
}

}  // namespace

nlohmann::json correlate_sources(const std::vector<std::string>& sources, const std::string& x,
                                 const std::string& y, const CorrelateOptions& opt) {
  nlohmann::json points = nlohmann::json::array();
  std::vector<double> xs, ys;
  int64_t left_out = 0;
  bool runs = false, checkpoints = false, rows = false;
  nlohmann::json graph = nlohmann::json::object();  // analysis folders: their graph's τ and nodes
  // Study and run folders: every metric name with a value somewhere ("TASK:NAME" for a
  // fine-tuning run's), so that a name found nowhere is said to be unknown.
  std::set<std::string> names;
  auto note = [&](const std::vector<std::pair<std::string, double>>& m, const std::string& task) {
    for (const auto& [k, v] : m)
      if (std::isfinite(v)) names.insert(task == "pretrain" ? k : task + ":" + k);
  };
  auto add = [&](const std::string& source, const std::string& label, std::optional<double> a,
                 std::optional<double> b) {
    if (!a || !b) return void(++left_out);
    xs.push_back(*a), ys.push_back(*b);
    points.push_back({{"source", source}, {"label", label}, {"x", *a}, {"y", *b}});
  };
  for (const std::string& src : sources) {
    const fs::path dir(src);
    if (fs::exists(dir / "study.json")) {
      runs = true;
      const std::vector<StudyCell> cells = study_cells((dir / "study.json").string());
      const auto [xt, xn] = split_name(x);
      const auto [yt, yn] = split_name(y);
      // The fine-tuning run of (task, pretraining run id), from the fine-tuning cells' "from".
      std::map<std::pair<std::string, std::string>, std::string> finetuned;
      for (const StudyCell& cell : cells)
        if (cell.task != "pretrain")
          for (size_t i = 0; i < cell.runs.size() && i < cell.from.size(); ++i)
            finetuned[{cell.task, cell.from[i]}] = cell.runs[i];
      for (const StudyCell& cell : cells) {
        if (cell.task != "pretrain") continue;
        for (const std::string& id : cell.runs) {
          auto metric_of = [&](const std::string& task, const std::string& name) -> std::optional<double> {
            std::string run = id;
            if (task != "pretrain") {
              const auto it = finetuned.find({task, id});
              if (it == finetuned.end()) return std::nullopt;
              run = it->second;
            }
            if (!fs::exists(dir / "runs" / run / "results.json")) return std::nullopt;
            const std::vector<std::pair<std::string, double>> m = run_metrics(dir, run);
            note(m, task);
            return find_metric(m, name);
          };
          add(src, id, metric_of(xt, xn), metric_of(yt, yn));
        }
      }
    } else if (fs::exists(dir / "metrics.jsonl")) {
      checkpoints = true;
      for (const nlohmann::json& line : read_eval_lines(src)) {
        const std::vector<std::pair<std::string, double>> m = eval_line_metrics(line);
        note(m, "pretrain");
        const int64_t step = line.value("step", int64_t{0});
        if (step < opt.from_step) continue;
        add(src, "step " + std::to_string(step), find_metric(m, x), find_metric(m, y));
      }
    } else if (fs::exists(dir / "per_sample.csv")) {
      rows = true;
      const auto [xm, xc] = sample_metric(x);
      const auto [ym, yc] = sample_metric(y);
      // The attention graph CC and BC were measured on: analysis.json's options, when it is there.
      if (const std::string path = (dir / "analysis.json").string(); fs::exists(path)) {
        const nlohmann::json a = parse_json_file(path);
        const JsonFields top(a, path, "correlate");
        if (const nlohmann::json* o = top.find("options")) {
          const JsonFields options(*o, path + ": options", "correlate");
          graph[src] = {{"graph_tau", options.number("graph_tau", NAN)},
                        {"graph_nodes", options.integer("graph_nodes", -1)}};
        }
      }
      for (const auto& row : read_per_sample((dir / "per_sample.csv").string())) {
        // Not a structured binding: clang does not capture those in the lambda below.
        const int64_t sample = row.first[0], layer = row.first[1], head = row.first[2];
        const SampleHead& s = row.second;
        if (!opt.layers.empty() && std::find(opt.layers.begin(), opt.layers.end(), layer) == opt.layers.end())
          continue;
        auto value = [&](int m, size_t c) -> std::optional<double> {
          const double v = s.v[static_cast<size_t>(m)][c];
          return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
        };
        add(src, fmt::format("sample {} L{} H{}", sample, layer, head), value(xm, xc), value(ym, yc));
      }
    } else {
      fail("correlate",
           "{}: neither a study folder (study.json), a run folder (metrics.jsonl) nor an analysis folder "
           "(per_sample.csv of analyze --per-sample)",
           src);
    }
  }
  if (!rows && !names.empty())
    for (const std::string& name : {x, y})
      if (!names.count(name))
        fail("correlate", "no metric '{}' in {}; the metrics with values there: {}", name,
             fmt::join(sources, ", "), fmt::join(names, ", "));
  if (xs.size() < 2)
    fail("correlate", "{} against {}: {} point(s) with both values ({} left out); a correlation needs 2", y,
         x, xs.size(), left_out);
  const stats::Correlation c = stats::correlate(xs, ys);
  std::vector<std::string> kinds;
  if (runs) kinds.push_back("runs");
  if (checkpoints) kinds.push_back("checkpoints");
  if (rows) kinds.push_back("(sample, layer, head) rows");
  const std::string over = fmt::format("{}", fmt::join(kinds, " and "));
  nlohmann::json out = {{"x", x},
                        {"y", y},
                        {"over", over},
                        {"points", points},
                        {"left_out", left_out},
                        {"n", c.n},
                        {"pearson_r", c.pearson_r},
                        {"pearson_p", c.pearson_p},
                        {"spearman_rho", c.spearman_rho},
                        {"slope", c.slope},
                        {"intercept", c.intercept}};
  if (rows) out["graph"] = graph;
  return out;
}

}  // namespace saobp::study
