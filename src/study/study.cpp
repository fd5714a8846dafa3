// The study runner of src/study/study.h.
//
// Determinism: every run is an ordinary `saobp train` (or `saobp finetune`) process whose result
// is a function of its config alone (docs/engine.md), so neither the number of processes nor the
// order they finish in changes any number; the table is built from the runs' files in plan order,
// and holds no times or absolute paths, so an interrupted and resumed study writes the same bytes
// as an uninterrupted one.
//
// Resumption, per run: results.json present -> finished, not run again; the final checkpoint
// present -> only the results are read again; a complete checkpoint-N -> `--resume` from the
// highest N; otherwise the folder is cleared (it holds no checkpoint, so nothing saved is lost)
// and the run starts afresh.
//
// Under mpirun (N ranks) the ranks share the runs out: rank r runs the pretraining runs whose
// index among them is r modulo N, and every fine-tuning run on the rank of the pretraining run
// it starts from (so no rank waits for another's run), each as the same single-process child
// as without mpirun. Rank 0 writes the configs first; after the runs, the ranks meet at a
// barrier that sleeps rather than polls (dist::idle_barrier: the CPU goes to the runs still
// going) and rank 0 alone writes the table, from the runs' files, as one process would.
// Children are plain processes, never ranks: their environment leaves out the launcher's
// variables (OMPI_*, PMIX_*, PMI_*), which would make a child's MPI think it is a rank of the job.
#include "study/study.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/stats.h"
#include "dist/comm.h"
#include "train/config.h"

namespace fs = std::filesystem;

namespace saobp::study {

namespace {

// ---- the study file ---------------------------------------------------------------------------

// A TOML scalar as override text: strings as they are, numbers in their shortest exact form.
std::string scalar_text(const toml::node& n, const std::string& file, const std::string& key) {
  if (const auto* s = n.as_string()) return s->get();
  if (const auto* i = n.as_integer()) return fmt::format("{}", i->get());
  if (const auto* d = n.as_floating_point()) return fmt::format("{}", d->get());
  if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  fail("study", "{}: {} holds a value that is not a string, number or boolean", file, key);
}

std::vector<std::string> string_list(const toml::node* n, const std::string& file, const std::string& key) {
  std::vector<std::string> out;
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail("study", "{}: {} must be an array of strings", file, key);
  for (const toml::node& e : *a) {
    if (!e.is_string()) fail("study", "{}: {} must be an array of strings", file, key);
    out.push_back(*e.value<std::string>());
  }
  return out;
}

std::string string_key(const toml::table& t, const char* key, const std::string& file,
                       const std::string& where, std::string fallback) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (!n->is_string()) fail("study", "{}: {}.{} must be a string", file, where, key);
  return *n->value<std::string>();
}

// The keys of a table in the order the file writes them (toml++ keeps them sorted), each with
// its line.
std::vector<std::pair<size_t, std::string>> keys_in_file_order(const toml::table& t) {
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [k, v] : t) order.push_back({v.source().begin.line, std::string(k.str())});
  std::sort(order.begin(), order.end());
  return order;
}

void check_keys(const toml::table& t, const std::set<std::string>& allowed, const std::string& file,
                const std::string& where) {
  for (const auto& [k, v] : t)
    if (!allowed.count(std::string(k.str())))
      fail("study", "{}: unknown key {}{}{} (line {})", file, where, where.empty() ? "" : ".", k.str(),
           v.source().begin.line);
}

std::string absolute_from(const std::string& file, const std::string& path) {
  if (path.empty()) return path;
  const fs::path p(path);
  return (p.is_absolute() ? p : fs::path(file).parent_path() / p).lexically_normal().string();
}

// A cell or run name that is a safe relative path: key=value pairs joined by ',', anything but
// [A-Za-z0-9._=,+-] replaced by '_'.
std::string safe_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr("._=,+-", c)) c = '_';
  return s;
}

// ---- running children -------------------------------------------------------------------------

// Starts `binary args...` with stdout and stderr into `log`; the child dies with the study
// (PR_SET_PDEATHSIG), so a killed study leaves no orphan writing into its run folders.
// This process's environment without an MPI launcher's variables (the child is no rank).
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    if (v.rfind("OMPI_", 0) == 0 || v.rfind("PMIX_", 0) == 0 || v.rfind("PMI_", 0) == 0) continue;
    env.push_back(v);
  }
  return env;
}

pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before fork(): the child may only make async-signal-safe calls until exec.
  std::vector<std::string> env_s = child_environment();
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) fail("study", "cannot start {}: {}", binary, std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2), ::close(fd);
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

bool is_finished(const PlannedRun& r) { return fs::exists(fs::path(r.run_dir) / "results.json"); }

// Writes a pretraining run's results.json from its metrics.jsonl once its final checkpoint exists.
void write_pretrain_results(const PlannedRun& r) {
  const RunConfig cfg = load_config(r.config);
  // ordered_json: the metrics keep their order (loss, accuracy, perplexity, entropy and GTD by layer).
  nlohmann::ordered_json out = {
      {"task", "pretrain"}, {"step", cfg.train.max_steps}, {"metrics", nlohmann::ordered_json::object()}};
  for (const auto& [k, v] : pretrain_metrics(r.run_dir, cfg.train.max_steps)) out["metrics"][k] = v;
  write_file_atomic((fs::path(r.run_dir) / "results.json").string(), out.dump(2) + "\n");
}

std::string fmt_num(const nlohmann::json& v) {
  if (!v.is_number()) return "nan";
  return fmt::format("{:.6g}", v.get<double>());
}

}  // namespace

StudySpec load_study(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(read_file(path), path);
  } catch (const toml::parse_error& e) {
    fail("study", "{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description());
  }
  check_keys(root, {"study", "variants", "axes", "finetune"}, path, "");
  StudySpec s;
  s.file = path;
  s.name = fs::path(path).stem().string();
  if (const toml::node* n = root.get("study")) {
    const toml::table* t = n->as_table();
    if (!t) fail("study", "{}: [study] must be a table", path);
    check_keys(*t, {"name", "base", "overrides", "seeds", "compare", "baseline"}, path, "study");
    s.name = string_key(*t, "name", path, "study", s.name);
    s.base = absolute_from(path, string_key(*t, "base", path, "study", ""));
    s.overrides = string_list(t->get("overrides"), path, "study.overrides");
    s.compare_key =
        string_key(*t, "compare", path, "study", root.get("variants") ? "variant" : s.compare_key);
    s.baseline = string_key(*t, "baseline", path, "study", s.baseline);
    if (const toml::node* seeds = t->get("seeds")) {
      const toml::array* a = seeds->as_array();
      if (!a || a->empty()) fail("study", "{}: study.seeds must be a non-empty array of integers", path);
      s.seeds.clear();
      for (const toml::node& e : *a) {
        if (!e.is_integer()) fail("study", "{}: study.seeds must be a non-empty array of integers", path);
        if (std::count(s.seeds.begin(), s.seeds.end(), *e.value<int64_t>()))
          fail("study", "{}: study.seeds repeats {}", path, *e.value<int64_t>());
        s.seeds.push_back(*e.value<int64_t>());
      }
    }
  }
  if (const toml::node* n = root.get("variants")) {
    const toml::table* t = n->as_table();
    if (!t || t->empty())
      fail("study", "{}: [variants] must be a non-empty table of name = [\"section.key=value\", ...]", path);
    for (const auto& [line, name] : keys_in_file_order(*t)) {
      std::vector<std::string> o = string_list(t->get(name), path, "variants." + name);
      for (const std::string& e : o)
        if (e.find('=') == std::string::npos || e.find('.') > e.find('='))
          fail("study", "{}: variants.{} (line {}): '{}' is not an override \"section.key=value\"", path,
               name, line, e);
      s.variants.push_back({name, std::move(o)});
    }
  }
  if (const toml::node* n = root.get("axes")) {
    const toml::table* t = n->as_table();
    if (!t) fail("study", "{}: [axes] must be a table of \"section.key\" = [values]", path);
    for (const auto& [line, key] : keys_in_file_order(*t)) {
      if (key.find('.') == std::string::npos || key.find('=') != std::string::npos)
        fail("study", "{}: axis '{}' (line {}) must be a config key \"section.key\"", path, key, line);
      const toml::array* a = t->get(key)->as_array();
      if (!a || a->empty())
        fail("study", "{}: axes.\"{}\" (line {}) must be a non-empty array", path, key, line);
      std::vector<std::string> values;
      for (const toml::node& e : *a) {
        values.push_back(scalar_text(e, path, "axes." + key));
        if (std::count(values.begin(), values.end() - 1, values.back()))
          fail("study", "{}: axes.\"{}\" repeats {}", path, key, values.back());
      }
      s.axes.push_back({key, values});
    }
  }
  if (!root.get("study") && !s.variants.empty()) s.compare_key = "variant";
  if (s.compare_key == "variant") {
    bool found = false;
    for (const auto& v : s.variants) found = found || v.first == s.baseline;
    if (!found) fail("study", "{}: study.baseline '{}' is not a name in [variants]", path, s.baseline);
  }
  if (const toml::node* n = root.get("finetune")) {
    const toml::array* a = n->as_array();
    if (!a) fail("study", "{}: finetune must be an array of tables ([[finetune]])", path);
    for (const toml::node& e : *a) {
      const toml::table* t = e.as_table();
      if (!t) fail("study", "{}: finetune must be an array of tables ([[finetune]])", path);
      check_keys(*t, {"task", "data", "overrides"}, path, "finetune");
      FinetuneSpec f;
      f.task = string_key(*t, "task", path, "finetune", "");
      f.data = absolute_from(path, string_key(*t, "data", path, "finetune", ""));
      if (f.task.empty() || f.data.empty()) fail("study", "{}: each [[finetune]] needs task and data", path);
      f.overrides = string_list(t->get("overrides"), path, "finetune.overrides");
      s.finetune.push_back(f);
    }
  }
  return s;
}

