// The training loop: AdamW with warmup + cosine, global-norm clipping, gradient accumulation,
// periodic evaluation, metrics (stdout and RUN_DIR/metrics.jsonl) and checkpoints, resumable so
// that a resumed run ends bitwise where an uninterrupted one does (on the CPU).
//
// Step s uses the learning rate lr_at(schedule, s), the training batches data_position ..
// data_position + K - 1, and dropout keys of (seed, site, s · K + micro), K = grad_accum x the
// number of ranks: all pure functions of the saved (step, data_position), so nothing else needs
// saving. Under mpirun each rank takes grad_accum of the K micro-batches, and the gradients are
// summed as grad_sum.h says (docs/distributed.md).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "train/config.h"
#include "train/task.h"

namespace saobp {

struct TrainOptions {
  std::string resume_dir;      // continue this checkpoint's run (same config hash required)
  std::string init_dir;        // start a new run from this checkpoint's weights
  bool progress = false;       // a progress bar with ETA (when stdout is a terminal)
  bool quiet = false;          // no per-step log lines (tests)
  bool resume_latest = false;  // resume_dir = the latest complete checkpoint of train.run_dir
  bool overwrite = false;      // a new run may replace what train.run_dir holds
};

struct TrainSummary {
  int64_t steps = 0;
  double last_loss = 0;
  std::vector<double> losses;  // the training loss of every step this run took
  std::string final_checkpoint;
  nlohmann::json init_report;         // --init: what was loaded, initialized and left unused
  std::vector<nlohmann::json> evals;  // every evaluation's metrics.jsonl line, in order
  nlohmann::json final_eval;          // the task's final evaluation (null when it has none)
};

// A new run (neither resume_dir nor resume_latest) refuses a train.run_dir that holds anything
// but the reusable data folders (cache/, tokenizer/). With `overwrite` it replaces an earlier run
// there: it removes the entries a run writes (is_run_output) and leaves any other file alone, and
// refuses a folder that holds no run, or whose run holds an input (--init, data.path, data.vocab).
// A resumed run appends to metrics.jsonl. Every start first finishes or undoes the saves a
// killed run left half-swapped in train.run_dir (recover_interrupted_saves) and says so.
TrainSummary train(const RunConfig& cfg, const TrainOptions& opt);

// Held-out loss, MLM accuracy and perplexity of a checkpoint (its own config.toml, plus
// overrides), over train.eval_batches batches of the validation stream; with `print`, also
// prints them and runs the task's final evaluation (the long-range tasks' accuracy per length,
// printed; nothing is written into `dir`, whose task_eval.json stays the one training wrote).
// A model without a position table (RoPE) may be read with another model.max_positions
// (check_checkpoint_config).
EvalResult evaluate_checkpoint(const std::string& dir, const std::vector<std::string>& overrides,
                               bool print = false);

}  // namespace saobp
