// The question-answering and language-modelling benchmark readers (SQuAD, RACE, HellaSwag,
// WikiText) on hand-made fixtures in the official layouts (tests/fixtures/), malformed inputs
// written into a temporary folder (every error names the file and the line, and for the
// whole-file JSON formats the column and the JSON path), skip_bad_rows counting, and the JSON
// position helpers (json_where.h).
#include <catch2/catch.hpp>
#include <filesystem>

#include "bench_test_util.h"
#include "core/fs.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/json_where.h"
#include "data/unicode.h"

using namespace saobp;
using namespace saobp::bench;
using namespace saobp::bench_test;
namespace fs = std::filesystem;
using Catch::Matchers::EndsWith;

namespace {

// "FILE:LINE:COL" of the first occurrence of `needle` in `text` (the column in bytes, from 1).
std::string pos_of(const std::string& file, const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return file + ":" + std::to_string(line) + ":" + std::to_string(at - line_start + 1) + ":";
}

// `n` code points of `s` from code point `start` (Python's s[start:start+n]).
std::string cp_slice(const std::string& s, int64_t start, int64_t n) {
  size_t i = 0;
  for (int64_t k = 0; k < start && i < s.size(); ++k) uni::next_cp(s, i);
  const size_t from = i;
  for (int64_t k = 0; k < n && i < s.size(); ++k) uni::next_cp(s, i);
  return s.substr(from, i - from);
}

int64_t cp_count(const std::string& s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) uni::next_cp(s, i);
  return n;
}

std::vector<std::string> texts(const std::vector<SquadAnswer>& a) {
  std::vector<std::string> out;
  for (const auto& x : a) out.push_back(x.text);
  return out;
}
std::vector<int64_t> starts(const std::vector<SquadAnswer>& a) {
  std::vector<int64_t> out;
  for (const auto& x : a) out.push_back(x.char_start);
  return out;
}

// A SQuAD file holding one article with one paragraph of `context` and the given qas.
std::string squad_doc(const std::string& context, const std::string& qas, const std::string& head = "") {
  return "{" + head + "\"data\": [{\"title\": \"T\", \"paragraphs\": [{\"context\": \"" + context +
         "\", \"qas\": [" + qas + "]}]}]}";
}

// A RACE folder whose train/middle holds the given files; returns the RACE folder.
std::string race_with(const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = temp_dir("qa-" + name);
  for (const auto& [f, text] : files) write(dir, "train/middle/" + f, text);
  return dir;
}

const std::string kRaceGood =
    R"({"answers": ["A"], "options": [["a", "b", "c", "d"]], "questions": ["Q?"], "article": "Text.", "id": "middle9.txt"})";

}  // namespace

// ---- JSON positions -----------------------------------------------------------------------------

TEST_CASE("benchmarks: json_where finds a value's line and column by its JSON path", "[data][benchmarks]") {
  const std::string text = "{\"a\": [1, {\"b\": -2}],\n  \"c\" :\t\"x\", \"d\": [[], {}, 3.5e1 ,true]}";
  CHECK(path_str({{"a", -1}, {"", 1}, {"b", -1}}) == "a[1].b");
  CHECK(path_str({}).empty());
  CHECK(json_offset(text, {}) == 0);
  CHECK(json_offset(text, {{"a", -1}}) == text.find('['));
  CHECK(json_offset(text, {{"a", -1}, {"", 0}}) == text.find('1'));
  CHECK(json_offset(text, {{"a", -1}, {"", 1}}) == text.find("{\"b\""));
  CHECK(json_offset(text, {{"a", -1}, {"", 1}, {"b", -1}}) == text.find("-2"));
  CHECK(json_offset(text, {{"c", -1}}) == text.find("\"x\""));
  CHECK(json_offset(text, {{"d", -1}, {"", 1}}) == text.find("{}"));
  CHECK(json_offset(text, {{"d", -1}, {"", 2}}) == text.find("3.5e1"));
  CHECK(json_offset(text, {{"d", -1}, {"", 3}}) == text.find("true"));
  CHECK(json_offset(text, {{"e", -1}}) == std::string::npos);
  CHECK(where("f.json", text, text.find("\"x\"")) == "f.json:2:9");
  CHECK(json_at("f.json", text, {{"c", -1}}, "bad") == "f.json:2:9: c: bad");
  CHECK(json_at("f.json", text, {}, "bad") == "f.json:1:1: bad");
}

