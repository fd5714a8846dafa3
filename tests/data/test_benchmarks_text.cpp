// The text-classification benchmark readers (GLUE, IMDb, BoolQ, sentence TSV) on hand-made
// fixtures in the official layouts (tests/fixtures/), malformed inputs written into a temporary
// folder (every error names the file and the line), skip_bad_rows counting, and the shared line
// reader (lines.h).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>

#include "bench_test_util.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/lines.h"

using namespace saobp;
using namespace saobp::bench;
using namespace saobp::bench_test;
namespace fs = std::filesystem;

namespace {

const std::string kGlue = kFixtures + "/glue";

const TextExample& ex(const TextDataset& d, size_t i) { return d.examples.at(i); }

}  // namespace

// ---- GLUE -----------------------------------------------------------------------------------------

TEST_CASE("benchmarks: glue_tasks and glue_labels follow Hugging Face's glue dataset", "[data][benchmarks]") {
  CHECK(glue_tasks() ==
        std::vector<std::string>{"cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"});
  CHECK(glue_labels("cola") == std::vector<std::string>{"unacceptable", "acceptable"});
  CHECK(glue_labels("sst2") == std::vector<std::string>{"negative", "positive"});
  CHECK(glue_labels("mrpc") == std::vector<std::string>{"not_equivalent", "equivalent"});
  CHECK(glue_labels("qqp") == std::vector<std::string>{"not_duplicate", "duplicate"});
  CHECK(glue_labels("stsb").empty());
  CHECK(glue_labels("mnli") == std::vector<std::string>{"entailment", "neutral", "contradiction"});
  CHECK(glue_labels("qnli") == std::vector<std::string>{"entailment", "not_entailment"});
  CHECK(glue_labels("rte") == std::vector<std::string>{"entailment", "not_entailment"});
  CHECK(glue_labels("wnli") == std::vector<std::string>{"not_entailment", "entailment"});
  CHECK(glue_labels("SST-2") == glue_labels("sst2"));  // the folder names work too
  CHECK(glue_labels("STS-B").empty());
  CHECK_ERROR(glue_labels("squad"), Contains("unknown GLUE task 'squad'") && Contains("cola sst2"));
}

TEST_CASE("benchmarks: GLUE CoLA reads the headerless train/dev and the headed test", "[data][benchmarks]") {
  const TextDataset train = read_glue("cola", kGlue, "train");
  CHECK(train.task == "glue/cola");
  CHECK(train.labeled);
  CHECK_FALSE(train.regression);
  REQUIRE(train.examples.size() == 4);
  CHECK(train.stats.rows == 4);
  CHECK(ex(train, 0).id == "train.tsv:1");  // no index column: FILE:LINE, the first line is data
  CHECK(ex(train, 0).text_a == "The kettle boiled dry.");
  CHECK(ex(train, 0).text_b.empty());
  CHECK(ex(train, 0).label == 1);
  CHECK(ex(train, 1).label == 0);
  CHECK(ex(train, 2).text_a == "The café near the fjord served crêpes.");
  CHECK(ex(train, 3).text_a == "Mary wonders for \"Bill to leave.");
  CHECK(ex(train, 3).id == "train.tsv:4");

  const TextDataset dev = read_glue("cola", kGlue, "dev");
  REQUIRE(dev.examples.size() == 2);
  CHECK(ex(dev, 1).text_a == "We laughed ourselves.");

  const TextDataset test = read_glue("cola", kGlue, "test");
  CHECK_FALSE(test.labeled);
  REQUIRE(test.examples.size() == 2);
  CHECK(ex(test, 0).id == "0");
  CHECK(ex(test, 0).label == -1);
  CHECK(ex(test, 1).text_a == "Die Straße ist naß.");
}

TEST_CASE("benchmarks: GLUE SST-2 keeps sentences verbatim, trailing space included", "[data][benchmarks]") {
  const TextDataset train = read_glue("sst2", kGlue, "train");
  CHECK(train.task == "glue/sst2");
  REQUIRE(train.examples.size() == 3);
  CHECK(ex(train, 0).text_a == "a warm , funny and quietly moving film . ");
  CHECK(ex(train, 0).label == 1);
  CHECK(ex(train, 0).id == "train.tsv:2");
  CHECK(ex(train, 2).text_a == "the \"twist\" is telegraphed from reel one ");
  CHECK(ex(train, 2).label == 0);
  CHECK(ex(read_glue("sst2", kGlue, "dev"), 0).text_a == "it 's a delight — from start to finish . ");
  const TextDataset test = read_glue("SST-2", kGlue, "test");
  CHECK(test.task == "glue/sst2");
  REQUIRE(test.examples.size() == 2);
  CHECK(ex(test, 1).id == "1");
  CHECK(ex(test, 1).text_a == "sheer joy . ");
  CHECK(ex(test, 1).label == -1);
}

