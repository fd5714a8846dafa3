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
//
// Random numbers need no saved state: every draw is Philox of (seed, stream, offset), with the
// offsets derived from the step, so (seed, step) restores them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/params.h"
#include "train/adamw.h"

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
};

struct CheckpointContents {
  const ParamStore* params;
  const AdamW* optimizer;  // may be null (weights only)
  TrainerState state;
  nlohmann::json hf_config;
  std::string config_toml;
  const Tokenizer* tokenizer = nullptr;  // saved alongside when set
};

// Writes `dir` atomically (a temporary sibling directory renamed over it).
void save_checkpoint(const std::string& dir, const CheckpointContents& c);

// Loads model.safetensors into `params`: every parameter must be present with its shape and
// dtype, and no unknown tensor may remain (errors name the file and the tensor).
void load_weights(const std::string& dir, ParamStore& params);
// Loads the optimizer moments into `opt` (same checks) and returns the trainer state.
TrainerState load_training_state(const std::string& dir, AdamW& opt);

}  // namespace saobp