// ---- SQuAD ----------------------------------------------------------------------------------------

TEST_CASE("benchmarks: SQuAD v1.1 keeps every gold answer, answer_start in code points",
          "[data][benchmarks]") {
  const SquadDataset d = read_squad(kFixtures + "/squad/dev-v1.1.json");
  CHECK(d.version == "1.1");
  REQUIRE(d.examples.size() == 6);
  CHECK(d.stats.rows == 6);
  CHECK(d.stats.skipped == 0);
  CHECK(d.misaligned == 0);

  const SquadExample& e = d.examples[0];
  CHECK(e.id == "5a1b2c3d4e5f60718293a4b5");
  CHECK(e.title == "Café_Müller");
  CHECK(e.question == "Who created Café Müller?");
  CHECK_THAT(e.context, StartsWith("Café Müller is a dance piece by Pina Bausch"));
  CHECK(texts(e.answers) == std::vector<std::string>{"Pina Bausch", "Pina Bausch", "Bausch"});
  CHECK(starts(e.answers) == std::vector<int64_t>{32, 32, 37});
  CHECK(e.context.find("Pina Bausch") == 34);  // bytes: "é" and "ü" are two each
  CHECK_FALSE(e.is_impossible);
  CHECK(e.plausible_answers.empty());
  CHECK(texts(d.examples[1].answers) == std::vector<std::string>{"Wuppertal", "Wuppertal", "in Wuppertal"});
  CHECK(texts(d.examples[2].answers) == std::vector<std::string>{"chairs and tables", "chairs"});

  const SquadExample& cjk = d.examples[3];  // "東京 (Tokyo) ...": two 3-byte characters first
  CHECK(cjk.context == d.examples[4].context);
  CHECK(starts(cjk.answers) == std::vector<int64_t>{76, 80, 80});
  CHECK(cjk.context.find("Sumida River") == 84);
  CHECK(d.examples[5].title == "Enzyme");
  CHECK(d.examples[5].id == "5a1b2c3d4e5f60718293a4ba");

  for (const SquadExample& x : d.examples)
    for (const SquadAnswer& a : x.answers)
      CHECK(cp_slice(x.context, a.char_start, cp_count(a.text)) == a.text);
}

TEST_CASE("benchmarks: SQuAD v2.0 impossible questions and plausible answers", "[data][benchmarks]") {
  const SquadDataset d = read_squad(kFixtures + "/squad/dev-v2.0.json");
  CHECK(d.version == "2.0");
  REQUIRE(d.examples.size() == 5);
  CHECK(d.misaligned == 0);
  const SquadExample& e =
      d.examples[0];  // "The emoji 😀 was added ...": U+1F600, a surrogate pair in the file
  CHECK_FALSE(e.is_impossible);
  CHECK(texts(e.answers) == std::vector<std::string>{"2010", "2010", "in 2010"});
  CHECK(starts(e.answers) == std::vector<int64_t>{36, 36, 33});
  CHECK(e.context.find("2010") == 39);
  CHECK_THAT(e.context, StartsWith("The emoji \xF0\x9F\x98\x80 was added"));

  const SquadExample& no = d.examples[1];
  CHECK(no.id == "6b2c3d4e5f60718293a4b5c7");
  CHECK(no.is_impossible);
  CHECK(no.answers.empty());
  CHECK(texts(no.plausible_answers) == std::vector<std::string>{"2010"});
  CHECK(starts(no.plausible_answers) == std::vector<int64_t>{36});
  CHECK(d.examples[3].title == "Normans");
  CHECK(d.examples[4].is_impossible);
  CHECK(texts(d.examples[4].plausible_answers) == std::vector<std::string>{"Normandy", "a region"});
  for (const SquadExample& x : d.examples)
    for (const SquadAnswer& a : x.plausible_answers)
      CHECK(cp_slice(x.context, a.char_start, cp_count(a.text)) == a.text);
}

