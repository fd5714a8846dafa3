// The benchmark registry: names, kinds, splits, readers and metrics (benchmark.h).
#include "finetune/benchmark.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "finetune/metrics.h"

namespace saobp::finetune {

namespace {

std::vector<BenchmarkSpec> registry() {
  std::vector<BenchmarkSpec> r;
  for (const std::string& t : bench::glue_tasks()) {
    BenchmarkSpec s{"glue/" + t, t == "stsb" ? Kind::regress : Kind::classify, "train", {"dev"}, "glue"};
    if (t == "mnli") s.eval_splits = {"dev_matched", "dev_mismatched"};
    if (t == "cola" || t == "mrpc" || t == "stsb" || t == "rte" || t == "wnli") s.recipe = "glue-small";
    r.push_back(s);
  }
  r.push_back({"squad/v1.1", Kind::span, "train", {"dev"}, "squad"});
  r.push_back({"squad/v2.0", Kind::span, "train", {"dev"}, "squad"});
  for (const char* level : {"middle", "high", "all"})
    r.push_back({std::string("race/") + level, Kind::choice, "train", {"dev", "test"}, "race"});
  r.push_back({"hellaswag", Kind::choice, "train", {"val"}, "hellaswag"});
  r.push_back({"boolq", Kind::classify, "train", {"dev"}, "boolq"});
  r.push_back({"imdb", Kind::classify, "train", {"test"}, "imdb"});
  r.push_back({"sentence-tsv", Kind::classify, "train", {"dev"}, "sentence-tsv"});
  r.push_back({"wikitext", Kind::lm, "", {"test"}, "wikitext"});
  return r;
}

std::string glue_task(const BenchmarkSpec& b) { return b.name.substr(5); }

// The reader's (task, split) of a glue/* split: MNLI's "ax" is the diagnostic set's test split.
std::pair<std::string, std::string> glue_file_of(const BenchmarkSpec& b, const std::string& split) {
  if (glue_task(b) == "mnli" && split == "ax") return {"ax", "test"};
  return {glue_task(b), split};
}

}  // namespace

std::vector<std::string> benchmark_names() {
  std::vector<std::string> n;
  for (const BenchmarkSpec& s : registry()) n.push_back(s.name);
  return n;
}

BenchmarkSpec benchmark_spec(const std::string& name) {
  for (const BenchmarkSpec& s : registry())
    if (s.name == name) return s;
  std::string all;
  for (const std::string& n : benchmark_names()) all += (all.empty() ? "" : ", ") + n;
  fail("finetune", "unknown task '{}' (tasks: {})", name, all);
}

const bench::ReadStats& SplitData::stats() const {
  if (!choice.examples.empty() || choice.stats.rows) return choice.stats;
  if (!squad.examples.empty() || squad.stats.rows) return squad.stats;
  return text.stats;
}

int64_t SplitData::size() const {
  return static_cast<int64_t>(text.examples.size() + choice.examples.size() + squad.examples.size());
}

// The files of the GLUE leaderboard's submission zip, one per test split (jiant's
// GlueBenchmark.BENCHMARK_SUBMISSION_FILENAMES); the diagnostic set AX is predicted by the MNLI
// model.
std::vector<SubmissionSplit> submission_splits(const BenchmarkSpec& b) {
  if (b.name.rfind("glue/", 0) != 0) return {};
  const std::string task = glue_task(b);
  if (task == "mnli")
    return {{"test_matched", "MNLI-m.tsv"}, {"test_mismatched", "MNLI-mm.tsv"}, {"ax", "AX.tsv"}};
  const std::map<std::string, std::string> file = {
      {"cola", "CoLA.tsv"},  {"sst2", "SST-2.tsv"}, {"mrpc", "MRPC.tsv"}, {"qqp", "QQP.tsv"},
      {"stsb", "STS-B.tsv"}, {"qnli", "QNLI.tsv"},  {"rte", "RTE.tsv"},   {"wnli", "WNLI.tsv"}};
  return {{"test", file.at(task)}};
}

bool has_split(const BenchmarkSpec& b, const std::string& dir, const std::string& split) {
  if (b.name.rfind("glue/", 0) != 0) fail("finetune", "{}: has_split answers for glue/* tasks only", b.name);
  const auto [task, file_split] = glue_file_of(b, split);
  return bench::glue_has_split(task, dir, file_split);
}

SplitData read_split(const BenchmarkSpec& b, const std::string& dir, const std::string& split,
                     const bench::ReadOptions& opt, int64_t max_examples) {
  SplitData d;
  d.split = split;
  const std::string& n = b.name;
  if (n.rfind("glue/", 0) == 0) {
    const auto [task, file_split] = glue_file_of(b, split);
    d.text = bench::read_glue(task, dir, file_split, opt);
  } else if (n == "imdb")
    d.text = bench::read_imdb(dir, split, opt);
  else if (n == "boolq")
    d.text = bench::read_boolq(dir, split, opt);
  else if (n == "sentence-tsv")
    d.text = bench::read_sentence_tsv(dir, split, opt);
  else if (n.rfind("race/", 0) == 0)
    d.choice = bench::read_race(dir, n.substr(5), split, opt);
  else if (n == "hellaswag")
    d.choice = bench::read_hellaswag(dir, split, opt);
  else if (n.rfind("squad/v", 0) == 0)
    d.squad = bench::read_squad(bench::squad_file(dir, n.substr(7), split), opt);
  else if (n == "wikitext")
    d.lm_text = bench::read_wikitext(dir, split, &d.lm_file);
  else
    fail("finetune", "task '{}' has no reader", n);
  if (max_examples > 0) {
    const auto cut = [&](auto& v) {
      if (static_cast<int64_t>(v.size()) > max_examples) v.resize(static_cast<size_t>(max_examples));
    };
    cut(d.text.examples), cut(d.choice.examples), cut(d.squad.examples);
  }
  if (b.kind != Kind::lm && d.size() == 0)
    fail("finetune", "{}: split '{}' in {} has no examples", n, split, dir);
  return d;
}

std::vector<std::string> label_names(const SplitData& d) { return d.text.labels; }

nlohmann::json split_metrics(const BenchmarkSpec& b, const SplitData& d, const std::vector<int32_t>& pred,
                             const std::vector<double>& pred_score) {
  std::vector<int32_t> gold;
  if (b.kind == Kind::choice)
    for (const auto& e : d.choice.examples) gold.push_back(e.label);
  else
    for (const auto& e : d.text.examples) gold.push_back(e.label);
  if (b.name.rfind("glue/", 0) == 0) {
    std::vector<double> gold_score;
    if (b.kind == Kind::regress)
      for (const auto& e : d.text.examples) gold_score.push_back(e.score);
    return metrics::glue_metrics(glue_task(b), pred, gold, pred_score, gold_score);
  }
  return {{"accuracy", metrics::accuracy(pred, gold)}};
}

}  // namespace saobp::finetune
