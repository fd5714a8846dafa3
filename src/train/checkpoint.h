// Checkpoints: one directory per save, assembled under a temporary name and renamed into place
// when complete, so a crash never leaves a half-written checkpoint and the last good one stays.
//
//   model.safetensors      parameters under their Hugging Face names and layouts
//   optimizer.safetensors  AdamW moments: "<name>.exp_avg", "<name>.exp_avg_sq"
//   trainer_state.json     step, optimizer steps, data position, config hash, seed, and the
//                          ranks x grad_accum layout of the steps
//   config.json            Hugging Face config fields plus ours (attention variant, λ, ...)
//   config.toml            the resolved run config
//   tokenizer files        of a corpus run (vocab.txt / vocab.json + merges.txt, tokenizer.json),
//                          so the directory is a complete Hugging Face model folder
//   checksums.json         FNV-1a 64 of every other file, written last: its presence marks the
//                          directory complete, and every loader verifies the files it reads
//
// Checksums: FNV-1a 64 (core/hash.h) is already the project's one hash, so no second hash
// library is linked; it is not cryptographic, but any flipped, truncated or replaced byte of a
// file changes it except with probability about 2^-64, which is what a damaged-file check needs.
// Hugging Face folders have no checksums.json and load unchecked.
//
// The swap (save_checkpoint) is crash-safe: DIR.tmp-PID is filled and synced, then DIR (if any)
// is renamed to DIR.old-PID, DIR.tmp-PID to DIR, each rename synced, and DIR.old-PID removed. A
// kill at any point leaves either DIR, or a complete DIR.tmp-PID or DIR.old-PID beside a missing
// DIR; recover_interrupted_saves (run at every train start) finishes or undoes such a swap and
// removes the leftovers of dead processes, and readable_checkpoint lets a read-only command read
// an interrupted swap's complete copy without changing anything.
//
// Random numbers need no saved state: every draw is Philox of (seed, stream, offset), with the
// offsets derived from the step, so (seed, step) restores them.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/params.h"
#include "optim/adamw.h"
#include "tokenizer/tokenizer.h"
#include "train/config.h"

