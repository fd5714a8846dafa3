// The prediction files of finetune/predictions.h on the GLUE fixtures (tests/fixtures/glue, the
// official layouts): every task's leaderboard file has the leaderboard's name, the header
// "index\tprediction", a row per test row in the test file's order with its index column, and
// the label spelled as the leaderboard takes it; per-example lines carry the id, the gold label
// when there is one, the prediction and the logits.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/fs.h"
#include "finetune/benchmark.h"
#include "finetune/finetune.h"
#include "finetune/predictions.h"
#include "support.h"
#include "train/checkpoint.h"

using namespace saobp;
using namespace saobp::finetune;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kGlue = std::string(SAOBP_SOURCE_DIR) + "/tests/fixtures/glue";

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The first tab-separated field of every line after the header.
std::vector<std::string> index_column(const std::string& path) {
  std::vector<std::string> out;
  for (const std::string& l : lines_of(read_file(path))) out.push_back(l.substr(0, l.find('\t')));
  out.erase(out.begin());
  return out;
}

// Outputs predicting class (i mod K) for example i, or the score i + 0.25 (regression).
SplitOutputs round_robin(const SplitData& d, int64_t K, bool regress) {
  SplitOutputs o;
  o.K = regress ? 0 : K;
  for (int64_t i = 0; i < d.size(); ++i) {
    if (regress) {
      o.score.push_back(static_cast<double>(i) + 0.25);
      continue;
    }
    o.pred.push_back(static_cast<int32_t>(i % K));
    for (int64_t k = 0; k < K; ++k) o.logits.push_back(k == i % K ? 1.5f : 0.1f);
  }
  return o;
}

}  // namespace

TEST_CASE("predictions: GLUE test files become the leaderboard's submission files", "[finetune]") {
  // The leaderboard's spelling of each task's labels, in id order (jiant's tasks' LABELS with
  // our ids: HF's order); STS-B a score.
  const std::map<std::string, std::vector<std::string>> spelled = {
      {"cola", {"0", "1"}},
      {"sst2", {"0", "1"}},
      {"mrpc", {"0", "1"}},
      {"qqp", {"0", "1"}},
      {"wnli", {"0", "1"}},
      {"mnli", {"entailment", "neutral", "contradiction"}},
      {"qnli", {"entailment", "not_entailment"}},
      {"rte", {"entailment", "not_entailment"}}};
  const std::map<std::string, std::string> test_file = {{"CoLA.tsv", "CoLA/test.tsv"},
                                                        {"SST-2.tsv", "SST-2/test.tsv"},
                                                        {"MRPC.tsv", "MRPC/test.tsv"},
                                                        {"STS-B.tsv", "STS-B/test.tsv"},
                                                        {"QQP.tsv", "QQP/test.tsv"},
                                                        {"MNLI-m.tsv", "MNLI/test_matched.tsv"},
                                                        {"MNLI-mm.tsv", "MNLI/test_mismatched.tsv"},
                                                        {"QNLI.tsv", "QNLI/test.tsv"},
                                                        {"RTE.tsv", "RTE/test.tsv"},
                                                        {"WNLI.tsv", "WNLI/test.tsv"},
                                                        {"AX.tsv", "diagnostic/diagnostic.tsv"}};
  std::set<std::string> files;
  for (const std::string& t : bench::glue_tasks()) {
    const BenchmarkSpec b = benchmark_spec("glue/" + t);
    const bool regress = t == "stsb";
    for (const SubmissionSplit& s : submission_splits(b)) {
      INFO(b.name << " " << s.split << " -> " << s.file);
      files.insert(s.file);
      REQUIRE(has_split(b, kGlue, s.split));
      const SplitData d = read_split(b, kGlue, s.split, {});
      const int64_t K = regress ? 0 : static_cast<int64_t>(spelled.at(t).size());
      const std::vector<std::string> rows = lines_of(glue_submission_tsv(b, d, round_robin(d, K, regress)));
      const std::vector<std::string> index = index_column(kGlue + "/" + test_file.at(s.file));
      REQUIRE(rows.size() == index.size() + 1);
      CHECK(rows[0] == "index\tprediction");
      for (size_t i = 0; i < index.size(); ++i)
        CHECK(rows[i + 1] ==
              index[i] + "\t" +
                  (regress ? fmt::format("{}.250", i) : spelled.at(t)[i % static_cast<size_t>(K)]));
    }
  }
  // Exactly the eleven files of the leaderboard's zip.
  std::set<std::string> want;
  for (const auto& [f, path] : test_file) want.insert(f);
  CHECK(files == want);
  // They are the run outputs --overwrite may remove from a fine-tuning's run folder (checkpoint.h).
  CHECK(files == glue_submission_files());
  for (const std::string& f : files) CHECK(is_run_output(f));
  CHECK(submission_splits(benchmark_spec("race/middle")).empty());
}

