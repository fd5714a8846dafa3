// Fine-tuning and benchmark evaluation: the public surface of src/finetune/ used by the
// command line (`saobp finetune`, `saobp eval --task`). docs/finetune.md has the protocol.
//
//   finetune: pretrained folder (ours or Hugging Face's) + task recipe + overrides -> a run
//             config (data.kind = "benchmark"), trained by the ordinary loop (train/trainer.h)
//             with --init, ending in RUN_DIR/results.json;
//   evaluate: a fine-tuned checkpoint on a task's evaluation splits; a decoder zero-shot
//             (candidates scored by their log-likelihood) or on WikiText (perplexity).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train/analysis.h"
#include "train/config.h"
#include "train/task.h"

namespace saobp::finetune {

// configs/finetune/*.toml, compiled in: (stem, text).
const std::vector<std::pair<std::string, std::string>>& recipes();
// The text of a recipe by stem; throws naming the recipes.
const std::string& recipe_text(const std::string& stem);

struct FinetuneOptions {
  std::string init;    // the pretrained folder (--init)
  std::string task;    // a benchmark name
  std::string data;    // the benchmark's folder (or file)
  std::string recipe;  // a recipe file replacing the task's compiled-in one ("" = compiled in)
  std::vector<std::string> overrides;
  std::string resume;          // continue this checkpoint of the run instead (--resume)
  bool resume_latest = false;  // continue the run's latest complete checkpoint (--resume, no value)
  bool overwrite = false;      // replace what the run directory holds (--overwrite)
  bool quiet = false;
};

// The run config of a fine-tuning run: the recipe, the pretrained model's [model] section,
// data.kind/task/path/vocab, train.run_dir = runs/finetune/<task>, then the overrides (which win).
// train.seq_len is lowered to model.max_positions (learned positions) unless overridden; when the
// input is shorter than the recipe's, data.max_query_length, data.doc_stride and
// data.window_stride (those not overridden) are scaled by the same ratio. --data and --init are
// set byte for byte (config.h's exact_string_override).
RunConfig finetune_config(const FinetuneOptions& o);

// Trains (train/trainer.h) and writes RUN_DIR/results.json: {"task", "metrics": {split:
// {...}}, "epochs": [...], "examples", "truncated", "skipped_rows", "init", ...}. Returns it.
// Moves a benchmark's per-example answers out of its results `r` into files of `dir`, as the
// official scripts read them: SQuAD's predictions.json (question id -> answer text, "" = no answer)
// for evaluate-v1.1.py / evaluate-v2.0.py and, v2.0, null_odds.json (id -> the null answer's score
// minus the best span's, their --na-prob-file); predictions_<split>.json when several splits
// were evaluated. The other tasks: predictions_<split>.jsonl for every split evaluated or
// predicted (r["example_predictions"]), and GLUE's test splits as the leaderboard's files
// (r["glue_submission"]: SST-2.tsv, MNLI-m.tsv, AX.tsv, ...; finetune/predictions.h).
// r["prediction_files"] lists the paths written; returns them. A write that fails removes the files
// written before it (all of the set or none) and throws.
std::vector<std::string> write_predictions(nlohmann::json& r, const std::string& dir);

nlohmann::json run_finetune(const FinetuneOptions& o);

// `saobp analyze --data TASK:DIR`: the rows that fine-tuning feeds a model (inputs.h), from split
// `split` of benchmark `task` in `dir` ("" = the task's first evaluation split) read by the same
// readers, with the lengths of the task's recipe fitted to the checkpoint's model as `finetune
// --init` fits them (max_length > 0 sets train.seq_len first). A multiple-choice example gives one
// row per ending, in example order; SQuAD one row per context chunk.
InputRowsFn benchmark_rows(const std::string& checkpoint, const std::string& task, const std::string& dir,
                           const std::string& split, int64_t max_length);

struct EvalOptions {
  std::string checkpoint;
  std::string task;
  std::string data;
  bool zero_shot = false;
  std::vector<std::string> overrides;
  bool print = true;
};
// The results.json object of `saobp eval --task`.
nlohmann::json evaluate_benchmark(const EvalOptions& o);

// Registers the task of data.kind "benchmark" (finetune_task.cpp) with make_task
// (train/task.h). A program calls it once at start, before it trains, evaluates or analyzes a
// fine-tuning run: the saobp binary (tools/cli/main.cpp) and the test runner do.
void register_tasks();

// A finetune task that reads only the evaluation splits (finetune_task.cpp).
std::unique_ptr<Task> make_eval_task(const RunConfig& cfg);

}  // namespace saobp::finetune
