// Per-example predictions and the GLUE leaderboard's submission files, written beside
// results.json by `saobp finetune` and `saobp eval --task` (finetune::write_predictions;
// docs/finetune.md, "Prediction files").
//
//   predictions_<split>.jsonl  one JSON object per example, in the split's file order:
//     classify, choice  {"id", "label", "prediction", "scores"}: the class id / ending index
//                       predicted (the argmax of "scores", the head's K logits); "label" the gold
//                       one, absent when the split is unlabeled
//     regress (STS-B)   {"id", "label", "prediction"}: the predicted and gold scores
//     zero-shot         {"id", "label", "prediction", "prediction_length_normalized", "scores",
//                       "tokens"}: "scores" log p(candidate | prompt) per candidate, "tokens" the
//                       candidate's token count; the predictions are the argmax of the sum and
//                       of the sum per token
//   ids: GLUE the test file's index column (QQP id; "FILE:LINE" where a file has none), RACE
//   "<level>/<file>#<question>", HellaSwag ind, BoolQ "<split>.jsonl:<line>", IMDb
//   "<split>/<pos|neg>/<file>".
//
//   GLUE submission  CoLA.tsv SST-2.tsv MRPC.tsv STS-B.tsv QQP.tsv MNLI-m.tsv MNLI-mm.tsv
//   QNLI.tsv RTE.tsv WNLI.tsv AX.tsv, each "index\tprediction" then one row per test example in
//   the file's order: the index column of the test file, the label as the task's files spell
//   it (0/1 for CoLA, SST-2, MRPC, QQP, WNLI; the name for MNLI, AX, QNLI, RTE), STS-B's score
//   with 3 decimals (jiant's GlueBenchmark.write_predictions and the tasks' get_glue_preds).
#pragma once
#include <string>
#include <vector>

#include "finetune/benchmark.h"
#include "finetune/lm_scoring.h"

namespace saobp::finetune {

// A split's outputs from a fine-tuned head, in example order.
struct SplitOutputs {
  std::vector<int32_t> pred;  // classify: the class id; choice: the ending index
  std::vector<double> score;  // regress: the predicted score
  std::vector<float> logits;  // classify, choice: (N, K) row-major
  int64_t K = 0;
};

// The lines of predictions_<split>.jsonl for a fine-tuned head.
std::string prediction_lines(const BenchmarkSpec& b, const SplitData& d, const SplitOutputs& o);

// The lines of predictions_<split>.jsonl for a decoder scored zero-shot.
std::string zero_shot_lines(const std::vector<ZeroShotExample>& ex, const ZeroShotResult& z);

// The leaderboard's TSV of a glue/* test split (finetune::submission_splits names the file).
std::string glue_submission_tsv(const BenchmarkSpec& b, const SplitData& d, const SplitOutputs& o);

}  // namespace saobp::finetune
