// GLUE readers: the nine tasks' {train,dev,test}.tsv as written by the GLUE benchmark's
// download_glue_data.py (the layouts Hugging Face's datasets/glue.py and transformers'
// data/processors/glue.py index by column). Tab-separated with no quote processing (csv's
// QUOTE_NONE: QQP and MNLI hold bare '"'), one header line except CoLA's train/dev.tsv:
//
//   CoLA   train/dev  (no header) source  label(0/1)  original_label('*' or empty)  sentence
//          test       index  sentence
//   SST-2  train/dev  sentence  label(0/1)              test  index  sentence
//   MRPC   train/dev  Quality(0/1)  #1 ID  #2 ID  #1 String  #2 String   (a UTF-8 BOM before
//                     "Quality", copied from msr_paraphrase_train.txt, is dropped by LineReader)
//          test       index  #1 ID  #2 ID  #1 String  #2 String
//   QQP    train/dev  id  qid1  qid2  question1  question2  is_duplicate(0/1)
//          test       id  question1  question2
//   STS-B  train/dev  index genre filename year old_index source1 source2 sentence1 sentence2
//                     score (a float in [0, 5]);      test  the same without score
//   MNLI   index promptID pairID genre sentence1_binary_parse sentence2_binary_parse
//          sentence1_parse sentence2_parse sentence1 sentence2, then
//          train: label1 gold_label | dev_matched/dev_mismatched: label1 ... label5 gold_label |
//          test_matched/test_mismatched: nothing; the label (gold_label) is the last column
//   QNLI   index  question  sentence  label(entailment/not_entailment)     test without label
//   RTE    index  sentence1  sentence2  label(entailment/not_entailment)   test without label
//   WNLI   index  sentence1  sentence2  label(0/1)                          test without label
//   AX     (the diagnostic set, MNLI's labels, test only) index  sentence1  sentence2, in
//          DIR/diagnostic/diagnostic.tsv (download_glue_data.py's place for it) or
//          DIR/diagnostic.tsv
//
// A row with another column count, an unknown label, a bad score or invalid UTF-8 is malformed;
// a header that differs from the layout's fails the file (FILE:1). An STS-B split scored by
// correlation (not train) with fewer than 2 rows or one score throughout fails the file.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/lines.h"