TEST_CASE("predictions: a submission keeps the test file's own index column and order", "[finetune]") {
  // A test file whose indexes are not its row numbers: the rows keep their index and their order.
  const fs::path dir = fs::temp_directory_path() / ("saobp-preds-" + std::to_string(::getpid()));
  fs::create_directories(dir / "RTE");
  write_file_atomic((dir / "RTE" / "test.tsv").string(),
                    "index\tsentence1\tsentence2\n7\tA b.\tC d.\n3\tE f.\tG h.\n12\tI j.\tK l.\n");
  const BenchmarkSpec b = benchmark_spec("glue/rte");
  CHECK(has_split(b, dir.string(), "test"));
  CHECK_FALSE(has_split(b, (dir / "RTE").string() + "/missing", "test"));
  const SplitData d = read_split(b, dir.string(), "test", {});
  CHECK(glue_submission_tsv(b, d, round_robin(d, 2, false)) ==
        "index\tprediction\n7\tentailment\n3\tnot_entailment\n12\tentailment\n");
  // No diagnostic file: AX is not predicted, and asking for it names both places looked at.
  CHECK_FALSE(has_split(benchmark_spec("glue/mnli"), dir.string(), "ax"));
  CHECK_ERROR(read_split(benchmark_spec("glue/mnli"), dir.string(), "ax", {}),
              Contains("diagnostic/diagnostic.tsv") && Contains("glue/ax"));
  fs::remove_all(dir);
}

TEST_CASE("predictions: a write that fails leaves none of the set behind", "[finetune]") {
  const fs::path dir = fs::temp_directory_path() / ("saobp-preds-fail-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "predictions_test.jsonl");  // a folder where the second file goes
  nlohmann::json r = {{"example_predictions", {{"dev", "{}\n"}, {"test", "{}\n"}}}};
  CHECK_ERROR(write_predictions(r, dir.string()), Contains("predictions_test.jsonl"));
  CHECK_FALSE(fs::exists(dir / "predictions_dev.jsonl"));
  fs::remove_all(dir);
}

TEST_CASE("predictions: per-example lines carry id, gold label, prediction and logits", "[finetune]") {
  const BenchmarkSpec sst2 = benchmark_spec("glue/sst2");
  const SplitData dev = read_split(sst2, kGlue, "dev", {}), test = read_split(sst2, kGlue, "test", {});
  SplitOutputs o;
  o.pred = {1}, o.logits = {0.1f, 2.5f}, o.K = 2;
  const nlohmann::json l = nlohmann::json::parse(prediction_lines(sst2, dev, o));
  CHECK(l["label"] == dev.text.examples[0].label);
  CHECK(l["prediction"] == 1);
  CHECK(l["scores"] == nlohmann::json({0.1, 2.5}));  // the floats' shortest spellings
  CHECK(prediction_lines(sst2, dev, o).rfind("{\"id\":", 0) == 0);
  // Unlabeled: no "label" key.
  const std::vector<std::string> t = lines_of(prediction_lines(sst2, test, round_robin(test, 2, false)));
  REQUIRE(t.size() == 2);
  CHECK(nlohmann::json::parse(t[1]) ==
        nlohmann::json({{"id", "1"}, {"prediction", 1}, {"scores", {0.1, 1.5}}}));
  // STS-B: the predicted and gold scores.
  const BenchmarkSpec stsb = benchmark_spec("glue/stsb");
  const SplitData sdev = read_split(stsb, kGlue, "dev", {});
  const nlohmann::json s =
      nlohmann::json::parse(lines_of(prediction_lines(stsb, sdev, round_robin(sdev, 0, true)))[1]);
  CHECK(s["prediction"] == 1.25);
  CHECK(s["label"] == sdev.text.examples[1].score);
  // A count that does not match the split is an error naming it.
  o.pred = {1, 0};
  CHECK_ERROR(prediction_lines(sst2, dev, o),
              Contains("glue/sst2 dev") && Contains("2 predictions for 1 examples"));
}