TEST_CASE("benchmarks: squad_file names the official files", "[data][benchmarks]") {
  const std::string dir = kFixtures + "/squad";
  CHECK(squad_file(dir, "1.1", "dev") == (fs::path(dir) / "dev-v1.1.json").string());
  CHECK(squad_file(dir, "v2.0", "dev") == (fs::path(dir) / "dev-v2.0.json").string());
  CHECK(squad_file(dir + "/dev-v2.0.json", "1.1", "train") == dir + "/dev-v2.0.json");  // a file as is
  CHECK_ERROR(squad_file(dir, "1.1", "train"), Contains(dir) && Contains("train-v1.1.json"));
  CHECK_ERROR(squad_file(dir, "3.0", "dev"), Contains("3.0") && Contains("1.1 or 2.0"));
  CHECK_ERROR(squad_file(dir, "2.0", "test"), Contains("\"test\"") && Contains("train or dev"));
  CHECK_ERROR(squad_file(dir + "/none", "2.0", "dev"), Contains("none") && Contains("no such file"));
}

TEST_CASE("benchmarks: SQuAD errors name the file, line, column and JSON path", "[data][benchmarks]") {
  const std::string dir = temp_dir("qa-squad-bad");
  const std::string ok_qa =
      R"({"id": "q0", "question": "Q?", "answers": [{"text": "abc", "answer_start": 0}]})";

  SECTION("JSON syntax: line and column of nlohmann's byte offset") {
    const std::string text = "{\"data\": [\n  {\"title\": \"T\",}]}";
    const std::string f = write(dir, "syntax.json", text);
    CHECK_ERROR(read_squad(f), Contains(f + ":2:17: not valid JSON") && Contains("syntax error"));
  }
  SECTION("a bad value in a pretty-printed file: its line") {
    const std::string text =
        "{\n \"version\": \"1.1\",\n \"data\": [\n  {\"title\": \"T\",\n   \"paragraphs\": [\n    "
        "{\"context\": \"abc "
        "def\",\n     \"qas\": [\n      " +
        ok_qa +
        ",\n      {\"id\": \"q1\", \"question\": \"Q?\",\n       \"answers\": [{\"text\": \"def\",\n"
        "         \"answer_start\": -3}]}]}]}]}\n";
    const std::string f = write(dir, "pretty.json", text);
    CHECK_ERROR(read_squad(f),
                Contains(pos_of(f, text, "-3") +
                         " data[0].paragraphs[0].qas[1].answers[0].answer_start: -3 is negative"));
    CHECK_THAT(pos_of(f, text, "-3"), EndsWith(":11:26:"));
  }
  SECTION("one line: the column, in a later article") {
    const std::string a0 = R"({"title": "A", "paragraphs": [{"context": "abc", "qas": [)" + ok_qa + "]}]}";
    const std::string a1 =
        R"({"title": "B", "paragraphs": [{"context": "xyz", "qas": []}, {"context": "abc", "qas": [)" +
        std::string(R"({"id": "q2", "question": "Q?", "answers": [{"text": "abc", "answer_start": 0}]})") +
        R"(, {"id": "q1", "question": "Q?", "answers": [{"text": "c", "answer_start": 2}, {"text": "c", "answer_start": 99}]}]}]})";
    const std::string text = R"({"data": [)" + a0 + ", " + a1 + R"(], "version": "1.1"})";
    const std::string f = write(dir, "line.json", text);
    CHECK_ERROR(read_squad(f),
                Contains(pos_of(f, text, "99") +
                         " data[1].paragraphs[1].qas[1].answers[1].answer_start: 99 is beyond the "
                         "context (3 code points)"));
  }
  SECTION("a question id seen earlier in the file") {
    const std::string text = squad_doc("abc", ok_qa + ", " + ok_qa);
    const std::string f = write(dir, "dup.json", text);
    CHECK_ERROR(read_squad(f),
                Contains("dup.json:") && Contains("data[0].paragraphs[0].qas[1].id: question id "
                                                  "\"q0\" appears twice in the file"));
  }
  SECTION("missing and mistyped fields") {
    const auto check = [&](const std::string& name, const std::string& text, const std::string& at,
                           const std::string& what) {
      const std::string f = write(dir, name, text);
      CHECK_ERROR(read_squad(f), Contains(pos_of(f, text, at) + " " + what));
    };
    check("noq.json", squad_doc("abc", R"({"id": "q0", "answers": []})"), R"({"id": "q0")",
          "data[0].paragraphs[0].qas[0]: has no \"question\"");
    check(
        "float.json",
        squad_doc("abc", R"({"id": "q", "question": "Q", "answers": [{"text": "a", "answer_start": 0.5}]})"),
        "0.5", "data[0].paragraphs[0].qas[0].answers[0].answer_start: is 0.5, not an integer");
    check("imp.json",
          squad_doc("abc", R"({"id": "q", "question": "Q", "answers": [], "is_impossible": "no"})"),
          R"("no")", "data[0].paragraphs[0].qas[0].is_impossible: is \"no\", not true or false");
    check(
        "impans.json",
        squad_doc(
            "abc",
            R"({"id": "q", "question": "Q", "answers": [{"text": "a", "answer_start": 0}], "is_impossible": true})"),
        R"({"id": "q")", "data[0].paragraphs[0].qas[0]: is_impossible, yet has 1 answers");
    check("noans.json", squad_doc("abc", R"({"id": "q", "question": "Q", "answers": []})"), R"({"id": "q")",
          "data[0].paragraphs[0].qas[0]: has no answers and is not is_impossible");
    check("id.json", squad_doc("abc", R"({"id": 7, "question": "Q", "answers": []})"), "7",
          "data[0].paragraphs[0].qas[0].id: is a number, not a string");
    check("ctx.json", R"({"data": [{"title": "T", "paragraphs": [{"context": null, "qas": []}]}]})", "null",
          "data[0].paragraphs[0].context: is null, not a string");
    check("art.json", R"({"data": [{"title": "T", "paragraphs": []}, "x"]})", R"("x")",
          "data[1]: is a string, not an object");
    check("data.json", R"({"version": "1.1", "data": {}})", "{}", "data: is an object, not a list");
    check("top.json", R"([{"data": []}])", "[", "the top level is a list, not an object");
    check("nodata.json", R"({"version": "1.1"})", "{", "no \"data\"");
  }
  SECTION("bad UTF-8 and a missing file") {
    const std::string text = squad_doc("ab\xC3(c", ok_qa);
    const std::string f = write(dir, "utf8.json", text);
    CHECK_ERROR(read_squad(f), Contains(pos_of(f, text, "\xC3") + " invalid UTF-8"));
    CHECK_ERROR(read_squad(dir + "/none.json"), Contains("none.json") && Contains("no such file"));
  }
}

