// The fortunes topic task (data/benchmarks/fortunes_topics.h) on Debian's real `fortunes` files
// (tools/test.sh installs the package; skipped where they are absent): written in SST-2's exact
// TSV layout, read back by the sentence-TSV reader row for row, split by the seed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>

#include "core/fs.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/fortunes_topics.h"
#include "support.h"

using namespace saobp;
namespace fs = std::filesystem;

TEST_CASE("fortunes topics: Debian's topic files as an SST-2-layout task, read back exactly",
          "[data][benchmarks]") {
  bench::FortunesTaskOptions o;
  if (!fs::exists(fs::path(o.fortunes_dir) / "computers")) {
    WARN("Debian's fortunes package is not installed: skipped");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("saobp-fortunes-task-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const bench::FortunesTaskSummary s = bench::write_fortunes_task(o, (dir / "a").string());
  const int64_t total = std::accumulate(s.per_topic.begin(), s.per_topic.end(), int64_t{0});
  CHECK(s.train + s.dev == total);
  CHECK(s.dev == static_cast<int64_t>(0.1 * static_cast<double>(total)));
  CHECK(s.majority_dev > 0.2);
  CHECK(s.majority_dev < 0.6);

  const bench::TextDataset train = bench::read_sentence_tsv((dir / "a").string(), "train");
  const bench::TextDataset dev = bench::read_sentence_tsv((dir / "a").string(), "dev");
  CHECK(train.labels == o.topics);
  CHECK(static_cast<int64_t>(train.examples.size()) == s.train);
  CHECK(static_cast<int64_t>(dev.examples.size()) == s.dev);
  std::vector<int64_t> per(o.topics.size(), 0);
  for (const auto* d : {&train, &dev})
    for (const bench::TextExample& e : d->examples) {
      REQUIRE(e.label >= 0);
      ++per[static_cast<size_t>(e.label)];
      CHECK(e.text_a.find('\t') == std::string::npos);
      CHECK(e.text_a.find("  ") == std::string::npos);
      CHECK(!e.text_a.empty());
    }
  CHECK(per == s.per_topic);
  // The split is a function of the seed: the same seed gives the same files, another a new split.
  bench::write_fortunes_task(o, (dir / "b").string());
  CHECK(read_file((dir / "a/train.tsv").string()) == read_file((dir / "b/train.tsv").string()));
  o.seed = 43;
  bench::write_fortunes_task(o, (dir / "c").string());
  CHECK(read_file((dir / "a/train.tsv").string()) != read_file((dir / "c/train.tsv").string()));
  o.topics = {"art", "no-such-topic"};
  REQUIRE_THROWS_WITH(bench::write_fortunes_task(o, (dir / "d").string()), Catch::Contains("no-such-topic"));
  fs::remove_all(dir);
}
