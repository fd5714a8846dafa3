// Readers for the downstream benchmarks in their official distributions (users bring the files;
// nothing is downloaded). Each reader returns the examples of one split in file order and
// rejects a malformed row with saobp::Error("[benchmarks] <file>:<line>: <what>") — for the
// whole-file JSON formats (SQuAD, RACE) the line and column of the offending value, or its
// JSON path when the file is on one line. With ReadOptions::skip_bad_rows a malformed row is
// skipped instead, counted in ReadStats and its place remembered (the first few).
//
//   GLUE       DIR/<Task>/{train,dev,test}.tsv as distributed by the GLUE benchmark (CoLA/,
//              SST-2/, MRPC/, QQP/, STS-B/, MNLI/ with dev_matched / dev_mismatched, QNLI/,
//              RTE/, WNLI/); DIR may also be the task folder itself. Tab-separated, no quote
//              processing (QQP and MNLI hold bare quotes), per-task column layouts, CoLA
//              without a header; the test files have no labels (label = -1). The diagnostic
//              set AX (task "ax", split "test"): DIR/diagnostic/diagnostic.tsv.
//   SQuAD      train-v1.1.json / dev-v1.1.json / train-v2.0.json / dev-v2.0.json;
//              answer_start counts Unicode code points; v2.0 is_impossible, plausible_answers.
//   RACE       RACE/{train,dev,test}/{middle,high}/*.txt, one JSON object per passage file
//              (article, questions, options, answers as letters, id).
//   HellaSwag  hellaswag_{train,val,test}.jsonl (ctx_a, ctx_b, ctx, endings, label).
//   BoolQ      {train,dev,test}.jsonl (question, passage, answer true/false, title).
//   IMDb       aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt, one review per file.
//   WikiText   wiki.{train,valid,test}.tokens (tokenized) or wiki.{...}.raw (raw), in
//              wikitext-2/-103 (-raw) folders.
//   sentence TSV  the SST-2 layout ("sentence\tlabel" header, integer labels) with the label
//              names in labels.txt beside it (one per line, in id order): the fortunes topic
//              task (tools: `saobp make-task fortunes-topics`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saobp::bench {

struct ReadOptions {
  bool skip_bad_rows = false;  // skip (and count) malformed rows instead of failing
};

struct ReadStats {
  int64_t rows = 0;                     // examples returned
  int64_t skipped = 0;                  // malformed rows skipped (skip_bad_rows only)
  std::vector<std::string> skipped_at;  // "file:line: what" of the first 10 skipped rows
};

// ---- sentence and sentence-pair tasks (GLUE, IMDb, BoolQ, sentence TSV) ----------------------

struct TextExample {
  std::string id;              // the row's index/id column, or file name, or "file:line"
  std::string text_a, text_b;  // text_b empty for single-sentence tasks
  int32_t label = -1;          // class index into TextDataset::labels; -1: unlabeled
  double score = 0;            // regression target (STS-B)
};

struct TextDataset {
  std::string task;                 // "glue/sst2", "imdb", "boolq", "sentence-tsv"
  std::vector<std::string> labels;  // class names in id order; empty for regression
  bool regression = false;          // STS-B: score in [0, 5]
  bool labeled = true;              // false for the unlabeled test files
  std::vector<TextExample> examples;
  ReadStats stats;
};

// The nine GLUE task names: cola sst2 mrpc qqp stsb mnli qnli rte wnli.
std::vector<std::string> glue_tasks();
// Label names in id order, as Hugging Face's glue dataset defines them (empty for stsb):
//   cola unacceptable acceptable | sst2 negative positive | mrpc not_equivalent equivalent |
//   qqp not_duplicate duplicate | mnli entailment neutral contradiction |
//   qnli, rte entailment not_entailment | wnli not_entailment entailment.
std::vector<std::string> glue_labels(const std::string& task);
// split: train | dev | test; for mnli also dev_matched | dev_mismatched | test_matched |
// test_mismatched ("dev" is an error for mnli, naming the two). task "ax": the diagnostic set
// (MNLI's labels; split "test" only, unlabeled).
TextDataset read_glue(const std::string& task, const std::string& dir, const std::string& split,
                      const ReadOptions& opt = {});