TEST_CASE("benchmarks: SQuAD misaligned answers are counted, bad questions skipped", "[data][benchmarks]") {
  const std::string dir = temp_dir("qa-squad-skip");
  // "naïve text": "text" starts at code point 6, byte 7.
  const std::string qas =
      R"({"id": "a", "question": "Q", "answers": [{"text": "text", "answer_start": 6}]}, )"
      R"({"id": "b", "question": "Q", "answers": [{"text": "text", "answer_start": 7}, {"text": "na\u00efve", "answer_start": 0}]}, )"
      R"({"id": "c", "question": "Q", "answers": [{"text": "text", "answer_start": -1}]}, )"
      R"({"id": "d", "answers": []}, )"
      R"({"id": "e", "question": "Q", "answers": [], "is_impossible": true, "plausible_answers": [{"text": "x", "answer_start": 10}]})";
  const std::string text = squad_doc("na\\u00efve text", qas);
  const std::string f = write(dir, "skip.json", text);
  CHECK_ERROR(read_squad(f),
              Contains(pos_of(f, text, "-1") + " data[0].paragraphs[0].qas[2].answers[0].answer_start"));

  const SquadDataset d = read_squad(f, {.skip_bad_rows = true});
  REQUIRE(d.examples.size() == 3);
  CHECK(d.stats.rows == 3);
  CHECK(d.examples[0].context == "naïve text");
  CHECK(d.examples[1].id == "b");
  CHECK(starts(d.examples[1].answers) == std::vector<int64_t>{7, 0});  // kept as written
  CHECK(d.examples[2].id == "e");
  CHECK(d.misaligned == 2);  // b's byte offset 7, e's plausible "x" at the end
  // Each one shown: the file, the question and what the context holds there.
  REQUIRE(d.misaligned_at.size() == 2);
  CHECK(d.misaligned_at[0] ==
        f + ": question b: answers \"text\" is not at answer_start 7 (the context there reads \"ext\")");
  CHECK(d.misaligned_at[1] ==
        f + ": question e: plausible_answers \"x\" is not at answer_start 10 (the context there reads \"\")");
  CHECK(d.version == "2.0");  // no "version": is_impossible seen
  CHECK(d.stats.skipped == 2);
  REQUIRE(d.stats.skipped_at.size() == 2);
  CHECK_THAT(d.stats.skipped_at[0],
             StartsWith(pos_of(f, text, "-1") +
                        " data[0].paragraphs[0].qas[2].answers[0].answer_start: -1 is negative"));
  CHECK_THAT(d.stats.skipped_at[1],
             StartsWith(pos_of(f, text, R"({"id": "d")") + " data[0].paragraphs[0].qas[3]"));

  const std::string v1 = write(
      dir, "v1.json",
      squad_doc("abc", R"({"id": "a", "question": "Q", "answers": [{"text": "b", "answer_start": 1}]})"));
  CHECK(read_squad(v1).version == "1.1");  // no "version", no is_impossible
}

