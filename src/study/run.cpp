// The study runner of src/study/study.h: the child processes, what they leave in their run
// folders, and run_study.
//
// Determinism: every run is an ordinary `saobp train` (or `saobp finetune`) process whose result
// is a function of its config alone (docs/engine.md), so neither the number of processes nor the
// order they finish in changes any number; the table is built from the runs' files in plan order,
// and holds no times or absolute paths, so an interrupted and resumed study writes the same bytes
// as an uninterrupted one.
//
// Resumption, per run: a folder holding a run trained with another config than the planned one
// (an edited study file) is refused, naming the keys (check_reusable); results.json present ->
// finished, not run again; the final checkpoint
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
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "dist/comm.h"
#include "study/study.h"
#include "train/config.h"

namespace fs = std::filesystem;

namespace saobp::study {

namespace {

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

// Starts `binary args...` with stdout and stderr into `log`; the child dies with the study
// (PR_SET_PDEATHSIG), so a killed study leaves no orphan writing into its run folders.
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

// The config a run folder's run was trained with: its final/config.toml, else its last complete
// checkpoint's; "" when it holds neither (nothing trained there to reuse).
std::string trained_config(const std::string& run_dir) {
  std::error_code ec;
  const fs::path final_config = fs::path(run_dir) / "final" / "config.toml";
  if (fs::exists(final_config, ec)) return final_config.string();
  const std::string checkpoint = last_checkpoint(run_dir);
  return checkpoint.empty() ? "" : (fs::path(checkpoint) / "config.toml").string();
}

// A run folder that a study would reuse (finished, trained, or resumed from a checkpoint) must
// hold the run the study now plans: the config it was trained with against the planned one
// (pretraining: the resolved config file; fine-tuning: the saved config under the task's
// overrides and seed). Refuses naming the folder and every differing key, so an edited study file
// never reports the old runs' numbers under the new config.
void check_reusable(const StudySpec& spec, const PlannedRun& r) {
  const std::string saved_path = trained_config(r.run_dir);
  if (saved_path.empty()) return;
  const std::string advice =
      fmt::format("; remove {} to run it again, or give the study another --out", r.run_dir);
  RunConfig saved, planned;
  try {
    saved = load_config(saved_path, {}, FitCheck::no);
    if (r.task == "pretrain") {
      planned = load_config(spec.base, run_overrides(spec, r), FitCheck::no);
    } else {
      std::vector<std::string> o;
      for (const FinetuneSpec& f : spec.finetune)
        if (f.task == r.task) o = f.overrides;
      o.push_back("train.seed=" + std::to_string(r.seed));
      planned = load_config(saved_path, o, FitCheck::no);
    }
  } catch (const Error& e) {
    fail("study", "{}: run folder {}: {} does not load against the study's plan ({}){}", spec.file, r.run_dir,
         saved_path, e.what(), advice);
  }
  std::vector<std::string> changed;
  for (const ConfigDifference& d : hashed_differences(saved, planned))
    if (!leaves_results_unchanged(d.key))  // a copied study folder's runs name their old folder
      changed.push_back(fmt::format("{} = {} there, {} in the study", d.key, d.a, d.b));
  if (!changed.empty())
    fail("study", "{}: run folder {} holds a run trained with another config than the study plans ({}): {}{}",
         spec.file, r.run_dir, saved_path, fmt::join(changed, "; "), advice);
}

// Writes a pretraining run's results.json from its metrics.jsonl once its final checkpoint exists.
void write_pretrain_results(const PlannedRun& r) {
  const RunConfig cfg = load_config(r.config);
  // ordered_json: the metrics keep their order (loss, accuracy, perplexity, entropy and GTD by layer).
  nlohmann::ordered_json out = {
      {"task", "pretrain"}, {"step", cfg.train.max_steps}, {"metrics", nlohmann::ordered_json::object()}};
  for (const auto& [k, v] : pretrain_metrics(r.run_dir, cfg.train.max_steps)) out["metrics"][k] = v;
  write_file_atomic((fs::path(r.run_dir) / "results.json").string(), out.dump(2) + "\n");
}

}  // namespace

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
    check_json_depth(line, path, "study", lineno);
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("study", "{}:{}: {}", path, lineno, e.what());
    }
    if (!j.contains("eval_loss")) continue;
    // The step, read by value() below and in correlate: an integer or absent (not "x", not 1e300).
    (void)JsonFields(j, fmt::format("{}:{}", path, lineno), "study").integer("step", 0);
    out.push_back(j);
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
  for (const char* key : {"entropy", "gtd", "cross_gtd"}) {
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
  // What the folder holds from an earlier call must be what the study plans, checked before the
  // configs are written (a refused study leaves the folder as it was). A fine-tuning run left
  // behind from a pretraining run that is to be trained again is not the planned run either.
  for (const PlannedRun& r : plan) {
    check_reusable(spec, r);
    if (r.pretrain < 0 || !(is_finished(r) || !trained_config(r.run_dir).empty())) continue;
    const PlannedRun& from = plan[static_cast<size_t>(r.pretrain)];
    if (!is_finished(from) && !fs::exists(fs::path(from.run_dir) / "final" / "trainer_state.json"))
      fail("study",
           "{}: run folder {} holds a fine-tuning run of an earlier {}, which is to be trained again; remove "
           "{} "
           "to run it again, or give the study another --out",
           spec.file, r.run_dir, from.id, r.run_dir);
  }
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
      continue;
    }
    if (is_finished(plan[i])) {
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
      j = read_json_file<nlohmann::ordered_json>(path, "study");
    } catch (const nlohmann::json::exception& e) {
      fail("study", "{}: {}", path, e.what());
    }
    // A results.json handed back (a resumed study reads what its runs left): an object, and a
    // pretraining run's with a "metrics" object; named otherwise.
    if (!j.is_object()) fail("study", "{}: the top level is {}, not an object", path, json_excerpt(j));
    const auto metrics = j.find("metrics");
    if (r.task == "pretrain" && (metrics == j.end() || !metrics->is_object()))
      fail("study", "{}: \"metrics\" is {}, not an object of name: value", path,
           metrics == j.end() ? "missing" : json_excerpt(*metrics));
    RunRecord rec{r.id,   r.cell, r.task, r.pretrain >= 0 ? plan[static_cast<size_t>(r.pretrain)].id : "",
                  r.seed, r.axes, {}};
    if (r.task == "pretrain")
      for (const auto& [k, v] : metrics->items())
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