TEST_CASE("benchmarks: GLUE MRPC reads the BOM-prefixed train/dev and the indexed test",
          "[data][benchmarks]") {
  const TextDataset train = read_glue("mrpc", kGlue, "train");
  REQUIRE(train.examples.size() == 2);
  CHECK(ex(train, 0).text_a == "The council approved the \" green \" budget on Monday .");
  CHECK(ex(train, 0).text_b == "On Monday the council passed the \" green \" budget .");
  CHECK(ex(train, 0).label == 1);
  CHECK(ex(train, 0).id == "train.tsv:2");
  CHECK(ex(train, 1).label == 0);
  CHECK(ex(read_glue("mrpc", kGlue, "dev"), 0).text_b == "The race was won by Søren .");
  const TextDataset test = read_glue("mrpc", kGlue, "test");
  CHECK_FALSE(test.labeled);
  REQUIRE(test.examples.size() == 1);
  CHECK(ex(test, 0).id == "0");
  CHECK(ex(test, 0).text_a == "The bridge reopened at noon .");
  CHECK(ex(test, 0).text_b == "Traffic resumed on the bridge at midday .");
  CHECK(ex(test, 0).label == -1);
}

TEST_CASE("benchmarks: GLUE QQP keeps bare quotes, unbalanced ones included", "[data][benchmarks]") {
  const TextDataset train = read_glue("qqp", kGlue, "train");
  REQUIRE(train.examples.size() == 3);
  CHECK(ex(train, 0).id == "133273");
  CHECK(ex(train, 0).text_a == "How is the word \"ebullient\" used?");
  CHECK(ex(train, 0).text_b == "What does \"ebullient\" mean?");
  CHECK(ex(train, 0).label == 0);
  CHECK(ex(train, 1).text_a == "\"Why\" do cats purr?");
  CHECK(ex(train, 1).label == 1);
  CHECK(ex(train, 2).text_a == "What does 12\" mean on a ruler?");  // a CSV reader would swallow the rest
  CHECK(ex(train, 2).text_b == "Is 12\" a foot?");
  CHECK(ex(read_glue("qqp", kGlue, "dev"), 0).text_a == "Where is Malmö?");
  const TextDataset test = read_glue("qqp", kGlue, "test");
  REQUIRE(test.examples.size() == 1);
  CHECK(ex(test, 0).text_b == "Which letter is \"x?");
  CHECK(ex(test, 0).label == -1);
}

TEST_CASE("benchmarks: GLUE STS-B reads float scores as a regression task", "[data][benchmarks]") {
  const TextDataset train = read_glue("stsb", kGlue, "train");
  CHECK(train.regression);
  CHECK(train.labels.empty());
  REQUIRE(train.examples.size() == 3);
  CHECK(ex(train, 0).id == "0");
  CHECK(ex(train, 0).text_a == "A plane is taking off.");
  CHECK(ex(train, 0).text_b == "An air plane is taking off.");
  CHECK(ex(train, 0).score == 5.0);
  CHECK(ex(train, 0).label == -1);
  CHECK(ex(train, 1).score == 3.8);
  CHECK(ex(train, 2).score == 0.0);
  CHECK(ex(train, 2).text_a == "Zürich bank fined");
  CHECK(ex(read_glue("stsb", kGlue, "dev"), 0).score == 2.615);
  const TextDataset test = read_glue("stsb", kGlue, "test");
  CHECK_FALSE(test.labeled);
  REQUIRE(test.examples.size() == 1);
  CHECK(ex(test, 0).text_b == "A girl is singing.");
}