namespace saobp {

struct TrainerState {
  int64_t step = 0;           // updates taken
  int64_t data_position = 0;  // batches consumed from the training stream
  uint64_t config_hash = 0;
  uint64_t seed = 42;
  // The micro-batch layout that took the steps (docs/distributed.md): ranks x grad_accum
  // micro-batches per step. A checkpoint without them was written by one process.
  int ranks = 1;
  int grad_accum = 1;
  // The most micro-batches any step of the run took (the layout may change on --resume): with
  // step, it bounds data_position when the checkpoint is loaded.
  int64_t max_batches_per_step = 1;
};

struct CheckpointContents {
  const ParamStore* params;
  const AdamW* optimizer;  // may be null (weights only)
  TrainerState state;
  nlohmann::json hf_config;
  std::string config_toml;
  const Tokenizer* tokenizer = nullptr;  // saved alongside when set
};

// Whether an entry of train.run_dir, by its name, is something a run writes there: final/,
// checkpoint-N/ (and an interrupted save's NAME.tmp-PID / NAME.old-PID), metrics.jsonl,
// init_report.json, and a fine-tuning's results.json, predictions*.json(l), null_odds*.json and
// GLUE leaderboard files (glue_submission_files). --overwrite removes these and nothing else.
bool is_run_output(const std::string& name);
// The file names of the GLUE leaderboard's submission zip (finetune's submission_splits writes
// them into a fine-tuning's run folder).
const std::set<std::string>& glue_submission_files();

// Whether `inner` is `outer` or lies inside it, both resolved (links, "..") where they exist.
bool lies_within(const std::string& inner, const std::string& outer);

// An output path of a command that reads `inputs` (files and folders) must not replace what it
// reads: refuses, naming `option`, a path that is an input itself, an existing file of an input
// checkpoint (a folder with checksums.json: its files are saved data), a path under what a run
// wrote in an input run folder (one that holds a run output: is_run_output, cache/, tokenizer/),
// or an existing file anywhere in any other input folder (benchmark data, a study). New files
// beside them are allowed (analyze writes CHECKPOINT/analysis/, report may write RUN/report.html).
void refuse_output_over_inputs(const std::string& out, std::string_view option,
                               const std::vector<std::string>& inputs);

// Writes `dir` atomically (a temporary sibling directory renamed over it, see above). With the
// environment variable SAOBP_TEST_PAUSE_IN_SAVE=POINT:N (a test hook of the kill test), the Nth
// save of this process stops at POINT (files-written, before-swap, between-renames, after-swap),
// says so on stderr and sleeps, to be killed there.
void save_checkpoint(const std::string& dir, const CheckpointContents& c);

// Finishes or undoes the saves into `run_dir` that a killed process left half-swapped (a complete
// NAME.tmp-PID with no NAME is renamed to NAME; else a NAME.old-PID with no NAME is renamed back)
// and removes the other NAME.tmp-PID / NAME.old-PID folders and FILE.tmp.PID files of processes
// that are no longer running. Returns one line per action taken, for the log.
std::vector<std::string> recover_interrupted_saves(const std::string& run_dir);

// The latest complete checkpoint of `run_dir`: `final`, else the checkpoint-N with the highest N,
// whose checksums verify ("" when none). Checkpoints that fail are skipped with a line in `notes`.
std::string latest_checkpoint(const std::string& run_dir, std::vector<std::string>* notes = nullptr);

// `dir` when it is a directory; when a kill interrupted its swap, the complete copy the swap left
// (DIR.tmp-PID with verified checksums, else DIR.old-PID), with a note on stderr; else `dir`
// (whose reading then fails naming it). Changes nothing on disk.
std::string readable_checkpoint(const std::string& dir);

// A read-only command (eval, analyze, inspect) on checkpoint `dir` reads with the checkpoint's own
// tokenizer (any of the files has_tokenizer_files names) unless data.vocab was given. A corpus
// run's checkpoint without one is refused naming `op` and the files: such a command must not
// train a vocabulary, nor write one into the train.run_dir its config.toml names.
void use_checkpoint_tokenizer(const std::string& dir, bool vocab_given, RunConfig& cfg, const char* op);

// Verifies the checksums that dir/checksums.json records, for every file it lists except those
// named in `skip` (a folder without checksums.json, e.g. a Hugging Face one, passes). Errors name
// the file, both checksums, or the damaged checksums.json.
void verify_checksums(const std::string& dir, const std::vector<std::string>& skip = {});

// Every element of `t` is finite; else an error naming `file`, the tensor and the first bad index.
void check_finite(const Tensor& t, const std::string& file, const std::string& name);

// Checks the checkpoint's config.json against `expected` (the task's hf_config from config.toml):
// every key of `expected` must be present with the same value, and a stored tokenizer fingerprint
// must match `tokenizer`. Errors name config.json and the key. The one exception: a model without
// a position table (positions rope or none, in both) may be read with another n_positions
// (max_position_embeddings), a limit on the length rather than a weight's shape; a learned table
// must keep its size. The read-only commands (eval, analyze, inspect, generate) call this.
void check_checkpoint_config(const std::string& dir, const nlohmann::json& expected,
                             const Tokenizer* tokenizer);

// Loads model.safetensors into `params`: its checksum must verify, every parameter must be present
// with its shape and dtype and finite, and no unknown tensor may remain (errors name the file and
// the tensor).
void load_weights(const std::string& dir, ParamStore& params);
// Loads the optimizer moments into `opt` (same checks) and returns the trainer state, checked
// against the run: 0 <= step <= max_steps, data_position == step x grad_accum, optimizer_steps
// == step (errors name trainer_state.json and the key).
TrainerState load_training_state(const std::string& dir, AdamW& opt, int64_t max_steps, int64_t grad_accum);

}  // namespace saobp