std::vector<std::string> run_overrides(const StudySpec& spec, const PlannedRun& r) {
  std::vector<std::string> o = spec.overrides;
  for (const auto& [k, v] : r.axes) {
    if (k != "variant") {
      o.push_back(k + "=" + v);
      continue;
    }
    for (const auto& [name, bundle] : spec.variants)
      if (name == v) o.insert(o.end(), bundle.begin(), bundle.end());
  }
  o.push_back("train.seed=" + std::to_string(r.seed));
  o.push_back("train.run_dir=" + r.run_dir);
  return o;
}

std::vector<PlannedRun> plan_study(const StudySpec& spec, const std::string& study_dir) {
  const fs::path root = fs::absolute(study_dir);
  // The cells: the cartesian product of the axes, the last axis varying fastest.
  std::vector<std::vector<std::pair<std::string, std::string>>> cells = {{}};
  std::vector<std::pair<std::string, std::vector<std::string>>> all_axes = spec.axes;
  if (!spec.variants.empty()) {
    std::vector<std::string> names;
    for (const auto& v : spec.variants) names.push_back(v.first);
    all_axes.insert(all_axes.begin(), {"variant", names});
  }
  for (const auto& [key, values] : all_axes) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& c : cells)
      for (const std::string& v : values) {
        next.push_back(c);
        next.back().push_back({key, v});
      }
    cells = next;
  }
  auto cell_name = [](const std::vector<std::pair<std::string, std::string>>& axes, const std::string& task) {
    std::string s;
    for (const auto& [k, v] : axes) s += (s.empty() ? "" : ",") + k + "=" + v;
    if (s.empty()) s = "base";
    return task == "pretrain" ? s : s + ",task=" + task;
  };
  std::vector<PlannedRun> plan;
  for (const auto& axes : cells)
    for (int64_t seed : spec.seeds) {
      PlannedRun r;
      r.cell = cell_name(axes, "pretrain");
      r.task = "pretrain";
      r.seed = seed;
      r.axes = axes;
      r.id = safe_name(r.cell) + "/seed-" + std::to_string(seed);
      r.run_dir = (root / "runs" / r.id).string();
      r.config = (root / "configs" / (r.id + ".toml")).string();
      RunConfig cfg;
      try {
        cfg = load_config(spec.base, run_overrides(spec, r));
      } catch (const Error& e) {
        fail("study", "{}: run {}: {}", spec.file, r.id, e.what());
      }
      if (cfg.train.eval_every <= 0 || cfg.train.max_steps % cfg.train.eval_every != 0)
        fail("study",
             "{}: run {}: the table needs an evaluation at the last step: train.eval_every ({}) must divide "
             "train.max_steps ({})",
             spec.file, r.id, cfg.train.eval_every, cfg.train.max_steps);
      plan.push_back(r);
    }
  const size_t n_pretrain = plan.size();
  for (const FinetuneSpec& f : spec.finetune)
    for (size_t i = 0; i < n_pretrain; ++i) {
      PlannedRun r = plan[i];
      r.task = f.task;
      r.cell = cell_name(r.axes, f.task);
      r.id = safe_name(r.cell) + "/seed-" + std::to_string(r.seed);
      r.run_dir = (root / "runs" / r.id).string();
      r.config.clear();
      r.pretrain = static_cast<int>(i);
      plan.push_back(r);
    }
  return plan;
}