TEST_CASE("benchmarks: GLUE MNLI takes sentence1/2 from columns 8/9 and the label from the last",
          "[data][benchmarks]") {
  const TextDataset train = read_glue("mnli", kGlue, "train");
  REQUIRE(train.examples.size() == 3);
  CHECK(ex(train, 0).id == "0");
  CHECK(ex(train, 0).text_a == "Conceptually cream skimming has two basic dimensions");
  CHECK(ex(train, 0).text_b == "Product and geography are what make cream skimming work");
  CHECK(ex(train, 0).label == 1);  // neutral
  CHECK(ex(train, 1).text_a == "he said \"yeah i know");
  CHECK(ex(train, 1).label == 0);  // entailment
  CHECK(ex(train, 2).label == 2);  // contradiction

  const TextDataset dm = read_glue("mnli", kGlue, "dev_matched");  // label1..label5 then gold_label
  REQUIRE(dm.examples.size() == 2);
  CHECK(ex(dm, 0).label == 1);
  CHECK(ex(dm, 1).text_a == "This site includes a list of \"winners");
  CHECK(ex(dm, 1).label == 2);
  const TextDataset dmm = read_glue("mnli", kGlue, "dev_mismatched");
  REQUIRE(dmm.examples.size() == 1);
  CHECK(ex(dmm, 0).label == 2);
  for (const char* split : {"test_matched", "test_mismatched"}) {
    const TextDataset t = read_glue("mnli", kGlue, split);
    CHECK_FALSE(t.labeled);
    REQUIRE(t.examples.size() == 1);
    CHECK(ex(t, 0).label == -1);
    CHECK_FALSE(ex(t, 0).text_b.empty());
  }
  CHECK_ERROR(read_glue("mnli", kGlue, "dev"), Contains("dev_matched and dev_mismatched"));
  CHECK_ERROR(read_glue("mnli", kGlue, "test"), Contains("test_matched and test_mismatched"));
}

TEST_CASE("benchmarks: GLUE QNLI and RTE read label names, WNLI label ids", "[data][benchmarks]") {
  const TextDataset qnli = read_glue("qnli", kGlue, "train");
  REQUIRE(qnli.examples.size() == 2);
  CHECK(ex(qnli, 0).text_a == "When did the third Digimon series begin?");
  CHECK(ex(qnli, 0).label == 1);  // not_entailment
  CHECK(ex(qnli, 1).label == 0);
  CHECK(ex(read_glue("qnli", kGlue, "dev"), 0).text_b == "Goethe wrote \"Faust\" .");
  CHECK(ex(read_glue("qnli", kGlue, "test"), 0).text_a == "What is ångström?");

  const TextDataset rte = read_glue("rte", kGlue, "train");
  REQUIRE(rte.examples.size() == 2);
  CHECK(ex(rte, 0).label == 1);
  CHECK(ex(rte, 1).text_b == "Pope John Paul II died.");
  CHECK(ex(rte, 1).label == 0);
  CHECK(read_glue("rte", kGlue, "test").examples.at(0).label == -1);

  const TextDataset wnli = read_glue("wnli", kGlue, "train");
  REQUIRE(wnli.examples.size() == 2);
  CHECK(ex(wnli, 0).label == 1);  // "1" = entailment, HF's label id 1
  CHECK(wnli.labels[static_cast<size_t>(ex(wnli, 0).label)] == "entailment");
  CHECK(ex(wnli, 1).label == 0);
  CHECK(ex(read_glue("wnli", kGlue, "dev"), 0).label == 0);
  CHECK(read_glue("wnli", kGlue, "test").examples.size() == 1);
}

TEST_CASE("benchmarks: read_glue takes the GLUE folder or the task folder and names a missing file",
          "[data][benchmarks]") {
  CHECK(read_glue("rte", kGlue + "/RTE", "dev").examples.size() == 1);
  CHECK(read_glue("mnli", kGlue + "/MNLI", "dev_mismatched").examples.size() == 1);
  const std::string empty = temp_dir("glue-missing");
  CHECK_ERROR(read_glue("sst2", empty, "train"), StartsWith("[benchmarks] glue/sst2") &&
                                                     Contains(empty + "/SST-2/train.tsv") &&
                                                     Contains("DIR/SST-2/{train,dev,test}.tsv"));
  CHECK_ERROR(read_glue("mnli", empty, "dev_matched"),
              Contains(empty + "/MNLI/dev_matched.tsv") && Contains("dev_matched,dev_mismatched"));
  CHECK_ERROR(read_glue("sst2", kGlue, "validation"), Contains("unknown glue/sst2 split 'validation'"));
  CHECK_ERROR(read_glue("mnli", kGlue, "validation"), Contains("dev_matched"));
  CHECK_ERROR(read_glue("qqp2", kGlue, "test"), Contains("unknown GLUE task 'qqp2'"));
  CHECK_ERROR(read_glue("ax", empty, "test"), Contains(empty + "/diagnostic/diagnostic.tsv"));
}

