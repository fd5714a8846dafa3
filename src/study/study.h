// Seed studies: a grid of ordinary runs over optional axes (any config key: attention variants,
// regularizers, λ, ...), seeds and tasks (pretraining, then optionally fine-tuning each pretrained
// run), run as child processes of the saobp binary, resumable, ending in one table of per-cell
// statistics with a paired test of every variant against the baseline. docs/studies.md gives the
// study file format and the table's columns.
//
//   load_study:  STUDY.toml -> StudySpec (errors name the file and the key)
//   plan_study:  StudySpec -> every run (its folder, its command line), in a fixed order
//   run_study:   runs what is not finished (resuming interrupted runs from their last
//                checkpoint), at most `jobs` at a time, then writes study.{json,csv,md}
//   aggregate:   the finished runs' metrics -> the table (pure: the tests feed it values)
// plan.cpp holds the first two, run.cpp the runner and the readers of run folders, table.cpp the
// table and its writers.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace saobp::study {

// One fine-tuning task applied to every pretrained run of the study (`saobp finetune`).
struct FinetuneSpec {
  std::string task;                    // a benchmark name (glue/sst2, ...)
  std::string data;                    // its folder, absolute
  std::vector<std::string> overrides;  // section.key=value on the task's recipe
};

struct StudySpec {
  std::string file;                    // the study file (for messages)
  std::string name;                    // [study] name (default: the file's stem)
  std::string base;                    // the base run config, absolute ("" = the defaults)
  std::vector<std::string> overrides;  // applied to every pretraining run, before the axes
  std::vector<int64_t> seeds = {0};    // train.seed of each repetition
  // [variants]: named bundles of overrides in the file's order ("entropy_reg" ->
  // ["train.regularizer=entropy", ...]), one axis named "variant" ahead of the others. A grid
  // cannot say "softmax with a regularizer" beside "BP-High without one"; a bundle can.
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;
  // The axes in the file's order: config key -> override values ("bp_high", "0.2", ...).
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  // What the paired test compares: a config key (an axis) or "variant"; the default is
  // "variant" when the file has [variants], else "model.attention".
  std::string compare_key = "model.attention", baseline = "original";
  // [study] max_runs: plan_study refuses a grid of more runs (pretraining and fine-tuning), so a
  // mistyped axis cannot start planning a million runs.
  int64_t max_runs = 1000;
  std::vector<FinetuneSpec> finetune;
};

StudySpec load_study(const std::string& path);

// A cell or run name as a safe relative path: anything but [A-Za-z0-9._=,+-] replaced by '_'; a
// name longer than 100 bytes is cut to 80 and ends in '-' and the FNV-1a 64 of the whole name in
// hex, so a folder name stays within NAME_MAX and two long names stay apart.
std::string safe_name(std::string s);

struct PlannedRun {
  std::string id;    // "<cell folder>/seed-<s>": unique, a relative path under the study folder
  std::string cell;  // the cell's name: its axis values and task
  std::string task;  // "pretrain" or a fine-tuning task
  int64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> axes;  // key, value
  std::string run_dir;                                    // absolute
  std::string config;  // pretraining: the resolved config file the child trains from
  int pretrain = -1;   // fine-tuning: the index of the pretraining run it starts from
};

// The overrides of a pretraining run, in the order they apply: the study's, then each axis value
// (a variant's bundle in its place), then the seed and the run folder.
std::vector<std::string> run_overrides(const StudySpec& spec, const PlannedRun& r);

// Every run, pretraining runs first (cells in axis order, then seeds), then fine-tuning runs.
// Resolves each pretraining config (load_config), so a bad key fails here, before any run.
std::vector<PlannedRun> plan_study(const StudySpec& spec, const std::string& study_dir);

// What a child process is given: argv after the binary (`train CONFIG --quiet [--resume DIR]`
// or `finetune --init ... [--resume DIR]`); `resume` is "" for a fresh start.
std::vector<std::string> child_args(const StudySpec& spec, const std::vector<PlannedRun>& plan, size_t i,
                                    const std::string& resume);

// The last complete checkpoint-N of a run folder (model, optimizer and trainer state present), or "".
std::string last_checkpoint(const std::string& run_dir);

// One finished run's metrics, flattened to names ("loss", "entropy_L1", "dev.accuracy", ...).
struct RunRecord {
  std::string id, cell, task;
  std::string from;  // fine-tuning: the id of the pretraining run it started from
  int64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> axes;
  std::vector<std::pair<std::string, double>> metrics;
};

// The evaluation lines of RUN_DIR/metrics.jsonl in file order (a resumed run may repeat a step:
// the same values). Throws naming the file and line of a line that is not JSON.
std::vector<nlohmann::json> read_eval_lines(const std::string& run_dir);
// The metrics of a finished pretraining run: the evaluation line of metrics.jsonl at the run's
// last step (loss, accuracy, perplexity, entropy and GTD per layer, a task's metrics).
std::vector<std::pair<std::string, double>> pretrain_metrics(const std::string& run_dir, int64_t last_step);
// The metrics of one evaluation line of metrics.jsonl ("loss", "accuracy", "perplexity",
// "entropy_L<l>", "gtd_L<l>", "cross_gtd_L<l>", a task's "<split>.<name>").
std::vector<std::pair<std::string, double>> eval_line_metrics(const nlohmann::json& line);
// The metrics of a fine-tuning results.json ({"metrics": {split: {name: value}}} -> "split.name").
std::vector<std::pair<std::string, double>> finetune_metrics(const nlohmann::json& results);

// The table: {"study", "compare": {key, baseline}, "seeds", "cells": [{"cell", "task", "axes",
// "runs", "from" (fine-tuning cells: each run's pretraining run), "metrics": [{metric, n, mean, sd}],
// "paired": [{metric, n, mean, sd, lo, hi, t, p}]}]}.
// "paired" compares the cell with the one that differs only in compare_key = baseline, over the
// seeds both have (a - baseline); absent in the baseline's own cells.
nlohmann::json aggregate(const StudySpec& spec, const std::vector<RunRecord>& runs);

// study.md and study.csv of an aggregate() table.
std::string table_markdown(const nlohmann::json& table);
std::string table_csv(const nlohmann::json& table);

struct RunOptions {
  std::string binary;  // the saobp binary the children run
  int jobs = 1;
  bool quiet = false;  // no per-run lines
};

// Runs the study into `study_dir` and writes study.json, study.csv and study.md (atomically).
// Returns the table. A child that fails stops the study with an error naming the run and its log
// (the runs already finished stay finished). Under mpirun the ranks share the runs out (`jobs`
// at a time each) and rank 0 writes the table; the other ranks return one with no cells.
nlohmann::json run_study(const StudySpec& spec, const std::string& study_dir, const RunOptions& opt);

}  // namespace saobp::study