std::vector<std::string> child_args(const StudySpec& spec, const std::vector<PlannedRun>& plan, size_t i,
                                    const std::string& resume) {
  const PlannedRun& r = plan[i];
  std::vector<std::string> a;
  if (r.task == "pretrain") {
    a = {"train", r.config, "--quiet"};
  } else {
    const FinetuneSpec* f = nullptr;
    for (const FinetuneSpec& g : spec.finetune)
      if (g.task == r.task) f = &g;
    a = {"finetune", "--init", (fs::path(plan[static_cast<size_t>(r.pretrain)].run_dir) / "final").string(),
         "--task",   r.task,   "--data",
         f->data,    "--quiet"};
    a.insert(a.end(), f->overrides.begin(), f->overrides.end());
    a.push_back("train.seed=" + std::to_string(r.seed));
    a.push_back("train.run_dir=" + r.run_dir);
  }
  if (!resume.empty()) a.insert(a.end(), {"--resume", resume});
  return a;
}

std::string last_checkpoint(const std::string& run_dir) {
  std::error_code ec;
  int64_t best = -1;
  std::string out;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-", 0) != 0) continue;
    const std::string num = name.substr(11);
    if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
    bool complete = true;
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
      complete = complete && fs::exists(e.path() / f, ec);
    const int64_t n = std::stoll(num);
    if (complete && n > best) best = n, out = e.path().string();
  }
  return out;
}

std::vector<nlohmann::json> read_eval_lines(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(path);
  if (!in) fail("study", "cannot read {}", path);
  std::vector<nlohmann::json> out;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("study", "{}:{}: {}", path, lineno, e.what());
    }
    if (j.contains("eval_loss")) out.push_back(j);
  }
  return out;
}

std::vector<std::pair<std::string, double>> pretrain_metrics(const std::string& run_dir, int64_t last_step) {
  nlohmann::json last;
  for (const nlohmann::json& j : read_eval_lines(run_dir))
    if (j.value("step", int64_t{-1}) == last_step) last = j;
  if (last.is_null())
    fail("study", "{}/metrics.jsonl: no evaluation at the last step ({})", run_dir, last_step);
  return eval_line_metrics(last);
}

std::vector<std::pair<std::string, double>> eval_line_metrics(const nlohmann::json& line) {
  std::vector<std::pair<std::string, double>> m;
  auto num = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; };
  m.push_back({"loss", num(line.value("eval_loss", nlohmann::json()))});
  m.push_back({"accuracy", num(line.value("eval_accuracy", nlohmann::json()))});
  m.push_back({"perplexity", num(line.value("eval_perplexity", nlohmann::json()))});
  for (const char* key : {"entropy", "gtd"}) {
    const nlohmann::json per_layer = line.value("eval_" + std::string(key), nlohmann::json());
    if (!per_layer.is_array()) continue;
    for (size_t l = 0; l < per_layer.size(); ++l)
      m.push_back({fmt::format("{}_L{}", key, l), num(per_layer[l])});
  }
  if (line.contains("eval_metrics"))
    for (const auto& kv : finetune_metrics({{"metrics", line["eval_metrics"]}})) m.push_back(kv);
  return m;
}