TEST_CASE("benchmarks: GLUE's diagnostic set AX is an unlabeled test split with MNLI's labels",
          "[data][benchmarks]") {
  const TextDataset ax = read_glue("ax", kGlue, "test");
  CHECK(ax.task == "glue/ax");
  CHECK_FALSE(ax.labeled);
  CHECK(ax.labels == glue_labels("mnli"));
  REQUIRE(ax.examples.size() == 3);
  CHECK(ex(ax, 2).id == "2");
  CHECK(ex(ax, 0).text_a == "The cat sat on the mat.");
  CHECK(ex(ax, 0).text_b == "The cat did not sit on the mat.");
  CHECK(ex(ax, 0).label == -1);
  CHECK(read_glue("ax", kGlue + "/diagnostic", "test").examples.size() == 3);  // the folder itself
  CHECK(glue_has_split("ax", kGlue, "test"));
  CHECK_FALSE(glue_has_split("sst2", kGlue + "/diagnostic", "test"));
  CHECK_ERROR(read_glue("ax", kGlue, "dev"), Contains("only a test split"));
  // The leaderboard's spelling of a label: the id for the 0/1 tasks, the name for the others.
  CHECK(glue_label_text("wnli", 1) == "1");
  CHECK(glue_label_text("ax", 2) == "contradiction");
  CHECK(glue_label_text("qnli", 1) == "not_entailment");
  CHECK_ERROR(glue_label_text("rte", 2), Contains("label id 2 out of range"));
}

TEST_CASE("benchmarks: a malformed GLUE row names the file and the line", "[data][benchmarks]") {
  struct Case {
    std::string task, rel, text, at, what;
  };
  const std::string sst = "sentence\tlabel\n", qnli = "index\tquestion\tsentence\tlabel\n";
  const std::string qqp = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n";
  const std::string sts =
      "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
  const std::string sts_row = "0\tg\tf\t2012\t0001\tnone\tnone\tA.\tB.\t";
  const std::string mnli =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
      "sentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
  const std::vector<Case> cases = {
      {"sst2", "SST-2/train.tsv", sst + "good .\t1\nthree\tcolumns\t1\n",
       ":3: ", "3 tab-separated columns, expected 2 (sentence, label)"},
      {"sst2", "SST-2/train.tsv", sst + "one column\n", ":2: ", "1 tab-separated columns"},
      {"sst2", "SST-2/train.tsv", sst + "good .\t1\n\nx\t0\n",
       ":3: ", "1 tab-separated columns"},  // blank line
      {"sst2", "SST-2/train.tsv", sst + "bad label\t2\n",
       ":2: ", "unknown label '2' in column label (expected 0 or 1)"},
      {"sst2", "SST-2/train.tsv", sst + "named label\tpositive\n", ":2: ", "unknown label 'positive'"},
      {"sst2", "SST-2/dev.tsv", sst + "ok\t0\nbad \xff byte\t1\n",
       ":3: ", "invalid UTF-8 at byte 4 of the line"},
      {"sst2", "SST-2/train.tsv", "sentence\tlabels\nx\t1\n", ":1: ",
       "header \"sentence\\tlabels\" is not the GLUE SST-2 train.tsv header (expected \"sentence\\tlabel\")"},
      {"sst2", "SST-2/train.tsv", "", ":1: ", "empty file"},
      {"cola", "CoLA/train.tsv", "gj04\t1\t\tfine.\nindex\tsentence\n",
       ":2: ", "2 tab-separated columns, expected 4 (source, label, original_label, sentence)"},
      {"cola", "CoLA/dev.tsv", "", ":1: ", "empty file"},
      {"cola", "CoLA/test.tsv", "gj04\t1\t\tno header.\n", ":1: ", "is not the GLUE CoLA test.tsv header"},
      {"qqp", "QQP/train.tsv", qqp + "1\t2\t3\tHow do I \"start?\n",
       ":2: ", "4 tab-separated columns, expected 6"},
      {"qqp", "QQP/train.tsv", qqp + "1\t2\t3\tq1\tq2\t\n", ":2: ", "unknown label ''"},
      {"stsb", "STS-B/train.tsv", sts + sts_row + "high\n", ":2: ", "score 'high' is not a number in [0, 5]"},
      {"stsb", "STS-B/train.tsv", sts + sts_row + "5.5\n", ":2: ", "score '5.5'"},
      {"stsb", "STS-B/train.tsv", sts + sts_row + "-0.5\n", ":2: ", "score '-0.5'"},
      {"stsb", "STS-B/dev.tsv", sts + sts_row + "3.0x\n", ":2: ", "score '3.0x'"},
      {"stsb", "STS-B/dev.tsv", sts + sts_row + "nan\n", ":2: ", "score 'nan'"},
      {"stsb", "STS-B/dev.tsv", sts + sts_row + "\n", ":2: ", "score ''"},
      {"mnli", "MNLI/dev_matched.tsv", mnli + "0\t1\t1n\tg\tb1\tb2\tp1\tp2\ts1\ts2\t-\t-\t-\t-\t-\t-\n",
       ":2: ", "unknown label '-' in column gold_label (expected entailment, neutral, contradiction)"},
      {"mnli", "MNLI/train.tsv", mnli, ":1: ", "is not the GLUE MNLI train.tsv header"},  // a dev header
      {"qnli", "QNLI/train.tsv", qnli + "0\tq\ts\t1\n",
       ":2: ", "unknown label '1' in column label (expected entailment, not_entailment)"},
      {"rte", "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tneutral\n",
       ":2: ", "unknown label 'neutral'"},
      {"wnli", "WNLI/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n",
       ":2: ", "unknown label 'entailment' in column label (expected 0 or 1)"},
  };
  for (const Case& c : cases) {
    INFO(c.rel << ": " << c.what);
    const std::string dir = folder_with("glue-bad", {{c.rel, c.text}});
    const std::string split = fs::path(c.rel).stem().string();
    CHECK_ERROR(read_glue(c.task, dir, split),
                StartsWith("[benchmarks] " + dir + "/" + c.rel + c.at) && Contains(c.what));
  }
}

