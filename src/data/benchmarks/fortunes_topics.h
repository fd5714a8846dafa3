// The fortunes topic task: a sentence-classification benchmark made from Debian's `fortunes`
// package, whose entries are split into topic files (art, computers, food, love, science, ...).
// Each entry of a chosen topic file becomes one row "text\tlabel" in GLUE SST-2's TSV layout
// (header "sentence\tlabel", the label an integer), its lines joined by single spaces (tabs and
// runs of whitespace become one space); labels.txt lists the topics in id order. The entries
// are split into train and dev by a permutation drawn from the seed. Read back with
// bench::read_sentence_tsv (task "sentence-tsv").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saobp::bench {

struct FortunesTaskOptions {
  std::string fortunes_dir = "/usr/share/games/fortunes";
  std::vector<std::string> topics = {"art", "computers", "food", "love", "science"};
  double dev_fraction = 0.1;
  uint64_t seed = 42;
};

struct FortunesTaskSummary {
  std::vector<int64_t> per_topic;  // entries per topic, in topics order
  int64_t train = 0, dev = 0;
  double majority_dev = 0;  // the dev accuracy of always predicting the most common train label
};

// Writes out_dir/{train.tsv, dev.tsv, labels.txt} (atomically, the folder created). Throws
// naming the topic file that is missing or empty.
FortunesTaskSummary write_fortunes_task(const FortunesTaskOptions& opt, const std::string& out_dir);

}  // namespace saobp::bench
