// The study file and the plan of src/study/study.h: load_study reads STUDY.toml (errors name
// the file and the key), plan_study lays out every run (its folder, its config, its command line)
// in a fixed order.
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/checked.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "study/study.h"
#include "train/config.h"

namespace fs = std::filesystem;

namespace saobp::study {

namespace {

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

// The keys the study sets on every run itself (run_overrides, child_args): an override or axis
// on one would be overridden, so cells apart only there would run the same run.
void check_study_keys(const StudySpec& s) {
  auto check = [&](const std::string& key, const std::string& where) {
    if (key == "train.seed")
      fail("study",
           "{}: {} sets train.seed, which the study sets for each run from study.seeds; list the seeds "
           "in study.seeds instead",
           s.file, where);
    if (key == "train.run_dir")
      fail("study",
           "{}: {} sets train.run_dir, which the study sets for each run (runs/<cell>/seed-N under "
           "its folder); give the study's folder with --out instead",
           s.file, where);
  };
  auto key_of = [](const std::string& o) {
    std::string k = o.substr(0, o.find('='));
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.front()))) k.erase(0, 1);
    return k;
  };
  for (const std::string& o : s.overrides) check(key_of(o), "study.overrides ('" + o + "')");
  for (const auto& [name, bundle] : s.variants)
    for (const std::string& o : bundle) check(key_of(o), "variants." + name + " ('" + o + "')");
  for (const auto& axis : s.axes) check(axis.first, "the axis \"" + axis.first + "\"");
  for (const FinetuneSpec& f : s.finetune)
    for (const std::string& o : f.overrides)
      check(key_of(o), "finetune." + f.task + " overrides ('" + o + "')");
}

}  // namespace

// Cell names are key=value pairs joined by ','.
std::string safe_name(std::string s) {
  const uint64_t whole = fnv1a64(s);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr("._=,+-", c)) c = '_';
  if (s.size() > 100) s = fmt::format("{}-{:016x}", s.substr(0, 80), whole);
  return s;
}

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
    check_keys(*t, {"name", "base", "overrides", "seeds", "compare", "baseline", "max_runs"}, path, "study");
    s.name = string_key(*t, "name", path, "study", s.name);
    // The name is the study's folder under studies/: one path component.
    if (s.name.empty() || s.name == "." || s.name == ".." || s.name.find('/') != std::string::npos ||
        s.name.find('\0') != std::string::npos || s.name.size() > 200)
      fail("study", "{}: study.name '{}' is not a folder name (one path component: no '/', not '.' or '..')",
           path, s.name);
    if (const toml::node* m = t->get("max_runs")) {
      const std::optional<int64_t> v = m->value<int64_t>();
      if (!m->is_integer() || !v || *v < 1)
        fail("study", "{}: study.max_runs must be a positive integer", path);
      s.max_runs = *v;
    }
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
  // An explicit compare names an axis (or "variant"), and its baseline one of that axis's values:
  // otherwise the table's paired differences name a baseline cell that no run has.
  const toml::table* study_table = root.get("study") ? root.get("study")->as_table() : nullptr;
  if (s.compare_key != "variant" && study_table &&
      (study_table->get("compare") || study_table->get("baseline"))) {
    const auto axis =
        std::find_if(s.axes.begin(), s.axes.end(), [&](const auto& a) { return a.first == s.compare_key; });
    if (axis == s.axes.end())
      fail("study", "{}: study.compare '{}' is not an axis of the study (nor \"variant\" with [variants])",
           path, s.compare_key);
    if (!std::count(axis->second.begin(), axis->second.end(), s.baseline))
      fail("study", "{}: study.baseline '{}' is not a value of the axis \"{}\"", path, s.baseline,
           s.compare_key);
  }
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
  check_study_keys(s);
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
  o.push_back(exact_string_override("train.run_dir", r.run_dir, "the study folder"));
  return o;
}

std::vector<PlannedRun> plan_study(const StudySpec& spec, const std::string& study_dir) {
  const fs::path root = fs::absolute(study_dir);
  // Count the runs before laying any out: cells x seeds x (pretraining + each fine-tuning task).
  std::optional<int64_t> runs =
      static_cast<int64_t>(spec.seeds.size()) * (1 + static_cast<int64_t>(spec.finetune.size()));
  if (!spec.variants.empty()) runs = checked_mul(*runs, static_cast<int64_t>(spec.variants.size()));
  for (const auto& axis : spec.axes)
    if (runs) runs = checked_mul(*runs, static_cast<int64_t>(axis.second.size()));
  if (!runs || *runs > spec.max_runs)
    fail(
        "study",
        "{}: the grid has {} runs, more than study.max_runs = {}; check the axes, or raise study.max_runs in "
        "[study] to plan it",
        spec.file, runs ? fmt::format("{}", *runs) : "more than 2^63", spec.max_runs);
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
  // The cell's folder: its name through safe_name, each value that safe_name would change
  // followed by '-' and 8 hex digits of its FNV-1a 64, so that values apart only in replaced
  // characters ("a b", "a_b", "a/b") keep folders of their own; a clean value's folder is its name.
  auto cell_folder = [](const std::vector<std::pair<std::string, std::string>>& axes,
                        const std::string& task) {
    std::string s;
    for (const auto& [k, v] : axes) {
      s += (s.empty() ? "" : ",") + k + "=" + v;
      if (safe_name(v) != v) s += fmt::format("-{:08x}", fnv1a64(v) & 0xffffffffu);
    }
    if (s.empty()) s = "base";
    return safe_name(task == "pretrain" ? s : s + ",task=" + task);
  };
  std::vector<PlannedRun> plan;
  for (const auto& axes : cells)
    for (int64_t seed : spec.seeds) {
      PlannedRun r;
      r.cell = cell_name(axes, "pretrain");
      r.task = "pretrain";
      r.seed = seed;
      r.axes = axes;
      r.id = cell_folder(axes, "pretrain") + "/seed-" + std::to_string(seed);
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
      // Each run's config is resolved here: a large grid says how far it is.
      if (*runs > 200 && plan.size() % 100 == 0)
        fmt::print(stderr, "study: planned {} of {} pretraining runs\n", plan.size(),
                   *runs / (1 + spec.finetune.size()));
    }
  const size_t n_pretrain = plan.size();
  for (const FinetuneSpec& f : spec.finetune)
    for (size_t i = 0; i < n_pretrain; ++i) {
      PlannedRun r = plan[i];
      r.task = f.task;
      r.cell = cell_name(r.axes, f.task);
      r.id = cell_folder(r.axes, f.task) + "/seed-" + std::to_string(r.seed);
      r.run_dir = (root / "runs" / r.id).string();
      r.config.clear();
      r.pretrain = static_cast<int>(i);
      plan.push_back(r);
    }
  // Two cells in one folder would overwrite each other's runs and the table would report one run
  // for both: refuse before any run starts (a collision of the 8 hex digits above ends here).
  std::map<std::string, const PlannedRun*> by_id;
  for (const PlannedRun& r : plan) {
    const auto [it, inserted] = by_id.emplace(r.id, &r);
    if (!inserted && it->second->cell != r.cell)
      fail("study",
           "{}: the cells '{}' and '{}' map to one run folder runs/{}; make their values differ in more than "
           "the characters outside [A-Za-z0-9._=,+-]",
           spec.file, it->second->cell, r.cell, r.id);
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
    a.push_back(exact_string_override("train.run_dir", r.run_dir, "the study folder"));
  }
  if (!resume.empty()) a.insert(a.end(), {"--resume", resume});
  return a;
}

}  // namespace saobp::study