TEST_CASE("benchmarks: skip_bad_rows skips malformed GLUE rows, counts them and keeps the first 10",
          "[data][benchmarks]") {
  std::string text = "sentence\tlabel\nfirst .\t0\n";
  for (int i = 0; i < 12; ++i) text += "bad row " + std::to_string(i) + "\t7\n";
  text += "last .\t1\n";
  const std::string dir = folder_with("glue-skip", {{"SST-2/train.tsv", text}});
  CHECK_ERROR(read_glue("sst2", dir, "train"), Contains("/SST-2/train.tsv:3: unknown label '7'"));
  const TextDataset d = read_glue("sst2", dir, "train", {.skip_bad_rows = true});
  REQUIRE(d.examples.size() == 2);
  CHECK(d.stats.rows == 2);
  CHECK(d.stats.skipped == 12);
  REQUIRE(d.stats.skipped_at.size() == 10);
  CHECK(d.stats.skipped_at[0] ==
        dir + "/SST-2/train.tsv:3: unknown label '7' in column label (expected 0 or 1)");
  CHECK_THAT(d.stats.skipped_at[9], StartsWith(dir + "/SST-2/train.tsv:12: "));
  CHECK(ex(d, 1).text_a == "last .");
  CHECK(ex(d, 1).id == "train.tsv:15");
  // A wrong header fails the file even with skip_bad_rows: it is not a row.
  const std::string bad_header =
      folder_with("glue-skip-header", {{"SST-2/train.tsv", "text\tlabel\nx\t1\n"}});
  CHECK_ERROR(read_glue("sst2", bad_header, "train", {.skip_bad_rows = true}),
              Contains("train.tsv:1: header"));
}

TEST_CASE("benchmarks: GLUE rows with CRLF line ends read as LF", "[data][benchmarks]") {
  const std::string dir = folder_with(
      "glue-crlf", {{"RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\r\n0\ta\tb\tentailment\r\n"}});
  const TextDataset d = read_glue("rte", dir, "train");
  REQUIRE(d.examples.size() == 1);
  CHECK(ex(d, 0).text_b == "b");
  CHECK(ex(d, 0).label == 0);
}

// ---- IMDb -----------------------------------------------------------------------------------------

TEST_CASE("benchmarks: IMDb reads neg then pos, files by name, reviews verbatim", "[data][benchmarks]") {
  const TextDataset train = read_imdb(kFixtures + "/imdb/aclImdb", "train");
  CHECK(train.task == "imdb");
  CHECK(train.labels == std::vector<std::string>{"neg", "pos"});
  REQUIRE(train.examples.size() == 5);  // unsup/, urls_*.txt, labeledBow.feat are not read
  CHECK(train.stats.rows == 5);
  std::vector<std::string> ids;
  for (const auto& e : train.examples) ids.push_back(e.id);
  CHECK(ids == std::vector<std::string>{"train/neg/0_3.txt", "train/neg/10_2.txt", "train/neg/2_1.txt",
                                        "train/pos/0_9.txt", "train/pos/1_7.txt"});
  CHECK(ex(train, 0).text_a == "Dull from start to finish.<br /><br />I wanted my two hours back.");
  CHECK(ex(train, 0).label == 0);
  CHECK(ex(train, 2).text_a ==
        "Worst film of the year. Even the café scene is painful.");  // one '\n' stripped
  CHECK(ex(train, 3).text_a == "A \"masterpiece\" — I laughed, I cried.<br /><br />10/10.");
  CHECK(ex(train, 3).label == 1);
  CHECK(ex(train, 3).text_b.empty());

  const TextDataset test = read_imdb(kFixtures + "/imdb", "test");  // the parent of aclImdb/ works too
  REQUIRE(test.examples.size() == 2);
  CHECK(ex(test, 0).id == "test/neg/0_2.txt");
  CHECK(ex(test, 1).text_a == "Über-brilliant.");
  CHECK(ex(test, 1).label == 1);

  CHECK_ERROR(read_imdb(kFixtures + "/imdb", "unsup"), Contains("unknown imdb split 'unsup'"));
  const std::string empty = temp_dir("imdb-missing");
  CHECK_ERROR(read_imdb(empty, "train"), Contains(empty + "/train/neg/") && Contains("<id>_<rating>.txt"));
}

