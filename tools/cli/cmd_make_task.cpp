// `saobp make-task fortunes-topics --out DIR`: the fortunes topic task in SST-2's TSV layout
// (data/benchmarks/fortunes_topics.h), for `saobp finetune --task sentence-tsv --data DIR`.
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "data/benchmarks/fortunes_topics.h"

namespace saobp::cli {

void register_make_task(CLI::App& app) {
  static bench::FortunesTaskOptions o;
  static std::string out, kind;
  CLI::App* sub = app.add_subcommand("make-task", "Write a benchmark made from local data (fortunes-topics)");
  sub->add_option("kind", kind, "the task to make: fortunes-topics")
      ->required()
      ->check(CLI::IsMember({"fortunes-topics"}));
  sub->add_option("--out", out, "the folder to write (train.tsv, dev.tsv, labels.txt)")
      ->required()
      ->check(non_empty_path());
  sub->add_option("--fortunes", o.fortunes_dir, "the fortunes folder")->capture_default_str();
  static std::string topics = fmt::format("{}", fmt::join(o.topics, ","));
  sub->add_option("--topics", topics, "topic files, one label each, comma-separated")->capture_default_str();
  sub->add_option("--dev-fraction", o.dev_fraction, "the share of entries held out as dev.tsv")
      ->capture_default_str();
  sub->add_option("--seed", o.seed, "the seed of the split")->capture_default_str();
  add_command(sub, [] {
    o.topics = split_list("--topics", topics);
    const bench::FortunesTaskSummary s = bench::write_fortunes_task(o, out);
    fmt::print("{}: {} train / {} dev entries; per topic ({}): {}; majority-class dev accuracy {:.4f}\n", out,
               s.train, s.dev, fmt::join(o.topics, ", "), fmt::join(s.per_topic, ", "), s.majority_dev);
    return 0;
  });
}

}  // namespace saobp::cli
