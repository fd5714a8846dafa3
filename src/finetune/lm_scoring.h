// A decoder's language-model scores on the benchmarks: zero-shot choice by candidate
// log-likelihood, and sliding-window perplexity (lm_scoring.cpp has the definitions).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gpt2.h"
#include "tokenizer/tokenizer.h"

namespace saobp::finetune {

struct ZeroShotExample {
  std::string id;
  std::string prompt;
  std::vector<std::string> candidates;
  int32_t label = -1;  // -1: unlabeled
};

struct ZeroShotResult {
  std::vector<int32_t> pred_sum, pred_norm;  // argmax of the summed / length-normalized score
  // Per candidate, the examples' candidates one after another: log p(candidate | prompt) and
  // the candidate's token count (the length-normalized score is their ratio).
  std::vector<double> log_likelihood;
  std::vector<int64_t> tokens;
  int64_t examples = 0, truncated = 0;  // prompts cut at their start to fit
  double seconds = 0;
  nlohmann::json metrics;  // accuracy, accuracy_length_normalized, examples, examples_per_s
};

// Rows of at most `max_length` tokens, `batch` rows per forward pass.
ZeroShotResult zero_shot_choice(GPT2LMHeadModel& model, const Tokenizer& tok,
                                const std::vector<ZeroShotExample>& ex, int64_t max_length, int64_t batch);

nlohmann::json sliding_window_perplexity(GPT2LMHeadModel& model, const Tokenizer& tok,
                                         const std::string& text, int64_t max_length, int64_t stride,
                                         int64_t batch);

}  // namespace saobp::finetune