TEST_CASE("benchmarks: a malformed IMDb review names the file and the line", "[data][benchmarks]") {
  struct Case {
    std::string rel, text, at, what;
  };
  const std::vector<Case> cases = {
      {"train/neg/3_2.txt", "", ":1: ", "empty review"},
      {"train/neg/3_2.txt", "\n", ":1: ", "empty review"},
      {"train/pos/3_8.txt", "fine first line\nbad \xC3( second\nthird",
       ":2: ", "invalid UTF-8 at byte 4 of the line"},
      {"train/pos/review.txt", "ok", ":1: ", "file name is not <id>_<rating>.txt"},
      {"train/pos/3_x.txt", "ok", ":1: ", "file name is not <id>_<rating>.txt"},
      {"train/pos/3_4.txt", "ok", ":1: ", "rating 4 in a pos review (expected 7-10)"},
      {"train/neg/3_7.txt", "ok", ":1: ", "rating 7 in a neg review (expected 1-4)"},
  };
  for (const Case& c : cases) {
    INFO(c.rel << ": " << c.what);
    const std::string dir = folder_with(
        "imdb-bad", {{"train/neg/0_1.txt", "good neg"}, {"train/pos/0_10.txt", "good pos"}, {c.rel, c.text}});
    CHECK_ERROR(read_imdb(dir, "train"),
                StartsWith("[benchmarks] " + dir + "/" + c.rel + c.at) && Contains(c.what));
    const TextDataset d = read_imdb(dir, "train", {.skip_bad_rows = true});
    CHECK(d.examples.size() == 2);
    CHECK(d.stats.skipped == 1);
    REQUIRE(d.stats.skipped_at.size() == 1);
    CHECK_THAT(d.stats.skipped_at[0], StartsWith(dir + "/" + c.rel + c.at));
  }
}

TEST_CASE("benchmarks: an IMDb review that is a dangling link, a link loop or a FIFO is named",
          "[data][benchmarks]") {
  struct Case {
    std::string name, what;
    std::function<void(const std::string&)> make;  // makes train/pos/<name> given its path
  };
  const std::vector<Case> cases = {
      {"4_9.txt", "a dangling symbolic link",
       [](const std::string& p) { fs::create_symlink("gone.txt", p); }},
      {"5_9.txt", "a symbolic link loop",
       [](const std::string& p) { fs::create_symlink(fs::path(p).filename(), p); }},
      {"6_9.txt", "not a regular file",
       [](const std::string& p) { REQUIRE(::mkfifo(p.c_str(), 0644) == 0); }},
  };
  for (const Case& c : cases) {
    INFO(c.name << ": " << c.what);
    const std::string dir =
        folder_with("imdb-link", {{"train/neg/0_1.txt", "good neg"}, {"train/pos/0_10.txt", "good pos"}});
    const std::string at = dir + "/train/pos/" + c.name;
    c.make(at);
    CHECK_ERROR(read_imdb(dir, "train"), StartsWith("[benchmarks] " + at + ":1: ") && Contains(c.what));
    const TextDataset d = read_imdb(dir, "train", {.skip_bad_rows = true});
    CHECK(d.examples.size() == 2);
    CHECK(d.stats.skipped == 1);
  }
}

// ---- BoolQ ----------------------------------------------------------------------------------------