namespace saobp::bench {

namespace fs = std::filesystem;

namespace {

struct Task {
  std::string name;                 // cola
  std::string folder;               // CoLA
  std::vector<std::string> labels;  // in id order (HF's ClassLabel names)
  bool numeric = false;             // the file holds label ids (0/1), not label names
};

const std::vector<Task>& tasks() {
  static const std::vector<Task> t = {
      {"cola", "CoLA", {"unacceptable", "acceptable"}, true},
      {"sst2", "SST-2", {"negative", "positive"}, true},
      {"mrpc", "MRPC", {"not_equivalent", "equivalent"}, true},
      {"qqp", "QQP", {"not_duplicate", "duplicate"}, true},
      {"stsb", "STS-B", {}, false},
      {"mnli", "MNLI", {"entailment", "neutral", "contradiction"}, false},
      {"qnli", "QNLI", {"entailment", "not_entailment"}, false},
      {"rte", "RTE", {"entailment", "not_entailment"}, false},
      {"wnli", "WNLI", {"not_entailment", "entailment"}, true},
      {"ax",
       "diagnostic",
       {"entailment", "neutral", "contradiction"},
       false},  // not trained: not in glue_tasks
  };
  return t;
}

// "SST-2", "sst_2", "STS-B" -> "sst2", "stsb".
std::string canonical(const std::string& task) {
  std::string out;
  for (char c : task)
    if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const Task& find_task(const std::string& name) {
  const std::string key = canonical(name);
  for (const Task& t : tasks())
    if (t.name == key) return t;
  fail("benchmarks",
       "unknown GLUE task '{}' (expected one of: cola sst2 mrpc qqp stsb mnli qnli rte wnli ax)", name);
}

// The columns of one split's file; `header` false for CoLA's train/dev (columns then only name
// the fields for messages).
struct Layout {
  std::vector<std::string> columns;
  bool header = true;
  int id = -1;  // index/id column, -1: the id is "FILE:LINE"
  int a = 0, b = -1;
  int label = -1;  // class label column, -1: none
  int score = -1;  // STS-B score column
};

std::vector<std::string> mnli_columns(const std::string& split) {
  std::vector<std::string> c = {"index",
                                "promptID",
                                "pairID",
                                "genre",
                                "sentence1_binary_parse",
                                "sentence2_binary_parse",
                                "sentence1_parse",
                                "sentence2_parse",
                                "sentence1",
                                "sentence2"};
  if (split == "train") c.insert(c.end(), {"label1", "gold_label"});
  if (split.starts_with("dev"))
    c.insert(c.end(), {"label1", "label2", "label3", "label4", "label5", "gold_label"});
  return c;
}

// `l`, and outside the test split one more column, `name`, read into `target` (the label or score).
Layout with_target(Layout l, bool test, const char* name, int Layout::*target) {
  if (!test) {
    l.columns.push_back(name);
    l.*target = static_cast<int>(l.columns.size()) - 1;
  }
  return l;
}

Layout layout_of(const std::string& task, const std::string& split) {
  const bool test = split.starts_with("test");
  if (task == "cola")
    return test ? Layout{.columns = {"index", "sentence"}, .id = 0, .a = 1}
                : Layout{.columns = {"source", "label", "original_label", "sentence"},
                         .header = false,
                         .a = 3,
                         .label = 1};
  if (task == "sst2")
    return test ? Layout{.columns = {"index", "sentence"}, .id = 0, .a = 1}
                : Layout{.columns = {"sentence", "label"}, .a = 0, .label = 1};
  if (task == "mrpc")
    return test ? Layout{.columns = {"index", "#1 ID", "#2 ID", "#1 String", "#2 String"},
                         .id = 0,
                         .a = 3,
                         .b = 4}
                : Layout{.columns = {"Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"},
                         .a = 3,
                         .b = 4,
                         .label = 0};
  if (task == "qqp")
    return test ? Layout{.columns = {"id", "question1", "question2"}, .id = 0, .a = 1, .b = 2}
                : Layout{.columns = {"id", "qid1", "qid2", "question1", "question2", "is_duplicate"},
                         .id = 0,
                         .a = 3,
                         .b = 4,
                         .label = 5};
  if (task == "stsb")
    return with_target(Layout{.columns = {"index", "genre", "filename", "year", "old_index", "source1",
                                          "source2", "sentence1", "sentence2"},
                              .id = 0,
                              .a = 7,
                              .b = 8},
                       test, "score", &Layout::score);
  if (task == "mnli") {
    Layout l{.columns = mnli_columns(split), .id = 0, .a = 8, .b = 9};
    if (!test) l.label = static_cast<int>(l.columns.size()) - 1;  // gold_label
    return l;
  }
  if (task == "ax") return Layout{.columns = {"index", "sentence1", "sentence2"}, .id = 0, .a = 1, .b = 2};
  const bool qnli = task == "qnli";  // qnli, rte, wnli
  return with_target(
      Layout{.columns = {"index", qnli ? "question" : "sentence1", qnli ? "sentence" : "sentence2"},
             .id = 0,
             .a = 1,
             .b = 2},
      test, "label", &Layout::label);
}

void check_split(const Task& t, const std::string& split) {
  if (t.name == "mnli") {
    if (split == "dev" || split == "test")
      fail("benchmarks", "glue/mnli has two {0} splits: {0}_matched and {0}_mismatched", split);
    if (split != "train" && split != "dev_matched" && split != "dev_mismatched" && split != "test_matched" &&
        split != "test_mismatched")
      fail("benchmarks",
           "unknown glue/mnli split '{}' (expected train, dev_matched, dev_mismatched, test_matched or "
           "test_mismatched)",
           split);
  } else if (t.name == "ax") {
    if (split != "test")
      fail("benchmarks", "glue/ax (the diagnostic set) has only a test split, not '{}'", split);
  } else if (split != "train" && split != "dev" && split != "test") {
    fail("benchmarks", "unknown glue/{} split '{}' (expected train, dev or test)", t.name, split);
  }
}

// The file of a split: DIR/<Folder>/<split>.tsv, else DIR/<split>.tsv (DIR the task folder
// itself); AX's test split is diagnostic.tsv. "" when neither exists.
std::string find_split_file(const Task& t, const std::string& dir, const std::string& split) {
  const std::string stem = t.name == "ax" ? "diagnostic" : split;
  const fs::path in_glue = fs::path(dir) / t.folder / (stem + ".tsv"),
                 in_task = fs::path(dir) / (stem + ".tsv");
  // Anything there but a folder is taken: the reader names a FIFO or a device as such.
  std::error_code ec;
  if (fs::exists(in_glue, ec) && !fs::is_directory(in_glue, ec)) return in_glue.string();
  if (fs::exists(in_task, ec) && !fs::is_directory(in_task, ec)) return in_task.string();
  return "";
}

std::string split_file(const Task& t, const std::string& dir, const std::string& split) {
  const std::string found = find_split_file(t, dir, split);
  if (!found.empty()) return found;
  const std::string stem = t.name == "ax" ? "diagnostic" : split;
  const char* splits = t.name == "mnli" ? "{train,dev_matched,dev_mismatched,test_matched,test_mismatched}"
                       : t.name == "ax" ? "diagnostic"
                                        : "{train,dev,test}";
  fail("benchmarks",
       "glue/{}: neither {} nor {} exists (the GLUE layout, as download_glue_data.py writes it: "
       "DIR/{}/{}.tsv, DIR the GLUE data folder or the {} folder itself)",
       t.name, (fs::path(dir) / t.folder / (stem + ".tsv")).string(),
       (fs::path(dir) / (stem + ".tsv")).string(), t.folder, splits, t.folder);
}

std::string joined(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// The label id of `field`, or -1.
int32_t label_id(const Task& t, std::string_view field) {
  if (t.numeric) return field == "0" ? 0 : field == "1" ? 1 : -1;
  for (size_t i = 0; i < t.labels.size(); ++i)
    if (t.labels[i] == field) return static_cast<int32_t>(i);
  return -1;
}

// A finite number in [0, 5] spelled as the whole field, or NaN.
double parse_score(std::string_view field) {
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v) ||
      v < 0 || v > 5)
    return std::nan("");
  return v;
}

// Fills `ex` from one data row; returns what is wrong with the row, or "".
std::string parse_row(const Task& t, const Layout& l, std::string_view line, TextExample& ex) {
  const std::string bad = utf8_problem(line);
  if (!bad.empty()) return bad;
  const auto f = split_tabs(line);
  if (f.size() != l.columns.size())
    return fmt::format("{} tab-separated columns, expected {} ({})", f.size(), l.columns.size(),
                       joined(l.columns, ", "));
  if (l.id >= 0) ex.id = f[static_cast<size_t>(l.id)];
  ex.text_a = f[static_cast<size_t>(l.a)];
  if (l.b >= 0) ex.text_b = f[static_cast<size_t>(l.b)];
  if (l.label >= 0) {
    const std::string_view field = f[static_cast<size_t>(l.label)];
    ex.label = label_id(t, field);
    if (ex.label < 0)
      return fmt::format("unknown label '{}' in column {} (expected {})", field,
                         l.columns[static_cast<size_t>(l.label)],
                         t.numeric ? "0 or 1" : joined(t.labels, ", "));
  }
  if (l.score >= 0) {
    ex.score = parse_score(f[static_cast<size_t>(l.score)]);
    if (std::isnan(ex.score))
      return fmt::format("score '{}' is not a number in [0, 5]", f[static_cast<size_t>(l.score)]);
  }
  return "";
}

}  // namespace

std::vector<std::string> glue_tasks() {
  std::vector<std::string> out;
  for (const Task& t : tasks())
    if (t.name != "ax") out.push_back(t.name);
  return out;
}

std::vector<std::string> glue_labels(const std::string& task) { return find_task(task).labels; }

std::string glue_label_text(const std::string& task, int32_t id) {
  const Task& t = find_task(task);
  if (id < 0 || static_cast<size_t>(id) >= t.labels.size())
    fail("benchmarks", "glue/{}: label id {} out of range [0, {})", t.name, id, t.labels.size());
  return t.numeric ? std::to_string(id) : t.labels[static_cast<size_t>(id)];
}

bool glue_has_split(const std::string& task, const std::string& dir, const std::string& split) {
  const Task& t = find_task(task);
  check_split(t, split);
  return !find_split_file(t, dir, split).empty();
}

TextDataset read_glue(const std::string& task, const std::string& dir, const std::string& split,
                      const ReadOptions& opt) {
  const Task& t = find_task(task);
  check_split(t, split);
  const Layout l = layout_of(t.name, split);
  const std::string path = split_file(t, dir, split), base = fs::path(path).filename().string();
  TextDataset ds;
  ds.task = "glue/" + t.name;
  ds.labels = t.labels;
  ds.regression = t.name == "stsb";
  ds.labeled = !split.starts_with("test");
  LineReader in(path);
  if (l.header) expect_header(in, l.columns, "GLUE " + t.folder + " " + split + ".tsv");
  std::string line;
  while (in.next(line)) {
    TextExample ex;
    const std::string bad = parse_row(t, l, line, ex);
    if (!bad.empty()) {
      bad_row(opt, ds.stats, path, in.line(), bad);
      continue;
    }
    if (l.id < 0) ex.id = base + ":" + std::to_string(in.line());
    ds.examples.push_back(std::move(ex));
  }
  if (in.line() == 0) fail_at(path, 1, "empty file (expected rows of " + joined(l.columns, ", ") + ")");
  // STS-B's evaluation splits are scored by Pearson and Spearman correlations, undefined over
  // fewer than 2 rows or constant gold scores: refused now, before a fine-tuning run trains.
  if (ds.regression && ds.labeled && split != "train") {
    if (ds.examples.size() < 2)
      fail("benchmarks",
           "{}: {} scored row(s); the {} split needs at least 2 (its Pearson and Spearman correlations)",
           path, ds.examples.size(), split);
    const double first = ds.examples.front().score;
    if (std::all_of(ds.examples.begin(), ds.examples.end(),
                    [&](const TextExample& e) { return e.score == first; }))
      fail("benchmarks",
           "{}: every score is {}; Pearson and Spearman correlations are undefined with constant gold scores",
           path, first);
  }
  ds.stats.rows = static_cast<int64_t>(ds.examples.size());
  return ds;
}

}  // namespace saobp::bench
