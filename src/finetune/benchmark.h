// The benchmark registry of `saobp finetune` / `saobp eval --task`: each name's kind, its
// splits, its reader (data/benchmarks/benchmarks.h) and its official metrics
// (finetune/metrics.h). docs/finetune.md lists where each distribution's files go.
//
//   glue/cola glue/sst2 glue/mrpc glue/qqp glue/stsb glue/mnli glue/qnli glue/rte glue/wnli
//   squad/v1.1 squad/v2.0   race/middle race/high race/all   hellaswag   boolq   imdb
//   sentence-tsv (the SST-2 layout with labels.txt: the fortunes topic task)   wikitext
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/benchmarks/benchmarks.h"

namespace saobp::finetune {

enum class Kind {
  classify,  // one text or a pair -> one of K labels (GLUE, IMDb, BoolQ, sentence-tsv)
  regress,   // a pair -> a score (STS-B)
  choice,    // a context and K endings -> the right ending (RACE, HellaSwag)
  span,      // a question and a context -> an answer span (SQuAD)
  lm         // a text -> its perplexity (WikiText; evaluation only)
};

// A GLUE test split and the name of its file in the leaderboard's submission zip.
struct SubmissionSplit {
  std::string split;  // "test"; MNLI "test_matched", "test_mismatched" and "ax" (the diagnostic set)
  std::string file;   // "SST-2.tsv"; MNLI "MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"
};

struct BenchmarkSpec {
  std::string name;  // "glue/sst2"
  Kind kind = Kind::classify;
  std::string train_split;               // "train"; "" when the benchmark is evaluation-only
  std::vector<std::string> eval_splits;  // evaluated after each epoch and at the end
  std::string recipe;                    // configs/finetune/<recipe>.toml
};

// Throws "[finetune] unknown task 'x' (tasks: ...)".
BenchmarkSpec benchmark_spec(const std::string& name);
std::vector<std::string> benchmark_names();

// One split of a benchmark, whichever its kind (only the member of its kind is filled).
struct SplitData {
  std::string split;
  bench::TextDataset text;      // classify, regress
  bench::ChoiceDataset choice;  // choice
  bench::SquadDataset squad;    // span
  std::string lm_text;          // lm
  std::string lm_file;
  const bench::ReadStats& stats() const;
  int64_t size() const;
};

// GLUE: the unlabeled test splits, predicted at the end of a run when their file is present, and
// their files in the leaderboard's submission zip (empty for the other benchmarks).
std::vector<SubmissionSplit> submission_splits(const BenchmarkSpec& b);

// Whether `dir` holds the file of split `split` of a glue/* benchmark.
bool has_split(const BenchmarkSpec& b, const std::string& dir, const std::string& split);

// Reads split `split` of benchmark `b` from `dir`, keeping the first max_examples (0 = all).
// glue/mnli's split "ax" is the GLUE diagnostic set (bench::read_glue task "ax").
SplitData read_split(const BenchmarkSpec& b, const std::string& dir, const std::string& split,
                     const bench::ReadOptions& opt, int64_t max_examples = 0);

// Class names of a classification benchmark (from its data: GLUE's fixed names, labels.txt).
std::vector<std::string> label_names(const SplitData& d);

// The official metrics of a split's predictions: classify/regress by task (GLUE's per-task
// metrics; accuracy elsewhere), choice accuracy. pred_score for regression.
nlohmann::json split_metrics(const BenchmarkSpec& b, const SplitData& d, const std::vector<int32_t>& pred,
                             const std::vector<double>& pred_score = {});

}  // namespace saobp::finetune