TEST_CASE("benchmarks: BoolQ reads question, passage and answer, test unlabeled", "[data][benchmarks]") {
  const TextDataset train = read_boolq(kFixtures + "/boolq", "train");
  CHECK(train.task == "boolq");
  CHECK(train.labels == std::vector<std::string>{"False", "True"});
  CHECK(train.labeled);
  REQUIRE(train.examples.size() == 2);
  CHECK(ex(train, 0).id == "train.jsonl:1");
  CHECK(ex(train, 0).text_a == "do iran and afghanistan speak the same language");
  CHECK(
      ex(train, 0).text_b ==
      "Persian (/\u02c8p\u025c\u02d0r\u0292\u0259n/), also known by its endonym Farsi, is spoken in Iran and "
      "Afghanistan.");
  CHECK(ex(train, 0).label == 1);
  CHECK(ex(train, 1).text_a == "is the \"green\" line a subway");
  CHECK(ex(train, 1).text_b == "The Green Line is a light rail line.\nIt runs above ground.");
  CHECK(ex(train, 1).label == 0);
  CHECK(ex(read_boolq(kFixtures + "/boolq", "dev"), 0).text_a == "is café au lait coffee");
  const TextDataset test = read_boolq(kFixtures + "/boolq", "test");
  CHECK_FALSE(test.labeled);
  REQUIRE(test.examples.size() == 1);
  CHECK(ex(test, 0).label == -1);
  CHECK(ex(test, 0).text_b == "Water is a liquid.");
  CHECK_ERROR(read_boolq(kFixtures + "/boolq", "val"), Contains("unknown boolq split 'val'"));
  CHECK_ERROR(read_boolq(kFixtures, "train"),
              Contains(kFixtures + "/train.jsonl") && Contains("one JSON object per line"));
}

TEST_CASE("benchmarks: BoolQ skips blank lines and accepts a missing title", "[data][benchmarks]") {
  const std::string dir = temp_dir("boolq-blank");
  write(dir, "dev.jsonl", "\n{\"question\": \"q\", \"answer\": false, \"passage\": \"p\"}\r\n  \n");
  const TextDataset d = read_boolq(dir, "dev");
  REQUIRE(d.examples.size() == 1);
  CHECK(ex(d, 0).id == "dev.jsonl:2");
  CHECK(ex(d, 0).label == 0);
}

TEST_CASE("benchmarks: a malformed BoolQ line names the file and the line", "[data][benchmarks]") {
  const std::string good = "{\"question\": \"q\", \"title\": \"t\", \"answer\": true, \"passage\": \"p\"}\n";
  struct Case {
    std::string split, line, what;
  };
  const std::vector<Case> cases = {
      {"train", "{\"question\": \"q\", \"answer\": true, \"passage\": \"p\"", "invalid JSON at column"},
      {"train", "not json", "invalid JSON at column 2: syntax error"},
      {"train", "[1, 2]", "a JSON array, expected an object"},
      {"train", "{\"title\": \"t\", \"answer\": true, \"passage\": \"p\"}", "missing field \"question\""},
      {"train", "{\"question\": \"q\", \"answer\": true}", "missing field \"passage\""},
      {"train", "{\"question\": \"q\", \"passage\": \"p\"}", "missing field \"answer\""},
      {"dev", "{\"question\": \"q\", \"answer\": \"true\", \"passage\": \"p\"}",
       "field \"answer\" is a string, expected true or false"},
      {"dev", "{\"question\": 7, \"answer\": true, \"passage\": \"p\"}",
       "field \"question\" is a number, expected a string"},
      {"dev", "{\"question\": \"q\", \"title\": null, \"answer\": true, \"passage\": \"p\"}",
       "field \"title\" is a null"},
      {"test", "{\"question\": \"q\", \"answer\": 1, \"passage\": \"p\"}", "field \"answer\" is a number"},
      {"train", "{\"question\": \"q\xe9\", \"answer\": true, \"passage\": \"p\"}",
       "invalid UTF-8 at byte 15 of the line"},
  };
  for (const Case& c : cases) {
    INFO(c.line);
    const std::string dir = temp_dir("boolq-bad");
    const std::string path = write(dir, c.split + ".jsonl", good + c.line + "\n" + good);
    CHECK_ERROR(read_boolq(dir, c.split), StartsWith("[benchmarks] " + path + ":2: ") && Contains(c.what));
    const TextDataset d = read_boolq(dir, c.split, {.skip_bad_rows = true});
    CHECK(d.examples.size() == 2);
    CHECK(d.stats.skipped == 1);
    CHECK(ex(d, 1).id == c.split + ".jsonl:3");
  }
}

// ---- sentence TSV ----------------------------------------------------------------------------------

TEST_CASE("benchmarks: sentence TSV reads the SST-2 layout with labels.txt", "[data][benchmarks]") {
  const TextDataset train = read_sentence_tsv(kFixtures + "/sentence_tsv", "train");
  CHECK(train.task == "sentence-tsv");
  CHECK(train.labels == std::vector<std::string>{"animals", "food", "computers"});
  REQUIRE(train.examples.size() == 3);
  CHECK(ex(train, 1).text_a == "Crème brûlée for dessert.");
  CHECK(ex(train, 1).label == 1);
  CHECK(ex(train, 2).label == 2);
  CHECK(ex(train, 2).id == "train.tsv:4");
  CHECK(read_sentence_tsv(kFixtures + "/sentence_tsv", "dev").examples.size() == 1);
  CHECK_ERROR(read_sentence_tsv(kFixtures + "/sentence_tsv", "test"), Contains("/sentence_tsv/test.tsv"));
}

