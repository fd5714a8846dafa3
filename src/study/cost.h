// The cost table of the paper's Table 9: for each attention variant, the FLOPs of a training step
// and of an inference forward pass of the model a run config describes (train/flops.h, with
// SAOBP's extra work), the measured training ms/step and tokens/s when `saobp bench --json` files
// of those variants are given, and the measured inference ms/batch, tokens/s and latency when
// `saobp bench --inference --json` files are (this module measures nothing itself).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/config.h"

namespace saobp::study {

// {"cost_table": {"family", "preset", "batch_size", "seq_len", "tokens_per_step", "head_rows",
//   "tokens_per_batch", "batch_head_rows",
//   "variants": [{"attention", "train_flops_per_step", "train_flop_terms": [{name, formula,
//   flops}], "inference_flops_per_batch", "inference_flops_per_token", "extra_train_flops",
//   "extra_inference_flops" (over original; null without original), "ms_per_step",
//   "tokens_per_s", "gflops" (a training bench's), "inference_ms_per_batch",
//   "inference_tokens_per_s", "latency_ms" (an inference bench's; each null unless a bench file
//   gave it)}]}}.
// `cfg` gives the model and the batch: a training step is B·T·grad_accum tokens, an inference
// batch B·T (the batch `saobp bench --inference` times); an encoder's head runs on the expected
// masked rows, data.mlm_probability x tokens, a decoder's on every token. Each bench JSON must be
// an object of the same family, batch size and sequence length (else an error naming it); one
// with "mode": "inference" supplies its "attention"'s "batch" and "single" ms_median (and the
// batch's tokens_per_s), any other its ms_per_step_median, tokens_per_s and gflops.
nlohmann::json cost_table(const RunConfig& cfg, const std::vector<std::string>& variants,
                          const std::vector<std::string>& bench_files);

// The table as markdown (`saobp cost` prints it).
std::string cost_markdown(const nlohmann::json& table);

}  // namespace saobp::study
