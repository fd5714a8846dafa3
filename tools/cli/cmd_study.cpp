// `saobp study STUDY.toml [--out DIR] [--jobs N]`: a grid of runs with one table at the end, and
// `saobp correlate --x METRIC --y METRIC SOURCE...`: the correlation of two metrics over runs or
// checkpoints, and `saobp cost CONFIG --variants ...`: the FLOP table of the paper's Table 9 with
// the times of `saobp bench --json` files (src/study/; docs/studies.md, docs/performance.md).
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "core/fs.h"
#include "study/correlate.h"
#include "study/cost.h"
#include "study/study.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace saobp::cli {

void register_study(CLI::App& app) {
  static std::string file, out;
  static int jobs = 1;
  static bool quiet = false;
  CLI::App* sub = app.add_subcommand(
      "study",
      "Run a study (variants x regularizers x λ x seeds x tasks, docs/studies.md), resumably, and write "
      "study.{md,csv,json}");
  sub->add_option("study", file, "the study file (TOML)")->required();
  sub->add_option("--out", out, "the study folder (default: studies/<the study's name>)")
      ->check(non_empty_path());
  sub->add_option("--jobs", jobs, "runs at a time, each its own process (results do not depend on it)")
      ->capture_default_str();
  sub->add_flag("--quiet", quiet, "no per-run lines");
  const auto run = [] {
    if (jobs < 1) throw CLI::ValidationError("--jobs", "must be at least 1");
    const study::StudySpec spec = study::load_study(file);
    const std::string dir = out.empty() ? "studies/" + spec.name : out;
    const std::string binary = std::filesystem::read_symlink("/proc/self/exe").string();
    const nlohmann::json table = study::run_study(spec, dir, {binary, jobs, quiet});
    fmt::print("study {}: {} cells; {}/study.md, study.csv, study.json\n", spec.name, table["cells"].size(),
               dir);
    return 0;
  };
  add_command(sub, run, Ranks::every);  // the ranks share the runs out (study.h)
}

void register_correlate(CLI::App& app) {
  static std::string x, y, out;
  static std::vector<std::string> sources;
  static study::CorrelateOptions opt;
  CLI::App* sub = app.add_subcommand("correlate",
                                     "Pearson r (with p-value) and Spearman rho of two metrics over study "
                                     "runs, checkpoints or (sample, head) "
                                     "rows");
  sub->add_option("sources", sources,
                  "study folders (one point per run), run folders (one per evaluation) or analysis folders "
                  "(one per sample, layer and head of per_sample.csv)")
      ->required();
  sub->add_option("--layer", opt.layers, "analysis folders: only these layers (default: all)")
      ->check(at_least(0));
  sub->add_option("--from-step", opt.from_step, "run folders: only the evaluations at this step or later")
      ->check(at_least(0));
  sub->add_option(
         "--x", x,
         "the metric on the x axis, e.g. entropy_L1 (TASK:NAME for a fine-tuning metric; gtd, A.gtd, "
         "clustering, ... for an analysis folder)")
      ->required();
  sub->add_option("--y", y, "the metric on the y axis, e.g. glue/sst2:dev.accuracy")->required();
  sub->add_option("--out", out, "also write the points and statistics to this JSON file")
      ->check(non_empty_path());
  add_command(sub, [] {
    refuse_output_over_inputs(out, "--out", sources);
    const nlohmann::json c = study::correlate_sources(sources, x, y, opt);
    fmt::print(
        "{} against {} over {} ({} points, {} left out): Pearson r = {:.4f} (p = {:.4g}), Spearman rho = "
        "{:.4f}\n",
        y, x, c["over"].get<std::string>(), c["n"].get<int64_t>(), c["left_out"].get<int64_t>(),
        c["pearson_r"].is_number() ? c["pearson_r"].get<double>() : NAN,
        c["pearson_p"].is_number() ? c["pearson_p"].get<double>() : NAN,
        c["spearman_rho"].is_number() ? c["spearman_rho"].get<double>() : NAN);
    if (!out.empty()) {
      const std::filesystem::path p(out);
      if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
      write_file_atomic(out, c.dump(2) + "\n");
    }
    return 0;
  });
}

void register_cost(CLI::App& app) {
  static std::string config, out;
  static std::vector<std::string> overrides, benches;
  static std::vector<std::string> variants = {"original", "bp_high", "bp_low", "bp_elemmul"};
  CLI::App* sub = app.add_subcommand(
      "cost",
      "FLOPs per training step and per inference batch of each attention variant (the paper's Table 9)");
  sub->add_option("config", config, "the run config (model, batch size, sequence length)")->required();
  sub->add_option("overrides", overrides, "section.key=value settings that replace the file's");
  sub->add_option("--variants", variants, "attention variants")->delimiter(',')->capture_default_str();
  sub->add_option("--bench", benches,
                  "`saobp bench --json` files of these variants: their ms/step and tokens/s");
  sub->add_option("--out", out, "also write the table as JSON (saobp report draws it)")
      ->check(non_empty_path());
  add_command(sub, [] {
    std::vector<std::string> inputs = benches;
    inputs.push_back(config);
    refuse_output_over_inputs(out, "--out", inputs);
    const nlohmann::json t =
        study::cost_table(load_config(config, overrides, FitCheck::no), variants, benches);
    fmt::print("{}", study::cost_markdown(t));
    if (!out.empty()) {
      const std::filesystem::path p(out);
      if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
      write_file_atomic(out, t.dump(2) + "\n");
    }
    return 0;
  });
}

}  // namespace saobp::cli
