// Per-example prediction lines and the GLUE leaderboard's files (predictions.h).
#include "finetune/predictions.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace saobp::finetune {

namespace {

using Line = nlohmann::ordered_json;  // keys in the order written: "id" first

// The double whose shortest spelling is the float's (0.1f is written 0.1, not 0.10000000149).
double short_float(float v) { return std::strtod(fmt::format("{}", v).c_str(), nullptr); }

void check_count(const std::string& what, size_t have, int64_t examples) {
  if (static_cast<int64_t>(have) != examples)
    fail("predictions", "{}: {} predictions for {} examples", what, have, examples);
}

}  // namespace

std::string prediction_lines(const BenchmarkSpec& b, const SplitData& d, const SplitOutputs& o) {
  std::string out;
  const auto emit = [&](const Line& l) { out += l.dump() + "\n"; };
  if (b.kind == Kind::regress) {
    check_count(b.name + " " + d.split, o.score.size(), d.size());
    for (size_t i = 0; i < d.text.examples.size(); ++i) {
      const bench::TextExample& e = d.text.examples[i];
      Line l = {{"id", e.id}};
      if (d.text.labeled) l["label"] = e.score;
      l["prediction"] = short_float(static_cast<float>(o.score[i]));
      emit(l);
    }
    return out;
  }
  if (b.kind != Kind::classify && b.kind != Kind::choice)
    fail("predictions", "{}: per-example lines are written for classification and multiple choice", b.name);
  check_count(b.name + " " + d.split, o.pred.size(), d.size());
  if (o.logits.size() != o.pred.size() * static_cast<size_t>(o.K))
    fail("predictions", "{} {}: {} logits for {} examples of {} classes", b.name, d.split, o.logits.size(),
         o.pred.size(), o.K);
  for (size_t i = 0; i < o.pred.size(); ++i) {
    const bool choice = b.kind == Kind::choice;
    const std::string& id = choice ? d.choice.examples[i].id : d.text.examples[i].id;
    const int32_t label = choice ? d.choice.examples[i].label : d.text.examples[i].label;
    Line l = {{"id", id}};
    if (label >= 0) l["label"] = label;
    l["prediction"] = o.pred[i];
    Line scores = Line::array();
    for (int64_t k = 0; k < o.K; ++k)
      scores.push_back(short_float(o.logits[i * static_cast<size_t>(o.K) + k]));
    l["scores"] = std::move(scores);
    emit(l);
  }
  return out;
}

std::string zero_shot_lines(const std::vector<ZeroShotExample>& ex, const ZeroShotResult& z) {
  check_count("zero-shot", z.pred_sum.size(), static_cast<int64_t>(ex.size()));
  std::string out;
  size_t c = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    Line l = {{"id", ex[i].id}};
    if (ex[i].label >= 0) l["label"] = ex[i].label;
    l["prediction"] = z.pred_sum[i];
    l["prediction_length_normalized"] = z.pred_norm[i];
    Line scores = Line::array(), tokens = Line::array();
    for (size_t k = 0; k < ex[i].candidates.size(); ++k, ++c)
      scores.push_back(z.log_likelihood.at(c)), tokens.push_back(z.tokens.at(c));
    l["scores"] = std::move(scores), l["tokens"] = std::move(tokens);
    out += l.dump() + "\n";
  }
  return out;
}

std::string glue_submission_tsv(const BenchmarkSpec& b, const SplitData& d, const SplitOutputs& o) {
  if (b.name.rfind("glue/", 0) != 0) fail("predictions", "{}: not a GLUE task", b.name);
  const bool regress = b.kind == Kind::regress;
  check_count(b.name + " " + d.split, regress ? o.score.size() : o.pred.size(), d.size());
  // The reader's task: glue/mnli's "ax" split is read (and spelled) as task "ax".
  const std::string task = d.text.task.substr(5);
  std::string out = "index\tprediction\n";
  for (size_t i = 0; i < d.text.examples.size(); ++i)
    out += d.text.examples[i].id + "\t" +
           (regress ? fmt::format("{:.3f}", o.score[i]) : bench::glue_label_text(task, o.pred[i])) + "\n";
  return out;
}

}  // namespace saobp::finetune
