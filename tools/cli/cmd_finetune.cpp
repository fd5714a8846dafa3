// `saobp finetune --init DIR --task NAME --data DIR [section.key=value ...]` and the benchmark
// side of `saobp eval` (--task, --data, --zero-shot): src/finetune/finetune.h.
#include <filesystem>
#include <map>

#include "cli/commands.h"
#include "core/fs.h"
#include "core/json.h"
#include "finetune/benchmark.h"
#include "finetune/finetune.h"
#include "finetune/metrics.h"

namespace saobp::cli {

namespace {

std::string task_list() {
  std::string s;
  for (const std::string& n : finetune::benchmark_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void register_finetune(CLI::App& app) {
  static finetune::FinetuneOptions o;
  CLI::App* sub = app.add_subcommand("finetune",
                                     "Fine-tune a pretrained model (ours or a Hugging Face folder) on a "
                                     "benchmark; writes RUN_DIR/results.json");
  sub->add_option("--init", o.init, "the pretrained model folder")->required();
  sub->add_option("--task", o.task, "the benchmark: " + task_list())->required();
  sub->add_option("--data", o.data, "the benchmark's files as distributed (docs/finetune.md)")->required();
  sub->add_option("--recipe", o.recipe, "a recipe TOML replacing the task's (configs/finetune/)");
  CLI::Option* resume = add_resume_options(sub, o.resume, o.overwrite);
  sub->add_option("overrides", o.overrides, "section.key=value settings that replace the recipe's");
  sub->add_flag("--quiet", o.quiet, "no per-step log lines");
  const auto run = [resume] {
    o.resume_latest = resume->count() > 0 && o.resume.empty();
    check_input_folder("finetune", "--init", o.init);
    const nlohmann::json r = finetune::run_finetune(o);
    fmt::print("results: {}/results.json\n", r["run_dir"].get<std::string>());
    return 0;
  };
  add_command(sub, run, Ranks::every);  // data-parallel, as train
}

// `saobp glue-score RESULTS...`: the GLUE leaderboard average of fine-tuning results.json files
// (one per task; the dev metrics of each), with each task's score, and beside it the SAOBP
// paper's plain mean of one number per task (metrics::glue_average: score, plain_mean).
void register_glue_score(CLI::App& app) {
  static std::vector<std::string> files;
  CLI::App* sub =
      app.add_subcommand("glue-score", "The GLUE average of glue/* results.json files (one per task)");
  sub->add_option("results", files, "results.json files (or run folders holding one)")->required();
  add_command(sub, [] {
    std::map<std::string, nlohmann::json> per_task;
    for (std::string f : files) {
      if (std::filesystem::is_directory(f)) f = (std::filesystem::path(f) / "results.json").string();
      nlohmann::json r;
      try {
        r = read_json_file(f, "glue-score");
      } catch (const nlohmann::json::exception& e) {
        fail("glue-score", "{}: {}", f, e.what());
      }
      const JsonFields results(r, f, "glue-score");
      const std::string task = results.string("task", "");
      if (task.rfind("glue/", 0) != 0 || !r.contains("metrics"))
        fail("glue-score", "{}: not the results of a glue/* task (task '{}')", f, task);
      const std::string name = task.substr(5);
      if (per_task.count(name)) fail("glue-score", "{}: a second result for {}", f, task);
      // Each split's metrics: an object of name: number (metrics::glue_average reads them).
      const JsonFields m(r["metrics"], f + ": metrics", "glue-score");
      const auto split = [&](const char* key) {
        const nlohmann::json* s = m.find(key);
        if (!s) fail("glue-score", "{}: no {} metrics", f, key);
        if (!s->is_object()) m.type_error(key, "an object of metric: number", *s);
        return *s;
      };
      if (name == "mnli")
        per_task[name] = {{"matched", split("dev_matched")}, {"mismatched", split("dev_mismatched")}};
      else
        per_task[name] = split("dev");
      // The task's score from this file's metrics (a metric that is not a number: named with the file).
      try {
        if (name != "ax") (void)metrics::glue_task_score(name, per_task[name]);
      } catch (const Error& e) {
        fail("glue-score", "{}: {}", f, e.what());
      }
    }
    const nlohmann::json avg = metrics::glue_average(per_task);
    fmt::print("{}\n", avg.dump(2));
    return 0;
  });
}

int run_benchmark_eval(const std::string& checkpoint, const std::string& task, const std::string& data,
                       bool zero_shot, const std::vector<std::string>& overrides, std::string out) {
  if (data.empty()) throw CLI::ValidationError("--task needs --data: the benchmark's files");
  if (out.empty()) {
    std::string slug = task;
    for (char& c : slug)
      if (c == '/') c = '-';
    out = (std::filesystem::path("runs/eval") / (slug + (zero_shot ? "-zero-shot" : "")) / "results.json")
              .string();
  }
  // Before the evaluation: a --out that cannot be written fails now, not after it.
  check_output_file("eval", "--out", out);
  finetune::EvalOptions e{checkpoint, task, data, zero_shot, overrides, true};
  nlohmann::json r = finetune::evaluate_benchmark(e);
  const std::filesystem::path p(out);
  std::error_code ec;
  if (p.has_parent_path() && !std::filesystem::create_directories(p.parent_path(), ec) && ec)
    fail("eval", "--out {}: cannot create {}: {}", out, p.parent_path().string(), ec.message());
  const std::vector<std::string> predictions = finetune::write_predictions(r, p.parent_path().string());
  try {
    write_file_atomic(out, r.dump(2) + "\n");
  } catch (const Error&) {
    // No prediction files without the results.json they belong to.
    for (const std::string& f : predictions) std::filesystem::remove(f, ec);
    throw;
  }
  fmt::print("results: {}\n", out);
  return 0;
}

}  // namespace saobp::cli