// ---- RACE -----------------------------------------------------------------------------------------

TEST_CASE("benchmarks: RACE reads every question of every passage, files in name order",
          "[data][benchmarks]") {
  const std::string dir = kFixtures + "/race/RACE";
  const ChoiceDataset m = read_race(dir, "middle", "train");
  CHECK(m.task == "race/middle");
  REQUIRE(m.examples.size() == 6);  // 1.txt (2), 10.txt (1), 2.txt (3)
  CHECK(m.stats.rows == 6);
  const std::vector<std::string> ids = {"middle/1.txt#0", "middle/1.txt#1", "middle/10.txt#0",
                                        "middle/2.txt#0", "middle/2.txt#1", "middle/2.txt#2"};
  const std::vector<int32_t> labels = {1, 3, 0, 2, 0, 3};
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(m.examples[i].id == ids[i]);
    CHECK(m.examples[i].label == labels[i]);
    CHECK(m.examples[i].endings.size() == 4);
    CHECK(m.examples[i].full_context.empty());
  }
  const ChoiceExample& e = m.examples[1];
  CHECK(e.context ==
        "Tom found a small cat at school on Monday.\nHis mother helped him make a poster, and the next day a "
        "girl "
        "came to take the cat home.");
  CHECK(e.question == "Who helped Tom make the poster?");
  CHECK(e.endings ==
        std::vector<std::string>{"Tom's teacher.", "Tom's brother.", "Tom's friend.", "Tom's mother."});
  CHECK(m.examples[2].question == "The market in the story is very _ .");  // the blank kept

  const ChoiceDataset all = read_race(dir, "all", "train");
  CHECK(all.task == "race/all");
  REQUIRE(all.examples.size() == 8);
  CHECK(all.examples[5].id == "middle/2.txt#2");
  CHECK(all.examples[6].id == "high/5.txt#0");
  CHECK(all.examples[7].label == 1);
  CHECK(read_race(dir, "all", "dev").examples.size() == 2);
  const ChoiceDataset t = read_race(dir, "high", "test");
  REQUIRE(t.examples.size() == 1);
  CHECK(t.examples[0].id == "high/1.txt#0");
  CHECK(t.examples[0].label == 3);
  CHECK(t.examples[0].question == "The passage is mainly about a trip to _ .");

  CHECK_ERROR(read_race(dir, "primary", "train"), Contains("\"primary\"") && Contains("middle, high or all"));
  CHECK_ERROR(read_race(dir, "high", "val"), Contains("\"val\"") && Contains("train, dev or test"));
  const std::string empty = temp_dir("qa-race-empty");
  CHECK_ERROR(read_race(empty, "middle", "train"),
              Contains((fs::path(empty) / "train" / "middle").string()) && Contains("no such folder"));
}

