// The per-length evaluation of a long-range task (data/tasks.h), shared by its two forms: the
// classification head (cls_task.cpp) and the answer a decoder writes (answer_task.cpp). Every
// length of data.eval_lengths is evaluated, or skipped with the reason: below the task's minimum,
// above the tasks' maximum, or past model.max_positions once the answer's tokens are added.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "data/tasks.h"
#include "train/config.h"

namespace saobp {

struct LengthEval {
  double accuracy = 0, loss = 0;
  int64_t examples = 0;
  nlohmann::json extra = nlohmann::json::object();  // more columns of the row (the answer form's)
};

// Evaluates `at(L)` at every length of cfg.data.eval_lengths whose sequence plus `answer_tokens(L)`
// fits model.max_positions. Prints the table (print), writes task_eval.csv and task_eval.json into
// out_dir (unless empty; created) and returns the JSON: {"task", "family", "attention",
// "positions", "train_min_length", "train_max_length", "num_classes", "results": [{"length",
// "accuracy", "loss", "examples", extra... } or {"length", "skipped"}]} plus `header`'s keys.
// `extra_columns` names the keys of LengthEval::extra that the CSV and the table show.
nlohmann::json evaluate_lengths(const RunConfig& cfg, const tasks::TaskSpec& spec,
                                const std::function<int64_t(int64_t)>& answer_tokens,
                                const std::function<LengthEval(int64_t)>& at, const std::string& out_dir,
                                bool print, const nlohmann::json& header = nlohmann::json::object(),
                                const std::vector<std::string>& extra_columns = {});

}  // namespace saobp