TEST_CASE("benchmarks: a malformed sentence TSV or labels.txt names the file and the line",
          "[data][benchmarks]") {
  struct Case {
    std::string file, text, at, what;
  };
  const std::vector<Case> cases = {
      {"train.tsv", "sentence\tlabel\nok\t0\nbad\t3\n", ":3: ", "label '3' is not an integer in 0..2"},
      {"train.tsv", "sentence\tlabel\nbad\t-1\n", ":2: ", "label '-1' is not an integer"},
      {"train.tsv", "sentence\tlabel\nbad\tfood\n", ":2: ", "label 'food' is not an integer"},
      {"train.tsv", "sentence\tlabel\nbad\t0\textra\n", ":2: ", "3 tab-separated columns, expected 2"},
      {"train.tsv", "text\tlabel\n", ":1: ", "is not the sentence TSV header"},
      {"labels.txt", "a\n\nc\n", ":2: ", "empty label name"},
      {"labels.txt", "a\nb\na\n", ":3: ", "label name 'a' repeats an earlier line"},
      {"labels.txt", "", ":1: ", "empty file"},
  };
  for (const Case& c : cases) {
    INFO(c.file << ": " << c.what);
    const std::string dir = folder_with(
        "stsv-bad",
        {{"labels.txt", "a\nb\nc\n"}, {"train.tsv", "sentence\tlabel\nok\t0\n"}, {c.file, c.text}});
    CHECK_ERROR(read_sentence_tsv(dir, "train"),
                StartsWith("[benchmarks] " + dir + "/" + c.file + c.at) && Contains(c.what));
  }
  const std::string dir =
      folder_with("stsv-skip", {{"labels.txt", "a\nb\n"}, {"train.tsv", "sentence\tlabel\nx\t9\ny\t1\n"}});
  const TextDataset d = read_sentence_tsv(dir, "train", {.skip_bad_rows = true});
  REQUIRE(d.examples.size() == 1);
  CHECK(d.stats.skipped == 1);
  CHECK(d.stats.skipped_at.at(0) ==
        dir + "/train.tsv:2: label '9' is not an integer in 0..1 (the lines of labels.txt)");
  fs::remove(dir + "/labels.txt");
  CHECK_ERROR(read_sentence_tsv(dir, "train"), Contains(dir + "/labels.txt") && Contains("one per line"));
}

// ---- lines.h ---------------------------------------------------------------------------------------

TEST_CASE("benchmarks: LineReader numbers lines, drops CR, a BOM and nothing else", "[data][benchmarks]") {
  const std::string dir = temp_dir("lines");
  const std::string path = write(dir, "a.txt", "\xEF\xBB\xBFone\r\n\ntwo\t\"x\r\nlast \xEF\xBB\xBF");
  LineReader in(path);
  std::vector<std::pair<int64_t, std::string>> got;
  std::string line;
  while (in.next(line)) got.emplace_back(in.line(), line);
  CHECK(got == std::vector<std::pair<int64_t, std::string>>{
                   {1, "one"}, {2, ""}, {3, "two\t\"x"}, {4, "last \xEF\xBB\xBF"}});
  CHECK(in.path() == path);
  CHECK(in.line() == 4);
  LineReader empty(write(dir, "empty.txt", ""));
  CHECK_FALSE(empty.next(line));
  CHECK(empty.line() == 0);
  LineReader nl(write(dir, "nl.txt", "x\n"));
  CHECK(nl.next(line));
  CHECK_FALSE(nl.next(line));  // nothing after the final '\n'
  CHECK_ERROR(LineReader(dir + "/absent.txt"), Contains("cannot read " + dir + "/absent.txt"));
  CHECK_ERROR(LineReader{dir}, Contains("not a regular file (a directory)"));
  CHECK_ERROR(LineReader{"/dev/zero"}, Contains("/dev/zero: not a regular file (a character device)"));

  CHECK(split_tabs("a\t\"b\t\tc") == std::vector<std::string_view>{"a", "\"b", "", "c"});
  CHECK(split_tabs("") == std::vector<std::string_view>{""});
  CHECK(utf8_problem("ok é").empty());
  CHECK(utf8_problem("ab\xED\xA0\x80") == "invalid UTF-8 at byte 2 of the line (0xED)");  // a surrogate
  CHECK(at("f.tsv", 7, "what") == "f.tsv:7: what");
  CHECK_ERROR(fail_at("f.tsv", 7, "what"), Catch::Matchers::Equals("[benchmarks] f.tsv:7: what"));
}