TEST_CASE("benchmarks: RACE errors name the file, column and JSON path, skip_bad_rows",
          "[data][benchmarks]") {
  const auto check = [](const std::string& name, const std::string& text, const std::string& at,
                        const std::string& what) {
    const std::string dir = race_with(name, {{"1.txt", text}});
    const std::string f = (fs::path(dir) / "train" / "middle" / "1.txt").string();
    CHECK_ERROR(read_race(dir, "middle", "train"), Contains(pos_of(f, text, at) + " " + what));
  };
  check(
      "letter",
      R"({"answers": ["A", "E"], "options": [["a", "b", "c", "d"], ["a", "b", "c", "d"]], "questions": ["Q1", "Q2"], "article": "T", "id": "x"})",
      R"("E")", "answers[1]: \"E\" is not an answer letter A, B, C or D");
  check("three",
        R"({"answers": ["A"], "options": [["a", "b", "c"]], "questions": ["Q1"], "article": "T", "id": "x"})",
        R"(["a", "b", "c"])", "options[0]: has 3 options, expected 4");
  check(
      "option",
      R"({"answers": ["A"], "options": [["a", 2, "c", "d"]], "questions": ["Q1"], "article": "T", "id": "x"})",
      "2,", "options[0][1]: is a number, not a string");
  check(
      "lengths",
      R"({"answers": ["A"], "options": [["a", "b", "c", "d"], ["a", "b", "c", "d"]], "questions": ["Q1", "Q2"], "article": "T"})",
      R"(["A"])", "answers: has 1 entries for 2 questions");
  check("article", R"({"answers": [], "options": [], "questions": []})", "{", "no \"article\"");
  check("question",
        R"({"answers": ["B"], "options": [["a", "b", "c", "d"]], "questions": [null], "article": "T"})",
        "null", "questions[0]: is null, not a string");
  {  // nlohmann stops on the last byte of the unexpected token: the closing quote of "options"
    const std::string dir = race_with("json", {{"1.txt", R"({"answers": ["A"] "options": []})"}});
    CHECK_ERROR(read_race(dir, "middle", "train"),
                Contains("1.txt:1:27: not valid JSON") && Contains("syntax error"));
  }

  // skip_bad_rows: a bad question is one row, a bad file is one row; the rest is read.
  const std::string dir = race_with(
      "skip",
      {{"1.txt",
        R"({"answers": ["A", "Z", "D"], "options": [["a", "b", "c", "d"], ["a", "b", "c", "d"], ["a", "b", "c", "d"]], "questions": ["Q1", "Q2", "Q3"], "article": "T", "id": "x"})"},
       {"2.txt", "{\"answers\": ["},
       {"3.txt", kRaceGood}});
  const ChoiceDataset d = read_race(dir, "middle", "train", {.skip_bad_rows = true});
  REQUIRE(d.examples.size() == 3);
  CHECK(d.examples[0].id == "middle/1.txt#0");
  CHECK(d.examples[1].id == "middle/1.txt#2");
  CHECK(d.examples[1].label == 3);
  CHECK(d.examples[2].id == "middle/3.txt#0");
  CHECK(d.stats.rows == 3);
  CHECK(d.stats.skipped == 2);
  REQUIRE(d.stats.skipped_at.size() == 2);
  CHECK_THAT(d.stats.skipped_at[0], Contains("1.txt:1:") && Contains("answers[1]: \"Z\""));
  CHECK_THAT(d.stats.skipped_at[1], Contains("2.txt:1:") && Contains("not valid JSON"));
}