// Whether read_glue would find the split's file in `dir` (an unknown task or split throws).
bool glue_has_split(const std::string& task, const std::string& dir, const std::string& split);
// Label `id` as the task's files spell it: "0"/"1" for cola sst2 mrpc qqp wnli, the name for
// mnli ax qnli rte (the spelling the GLUE leaderboard's submission files take).
std::string glue_label_text(const std::string& task, int32_t id);

// split: train | test. Label 0 = neg, 1 = pos. Files sorted by name within pos/ and neg/,
// neg first; the id is "<split>/<pos|neg>/<file name>".
TextDataset read_imdb(const std::string& dir, const std::string& split, const ReadOptions& opt = {});

// split: train | dev | test (DIR/<split>.jsonl). text_a = question, text_b = passage, label
// 0 = False, 1 = True (labels "False", "True"); test has no answer (label -1).
TextDataset read_boolq(const std::string& dir, const std::string& split, const ReadOptions& opt = {});

// DIR/<split>.tsv in the SST-2 layout plus DIR/labels.txt.
TextDataset read_sentence_tsv(const std::string& dir, const std::string& split, const ReadOptions& opt = {});

// ---- multiple choice (RACE, HellaSwag) --------------------------------------------------------

struct ChoiceExample {
  std::string id;                    // RACE "middle/123.txt#2"; HellaSwag the ind field
  std::string context;               // RACE article; HellaSwag ctx_a
  std::string question;              // RACE question; HellaSwag ctx_b
  std::vector<std::string> endings;  // RACE the 4 options; HellaSwag the 4 endings
  int32_t label = -1;                // index of the right ending; -1: unlabeled
  std::string full_context;          // HellaSwag ctx (ctx_a + " " + ctx_b); RACE empty
};

struct ChoiceDataset {
  std::string task;  // "race/middle", "race/high", "hellaswag"
  std::vector<ChoiceExample> examples;
  ReadStats stats;
};

// level: middle | high | all; split: train | dev | test. DIR is the RACE folder (holding
// train/ dev/ test/). Files sorted by name, middle before high; every question of a passage is
// an example.
ChoiceDataset read_race(const std::string& dir, const std::string& level, const std::string& split,
                        const ReadOptions& opt = {});
// split: train | val | test (DIR/hellaswag_<split>.jsonl, or DIR itself a .jsonl file). "dev"
// is accepted for "val".
ChoiceDataset read_hellaswag(const std::string& dir, const std::string& split, const ReadOptions& opt = {});

// ---- span extraction (SQuAD) -------------------------------------------------------------------

struct SquadAnswer {
  std::string text;
  int64_t char_start = 0;  // in Unicode code points of the context, as the official files count
};

struct SquadExample {
  std::string id, title, context, question;
  std::vector<SquadAnswer> answers;            // empty when is_impossible
  bool is_impossible = false;                  // v2.0
  std::vector<SquadAnswer> plausible_answers;  // v2.0, impossible questions
};

struct SquadDataset {
  std::string version;  // "1.1" | "2.0" (the file's "version" field, or inferred from is_impossible)
  std::vector<SquadExample> examples;
  ReadStats stats;
  int64_t misaligned = 0;  // answers whose text is not at answer_start in the context
  // The first 10 of them: "FILE: question ID: answer \"TEXT\" is not at answer_start N (...)".
  std::vector<std::string> misaligned_at;
};

// One file (train-v1.1.json ...). An answer_start outside the context is malformed; an answer
// whose text differs from the context at answer_start is kept, counted in `misaligned`.
SquadDataset read_squad(const std::string& path, const ReadOptions& opt = {});
// DIR/<train|dev>-v<version>.json, or `path_or_dir` itself when it is a file.
std::string squad_file(const std::string& path_or_dir, const std::string& version, const std::string& split);

// ---- language modelling (WikiText) -------------------------------------------------------------

// The split's text exactly as in the file (UTF-8 checked, line ends kept), from
// DIR/wiki.<split>.tokens, else DIR/wiki.<split>.raw (split: train | valid | test; "dev" means
// valid); `path_or_dir` may also be the file. `file` receives the path read.
std::string read_wikitext(const std::string& path_or_dir, const std::string& split,
                          std::string* file = nullptr);

}  // namespace saobp::bench
