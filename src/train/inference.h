// Inference of the language-model objectives: the evaluation forward pass (eval mode, no dropout,
// no gradient) that `saobp eval` runs on each held-out batch, and its timing for the cost table of
// the paper's Table 9 (`saobp bench CONFIG --inference`; `saobp cost` tabulates the figures).
//   BERT (masked LM): the encoder over the batch, then the MLM head on the masked positions only;
//   GPT-2 (causal LM): the decoder over the batch, then the LM head on the rows with a target.
// The timed pass ends at the logits: the cross-entropy and accuracy that evaluation sums from them
// are scoring, not inference.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "autograd/var.h"
#include "model/heads.h"
#include "train/config.h"
#include "train/flops.h"

namespace saobp {

// The flat positions of `labels` (any shape; -100 = not predicted) that are predicted, in order,
// and their targets.
void predicted_positions(const Tensor& labels, std::vector<int32_t>& pos, std::vector<int32_t>& tgt);

// ids: (B,T) i32  key_mask: (B,T) u8  positions: (N) i32 flat indices into B·T, N >= 1.
// Returns the logits (N,V) of the evaluation forward pass: the body over the batch, the head on
// the positions only (LmHead::logits_at). The caller holds a NoGradGuard.
Var eval_logits(Body& body, LmHead& head, const Tensor& ids, const Tensor& key_mask, const Tensor& positions);

// One sequence ids (1,T) through a body and its LM head in eval mode (Task::inspect of the
// language-model tasks): every layer's maps, the hidden states and the logits (1,T,V).
void inspect_lm(Body& body, LmHead& head, const Tensor& ids, std::vector<AttentionMaps>& maps,
                std::vector<Tensor>& hidden, Tensor& logits);

// The timing of one batch size: every timed pass, their median, min and max (seconds), the head's
// rows (mean over the timed passes) and the forward FLOPs at that mean (train/flops.h).
struct InferenceTiming {
  int64_t batch_size = 0, tokens = 0;  // B and B·T of each pass
  double head_rows = 0;
  std::vector<double> seconds;
  double median = 0, min = 0, max = 0;
  std::vector<FlopTerm> terms;
  double flops = 0;
};

// At the config's batch size (throughput) and at one sequence (latency).
struct InferenceBench {
  InferenceTiming batch, single;
};

// Times the evaluation forward pass of cfg's model (its initial weights from train.seed) on the
// held-out batches of the synthetic source (model.vocab_size tokens, train.seq_len, for BERT
// data.mlm_probability masking; data.kind is not read: only the shapes matter) at B =
// train.batch_size and at B = 1. `warmup` untimed passes of each, then `iters` >= 1 timed ones,
// alternating (a pass at B, then one at 1) so that a slow spell of the machine hits both; the
// inputs are made outside the timed region. A sequence with no masked position runs the encoder
// alone (0 head rows), as evaluation skips its head.
InferenceBench time_inference(const RunConfig& cfg, int warmup, int iters);

// The figures of one batch size as `saobp bench --inference --json` writes them:
// {"batch_size", "tokens", "passes", "ms_median", "ms_min", "ms_max", "tokens_per_s",
//  "sequences_per_s", "head_rows", "flops", "flop_terms": [{name, formula, flops}], "gflops"}.
nlohmann::json inference_figures(const InferenceTiming& t);

// The file `saobp bench --inference --json` writes (`saobp cost --bench` reads it): {"tool":
// "saobp", "mode": "inference", "family", "preset", "attention", "batch_size", "seq_len",
// "threads", "warmup", "steal_fraction", "others_fraction" (the shares of CPU time that the
// hypervisor and the machine's other processes took during the timed passes; negative when
// unknown), "batch": inference_figures of B, "single": inference_figures of B = 1}.
nlohmann::json inference_bench_json(const RunConfig& cfg, const InferenceBench& b, int warmup, int threads,
                                    double steal, double others);

}  // namespace saobp