// ---- HellaSwag ------------------------------------------------------------------------------------

TEST_CASE("benchmarks: HellaSwag train and val", "[data][benchmarks]") {
  const std::string dir = kFixtures + "/hellaswag";
  const ChoiceDataset t = read_hellaswag(dir, "train");
  CHECK(t.task == "hellaswag");
  REQUIRE(t.examples.size() == 3);
  CHECK(t.stats.rows == 3);
  const ChoiceExample& e = t.examples[0];
  CHECK(e.id == "0");
  CHECK(e.context == "A woman stands at a kitchen sink full of plates.");
  CHECK(e.question == "she");
  CHECK(e.full_context == "A woman stands at a kitchen sink full of plates. she");
  REQUIRE(e.endings.size() == 4);
  CHECK(e.endings[0] == "turns on the tap and starts scrubbing a plate.");
  CHECK(e.label == 0);
  const ChoiceExample& wikihow = t.examples[1];  // ctx_b empty: ctx is ctx_a
  CHECK(wikihow.question.empty());
  CHECK(wikihow.full_context == wikihow.context);
  CHECK_THAT(wikihow.context, StartsWith("[header] How to water a cactus"));
  CHECK(t.examples[2].label == 2);

  const ChoiceDataset v = read_hellaswag(dir, "val");
  REQUIRE(v.examples.size() == 2);
  CHECK(v.examples[0].id == "24");
  CHECK(v.examples[0].label == 3);
  CHECK(v.examples[1].question == "then, she");
  CHECK(read_hellaswag(dir, "dev").examples.size() == 2);
  CHECK(read_hellaswag(dir + "/hellaswag_val.jsonl", "val").examples.size() == 2);
  CHECK_ERROR(read_hellaswag(dir, "test"), Contains("hellaswag_test.jsonl"));
  CHECK_ERROR(read_hellaswag(dir, "validation"),
              Contains("\"validation\"") && Contains("train, val or test"));
}