std::vector<std::pair<std::string, double>> finetune_metrics(const nlohmann::json& results) {
  std::vector<std::pair<std::string, double>> m;
  if (!results.contains("metrics") || !results["metrics"].is_object()) return m;
  for (const auto& [split, values] : results["metrics"].items()) {
    if (!values.is_object()) continue;
    for (const auto& [name, v] : values.items())
      if (v.is_number()) m.push_back({split + "." + name, v.get<double>()});
  }
  return m;
}

nlohmann::json aggregate(const StudySpec& spec, const std::vector<RunRecord>& runs) {
  // The cells in the order of their first run; within a cell, the metric names in first-seen order.
  std::vector<std::string> cells;
  std::map<std::string, std::vector<const RunRecord*>> by_cell;
  for (const RunRecord& r : runs) {
    if (!by_cell.count(r.cell)) cells.push_back(r.cell);
    by_cell[r.cell].push_back(&r);
  }
  // The baseline partner of a cell: same task, same axes except compare_key = baseline.
  auto partner = [&](const RunRecord& r) -> std::string {
    bool has_key = false;
    for (const auto& [k, v] : r.axes) has_key = has_key || (k == spec.compare_key && v != spec.baseline);
    if (!has_key) return "";
    for (const std::string& c : cells) {
      const RunRecord& o = *by_cell[c].front();
      if (o.task != r.task || o.axes.size() != r.axes.size()) continue;
      bool same = true;
      for (size_t i = 0; i < o.axes.size(); ++i)
        same = same && o.axes[i].first == r.axes[i].first &&
               (o.axes[i].first == spec.compare_key ? o.axes[i].second == spec.baseline
                                                    : o.axes[i].second == r.axes[i].second);
      if (same) return c;
    }
    return "";
  };
  auto value_of = [](const RunRecord& r, const std::string& name, double& out) {
    for (const auto& [k, v] : r.metrics)
      if (k == name) return out = v, true;
    return false;
  };
  nlohmann::json table = {{"study", spec.name},
                          {"compare", {{"key", spec.compare_key}, {"baseline", spec.baseline}}},
                          {"seeds", spec.seeds},
                          {"cells", nlohmann::json::array()}};
  for (const std::string& c : cells) {
    const std::vector<const RunRecord*>& rs = by_cell[c];
    nlohmann::json cell = {{"cell", c}, {"task", rs.front()->task}, {"axes", nlohmann::json::object()}};
    for (const auto& [k, v] : rs.front()->axes) cell["axes"][k] = v;
    std::vector<std::string> names;
    for (const RunRecord* r : rs) {
      cell["runs"].push_back(r->id);
      if (!r->from.empty()) cell["from"].push_back(r->from);
      for (const auto& [k, v] : r->metrics)
        if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
    const std::string base = partner(*rs.front());
    nlohmann::json metrics = nlohmann::json::array(), paired = nlohmann::json::array();
    for (const std::string& name : names) {
      std::vector<double> xs;
      double v = 0;
      for (const RunRecord* r : rs)
        if (value_of(*r, name, v)) xs.push_back(v);
      metrics.push_back({{"metric", name},
                         {"n", xs.size()},
                         {"mean", stats::mean(xs)},
                         {"sd", xs.size() > 1 ? nlohmann::json(stats::sample_sd(xs)) : nlohmann::json()}});
      if (base.empty()) continue;
      // Pairs by seed: this cell's run and the baseline cell's run of the same seed.
      std::vector<double> a, b;
      double u = 0;
      for (const RunRecord* r : rs)
        for (const RunRecord* o : by_cell[base])
          if (o->seed == r->seed && value_of(*r, name, v) && value_of(*o, name, u))
            a.push_back(v), b.push_back(u);
      if (a.size() < 2) continue;
      const stats::PairedDifference d = stats::paired_difference(a, b);
      paired.push_back({{"metric", name},
                        {"n", d.n},
                        {"mean", d.mean},
                        {"sd", d.sd},
                        {"lo", d.lo},
                        {"hi", d.hi},
                        {"t", d.t},
                        {"p", d.p}});
    }
    cell["metrics"] = metrics;
    if (!base.empty()) cell["baseline_cell"] = base, cell["paired"] = paired;
    table["cells"].push_back(cell);
  }
  return table;
}

std::string table_markdown(const nlohmann::json& table) {
  std::string s = fmt::format(
      "# Study {}\n\nSeeds: {}. Paired differences: cell minus the cell with {} = {}, "
      "over the seeds both have, with the 95% Student-t interval.\n",
      table["study"].get<std::string>(), table["seeds"].dump(), table["compare"]["key"].get<std::string>(),
      table["compare"]["baseline"].get<std::string>());
  for (const nlohmann::json& c : table["cells"]) {
    s += fmt::format(
        "\n## {}\n\n| metric | n | mean | sd | difference | 95% interval | p "
        "|\n|---|---|---|---|---|---|---|\n",
        c["cell"].get<std::string>());
    for (const nlohmann::json& m : c["metrics"]) {
      std::string diff = "| |", name = m["metric"];  // three empty cells
      if (c.contains("paired"))
        for (const nlohmann::json& p : c["paired"])
          if (p["metric"] == name)
            diff = fmt::format("{} | [{}, {}] | {}", fmt_num(p["mean"]), fmt_num(p["lo"]), fmt_num(p["hi"]),
                               fmt_num(p["p"]));
      s += fmt::format("| {} | {} | {} | {} | {} |\n", name, m["n"].get<int64_t>(), fmt_num(m["mean"]),
                       fmt_num(m["sd"]), diff);
    }
  }
  return s;
}

std::string table_csv(const nlohmann::json& table) {
  // One row per (cell, metric); the cell's axes as columns of their own.
  std::vector<std::string> axes;
  for (const nlohmann::json& c : table["cells"])
    for (const auto& [k, v] : c["axes"].items())
      if (std::find(axes.begin(), axes.end(), k) == axes.end()) axes.push_back(k);
  std::string s = "cell";
  for (const std::string& a : axes) s += "," + a;
  s += ",task,metric,n,mean,sd,diff_mean,diff_lo,diff_hi,diff_p\n";
  auto csv_field = [](std::string f) {
    if (f.find_first_of(",\"\n") == std::string::npos) return f;
    std::string q = "\"";
    for (char ch : f) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const nlohmann::json& c : table["cells"])
    for (const nlohmann::json& m : c["metrics"]) {
      s += csv_field(c["cell"]);
      for (const std::string& a : axes) s += "," + csv_field(c["axes"].value(a, ""));
      s += fmt::format(",{},{},{},{},{}", csv_field(c["task"]), csv_field(m["metric"]), m["n"].get<int64_t>(),
                       fmt_num(m["mean"]), fmt_num(m["sd"]));
      std::string diff = ",,,,";
      if (c.contains("paired"))
        for (const nlohmann::json& p : c["paired"])
          if (p["metric"] == m["metric"])
            diff = fmt::format(",{},{},{},{}", fmt_num(p["mean"]), fmt_num(p["lo"]), fmt_num(p["hi"]),
                               fmt_num(p["p"]));
      s += diff + "\n";
    }
  return s;
}

nlohmann::json run_study(const StudySpec& spec, const std::string& study_dir, const RunOptions& opt) {
  SAOBP_CHECK(opt.jobs >= 1, "study", "--jobs must be at least 1, got {}", opt.jobs);
  const std::vector<PlannedRun> plan = plan_study(spec, study_dir);
  const fs::path root = fs::absolute(study_dir);
  const int rank = dist::rank(), ranks = dist::size();
  // The rank that runs plan[i] (the file's comment): pretraining runs come first in the plan.
  auto owner = [&](size_t i) {
    const size_t pre = plan[i].pretrain >= 0 ? static_cast<size_t>(plan[i].pretrain) : i;
    return static_cast<int>(pre % static_cast<size_t>(ranks));
  };
  fs::create_directories(root / "logs");
  // Each pretraining run's resolved config, written where its child reads it.
  for (const PlannedRun& r : plan) {
    if (r.config.empty() || rank != 0) continue;
    fs::create_directories(fs::path(r.config).parent_path());
    write_file_atomic(r.config, to_toml(load_config(spec.base, run_overrides(spec, r))));
  }
  if (ranks > 1) dist::barrier();  // the configs are written
  auto say = [&](const std::string& line) {
    if (!opt.quiet) fmt::print("{}\n", line), std::fflush(stdout);
  };
  if (ranks > 1)
    say(fmt::format(
        "study: {} ranks; rank 0 runs (and reports here) {} of the {} runs", ranks,
        std::count_if(plan.begin(), plan.end(),
                      [&](const PlannedRun& r) { return owner(static_cast<size_t>(&r - plan.data())) == 0; }),
        plan.size()));
  // A run is ready when it is not finished and (fine-tuning) its pretraining run is.
  std::vector<int> state(plan.size(), 0);  // 0 pending, 1 running, 2 finished
  std::map<pid_t, size_t> running;
  auto finish = [&](size_t i) {
    if (plan[i].task == "pretrain" && !fs::exists(fs::path(plan[i].run_dir) / "results.json"))
      write_pretrain_results(plan[i]);
    state[i] = 2;
  };
  for (size_t i = 0; i < plan.size(); ++i) {
    if (owner(i) != rank) {
      state[i] = 2;  // another rank's
    } else if (is_finished(plan[i])) {
      state[i] = 2;
      say(fmt::format("study: {} finished earlier", plan[i].id));
    } else if (plan[i].task == "pretrain" &&
               fs::exists(fs::path(plan[i].run_dir) / "final" / "trainer_state.json")) {
      finish(i);
      say(fmt::format("study: {} trained earlier; results read", plan[i].id));
    }
  }
  std::string failure;
  while (true) {
    for (size_t i = 0; i < plan.size() && failure.empty() && running.size() < static_cast<size_t>(opt.jobs);
         ++i) {
      if (state[i] != 0) continue;
      if (plan[i].pretrain >= 0 && state[static_cast<size_t>(plan[i].pretrain)] != 2) continue;
      const std::string resume = last_checkpoint(plan[i].run_dir);
      if (resume.empty()) {
        fs::remove_all(plan[i].run_dir);
      }
      const std::string log = (root / "logs" / (safe_name(plan[i].id) + ".log")).string();
      fs::create_directories(fs::path(log).parent_path());
      const pid_t pid = spawn(opt.binary, child_args(spec, plan, i, resume), log);
      running[pid] = i;
      state[i] = 1;
      say(fmt::format("study: {} {}", plan[i].id,
                      resume.empty() ? "started" : "resumed from " + fs::path(resume).filename().string()));
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      fail("study", "waitpid: {}", std::strerror(errno));
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      finish(i);
      say(fmt::format("study: {} finished", plan[i].id));
    } else if (failure.empty()) {
      failure = fmt::format("run {} failed ({}); its log is {}", plan[i].id,
                            WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WTERMSIG(status)),
                            (root / "logs" / (safe_name(plan[i].id) + ".log")).string());
    }
  }
  if (!failure.empty()) fail("study", "{}", failure);
  if (ranks > 1) {
    dist::idle_barrier();  // every rank's runs are finished
    if (rank != 0) return nlohmann::json::object({{"cells", nlohmann::json::array()}});
    say("study: every rank's runs are finished");
  }
  std::vector<RunRecord> records;
  for (const PlannedRun& r : plan) {
    const std::string path = (fs::path(r.run_dir) / "results.json").string();
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
      fail("study", "{}: {}", path, e.what());
    }
    RunRecord rec{r.id,   r.cell, r.task, r.pretrain >= 0 ? plan[static_cast<size_t>(r.pretrain)].id : "",
                  r.seed, r.axes, {}};
    if (r.task == "pretrain")
      for (const auto& [k, v] : j["metrics"].items())
        rec.metrics.push_back({k, v.is_number() ? v.get<double>() : NAN});
    else
      rec.metrics = finetune_metrics(nlohmann::json::parse(j.dump()));
    records.push_back(rec);
  }
  const nlohmann::json table = aggregate(spec, records);
  write_file_atomic((root / "study.json").string(), table.dump(2) + "\n");
  write_file_atomic((root / "study.csv").string(), table_csv(table));
  write_file_atomic((root / "study.md").string(), table_markdown(table));
  return table;
}

}  // namespace saobp::study