TEST_CASE("benchmarks: HellaSwag test has no labels, bad lines name the file and line",
          "[data][benchmarks]") {
  const std::string dir = temp_dir("qa-hellaswag");
  const std::string row =
      R"({"ind": 7, "activity_label": "A", "ctx_a": "x", "ctx_b": "y", "ctx": "x y", "split": "test", "split_type": "zeroshot", "endings": ["a", "b", "c", "d"], "source_id": "s"})";
  const std::string test = write(dir, "hellaswag_test.jsonl", row + "\n\n" + row + "\r\n");
  const ChoiceDataset t = read_hellaswag(dir, "test");
  REQUIRE(t.examples.size() == 2);
  CHECK(t.examples[1].id == "7");
  CHECK(t.examples[1].label == -1);
  CHECK(t.examples[1].full_context == "x y");

  const std::string labeled = row.substr(0, row.size() - 1) + ", \"label\": 1}";
  const auto check = [&](const std::string& name, const std::string& bad, const std::string& what) {
    const std::string f = write(dir, name, labeled + "\n\n" + bad + "\n" + labeled + "\n");
    CHECK_ERROR(read_hellaswag(f, "val"), Contains(f + ":3: " + what));
  };
  check("json.jsonl", "{\"ind\": 1,", "not valid JSON");
  check("nolabel.jsonl", row, "no \"label\"");
  check("label.jsonl", row.substr(0, row.size() - 1) + ", \"label\": 4}", "\"label\" is 4, not 0, 1, 2 or 3");
  check("ends.jsonl",
        R"({"ind": 1, "ctx_a": "x", "ctx_b": "", "ctx": "x", "endings": ["a", "b", "c"], "label": 0})",
        "\"endings\" is [\"a\",\"b\",\"c\"], not a list of 4 strings");
  check("ctx.jsonl", R"({"ind": 1, "ctx_a": "x", "ctx": "x", "endings": ["a", "b", "c", "d"], "label": 0})",
        "no \"ctx_b\"");
  check("ind.jsonl",
        R"({"ind": "1", "ctx_a": "x", "ctx_b": "", "ctx": "x", "endings": ["a", "b", "c", "d"], "label": 0})",
        "\"ind\" is \"1\", not an integer");
  check("utf8.jsonl", "{\"ind\": 1, \"ctx_a\": \"\xFF\"}", "invalid UTF-8");
  check("array.jsonl", "[1, 2]", "not a JSON object");

  const std::string f = write(dir, "skip.jsonl", labeled + "\n{\n" + labeled + "\n" + row + "\n");
  const ChoiceDataset d = read_hellaswag(f, "train", {.skip_bad_rows = true});
  CHECK(d.examples.size() == 2);
  CHECK(d.stats.rows == 2);
  CHECK(d.stats.skipped == 2);
  REQUIRE(d.stats.skipped_at.size() == 2);
  CHECK_THAT(d.stats.skipped_at[0], StartsWith(f + ":2: not valid JSON"));
  CHECK_THAT(d.stats.skipped_at[1], StartsWith(f + ":4: no \"label\""));
}

// ---- WikiText -------------------------------------------------------------------------------------

TEST_CASE("benchmarks: WikiText returns the split's text exactly", "[data][benchmarks]") {
  const std::string w2 = kFixtures + "/wikitext/wikitext-2";
  std::string file;
  const std::string tokens = read_wikitext(w2, "test", &file);
  CHECK(file == (fs::path(w2) / "wiki.test.tokens").string());
  CHECK(tokens == read_file(file));
  CHECK_THAT(tokens,
             StartsWith(" \n = Harbour Lighthouse = \n \n The Harbour Lighthouse is a 19th @-@ century"));
  CHECK_THAT(tokens, Contains(" = = History = = \n") && Contains("<unk>") && Contains("1 @,@ 856"));

  const std::string raw = read_wikitext(kFixtures + "/wikitext/wikitext-2-raw", "test", &file);
  CHECK_THAT(file, EndsWith("wiki.test.raw"));
  CHECK(raw == read_file(file));
  CHECK_THAT(raw, Contains("John MacRàith ,"));
  CHECK(raw.find("<unk>") == std::string::npos);
  CHECK(read_wikitext(w2 + "/wiki.test.tokens", "train") == tokens);  // a file as is

  const std::string dir = temp_dir("qa-wikitext");
  write(dir, "wiki.valid.tokens", " = A = \n");
  write(dir, "wiki.valid.raw", " = B = \n");
  CHECK(read_wikitext(dir, "dev") == " = A = \n");  // "dev" is valid; .tokens before .raw
  write(dir, "wiki.train.raw", " = C = \r\n");
  CHECK(read_wikitext(dir, "train") == " = C = \r\n");
  CHECK_ERROR(read_wikitext(dir, "test"),
              Contains(dir) && Contains("wiki.test.tokens") && Contains("wiki.test.raw"));
  CHECK_ERROR(read_wikitext(dir, "validation"),
              Contains("\"validation\"") && Contains("train, valid or test"));
  CHECK_ERROR(read_wikitext(dir + "/none", "test"), Contains("none") && Contains("no such file"));
  const std::string bad = write(dir, "bad/wiki.test.tokens", " \n = T = \n a \xC3( b \n");
  CHECK_ERROR(read_wikitext(fs::path(bad).parent_path().string(), "test"),
              Contains(bad + ":3: invalid UTF-8 at byte 3 of the line"));
}
