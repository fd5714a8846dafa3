// SQuAD features and predictions (src/finetune/squad_features.h) on a tiny WordPiece vocabulary.
// Every expected layout below is derived by hand from run_squad.py's rules; the derivation sits
// in a comment beside it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "data/unicode.h"
#include "finetune/metrics.h"
#include "finetune/squad_features.h"
#include "support.h"
#include "tokenizer/tok_test_util.h"
#include "tokenizer/tokenizer.h"

using namespace saobp;
using bench::SquadAnswer;
using bench::SquadExample;
using Ids = std::vector<int32_t>;

namespace {

const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", ".", "?", "(", ")", "-", "'", "s",
    // short context
    "where", "was", "beyonce", "born", "know", "##les", "in", "houston", "texas", "1981",
    // long context
    "what", "number", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "elev",
    "##en", "twelve",
    // prediction and round trip
    "the", "company", "founded", "1998", "it", "makes", "cars", "when", "leader", "john", "smith", "1895",
    "1943", "steve"};

const Tokenizer& tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    const std::string dir = test::tok_temp_dir("squad");
    std::string txt;
    for (const auto& t : kVocab) txt += t + "\n";
    return load_tokenizer(test::tok_write(dir, "vocab.txt", txt));
  }();
  return *tok;
}

Ids ids_of(const std::vector<std::string>& tokens) {
  Ids out;
  for (const auto& t : tokens) {
    out.push_back(tokenizer().token_to_id(t));
    REQUIRE(out.back() >= 0);
  }
  return out;
}

// The code point index of the first occurrence of `answer` in `context` (SQuAD's answer_start).
SquadAnswer answer_at(const std::string& context, const std::string& answer, size_t from_byte = 0) {
  const size_t byte = context.find(answer, from_byte);
  REQUIRE(byte != std::string::npos);
  int64_t cps = 0;
  for (size_t i = 0; i < byte; ++cps) uni::next_cp(context, i);
  return {answer, cps};
}

SquadExample example(const std::string& id, const std::string& context, const std::string& question,
                     std::vector<SquadAnswer> answers = {}) {
  SquadExample e;
  e.id = id;
  e.context = context;
  e.question = question;
  e.answers = std::move(answers);
  return e;
}

std::vector<uint8_t> u8(std::initializer_list<int> v) { return std::vector<uint8_t>(v.begin(), v.end()); }

// One-hot logits: 1 at the feature's training positions, 0 elsewhere.
void one_hot(const squad::Features& fs, std::vector<std::vector<float>>& st,
             std::vector<std::vector<float>>& en) {
  st.clear();
  en.clear();
  for (const auto& f : fs.features) {
    st.emplace_back(f.ids.size(), 0.0f);
    en.emplace_back(f.ids.size(), 0.0f);
    st.back()[static_cast<size_t>(f.start)] = 1;
    en.back()[static_cast<size_t>(f.end)] = 1;
  }
}

}  // namespace

TEST_CASE("squad short context: one feature, layout and answer positions in code points", "[squad]") {
  const Tokenizer& tok = tokenizer();
  // Words: Beyoncé(0) Knowles(1) was(2) born(3) in(4) Houston,(5) Texas.(6); "é" is 2 bytes, so
  // every byte offset after it is one more than the code point offset.
  const std::string ctx = "Beyonc\u00e9 Knowles was born in Houston, Texas.";
  const std::string q = "Where was Beyonc\u00e9 born?";
  squad::FeatureOptions opt;
  opt.training = true;
  // "in" starts at code point 25 (byte 26); byte offset 25 would be the space after "born".
  REQUIRE(answer_at(ctx, "in").char_start == 25);
  const std::vector<SquadExample> exs = {example("h", ctx, q, {answer_at(ctx, "Houston")}),
                                         example("ht", ctx, q, {answer_at(ctx, "Houston, Texas")}),
                                         example("k", ctx, q, {answer_at(ctx, "Knowles")}),
                                         example("i", ctx, q, {answer_at(ctx, "in")})};
  const squad::Features fs = squad::make_features(exs, tok, opt);
  REQUIRE(fs.features.size() == 4);
  CHECK(fs.split_contexts == 0);
  CHECK(fs.truncated_questions == 0);
  CHECK(fs.unanswerable_chunks == 0);
  CHECK(fs.skipped_examples == 0);
  REQUIRE(fs.word_spans.size() == 4);
  CHECK(fs.word_spans[0] == std::vector<std::pair<int32_t, int32_t>>{
                                {0, 8}, {9, 16}, {17, 20}, {21, 25}, {26, 28}, {29, 37}, {38, 44}});

  const squad::Feature& f = fs.features[0];
  CHECK(f.example == 0);
  CHECK(f.ids == ids_of({"[CLS]", "where", "was", "beyonce", "born", "?", "[SEP]", "beyonce", "know", "##les",
                         "was", "born", "in", "houston", ",", "texas", ".", "[SEP]"}));
  CHECK(f.types == Ids{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK(f.context_offset == 7);
  CHECK(f.token_word == Ids{-1, -1, -1, -1, -1, -1, -1, 0, 1, 1, 2, 3, 4, 5, 5, 6, 6, -1});
  CHECK(f.max_context == u8({0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  // "Houston": word 5 = tokens 13-14 ("houston ,"), narrowed to "houston".
  CHECK((f.start == 13 && f.end == 13));
  // "Houston, Texas": words 5-6 = tokens 13-16, narrowed to "houston , texas".
  CHECK((fs.features[1].start == 13 && fs.features[1].end == 15));
  // "Knowles": both pieces.
  CHECK((fs.features[2].start == 8 && fs.features[2].end == 9));
  // "in": word 4 (token 12), not "born" (token 11).
  CHECK((fs.features[3].start == 12 && fs.features[3].end == 12));

  // Not training: the same inputs, no targets.
  const squad::Features ev = squad::make_features(exs, tok, {});
  CHECK(ev.features[0].ids == f.ids);
  CHECK((ev.features[0].start == 0 && ev.features[0].end == 0));

  // A question longer than max_query_length is cut.
  squad::FeatureOptions cut = opt;
  cut.max_query_length = 3;
  const squad::Features fc = squad::make_features({exs[0]}, tok, cut);
  CHECK(fc.truncated_questions == 1);
  CHECK(fc.features[0].context_offset == 5);
  CHECK(Ids(fc.features[0].ids.begin(), fc.features[0].ids.begin() + 5) ==
        ids_of({"[CLS]", "where", "was", "beyonce", "[SEP]"}));
  CHECK((fc.features[0].start == 11 && fc.features[0].end == 11));
}

TEST_CASE("squad long context: stride, overlap, labels and max-context flags", "[squad]") {
  const Tokenizer& tok = tokenizer();
  // 13 tokens: one two three four five six seven eight nine ten elev ##en twelve (t = 0..12).
  const std::string ctx = "one two three four five six seven eight nine ten eleven twelve";
  squad::FeatureOptions opt;
  opt.max_length = 10;       // question "what number ?" = 3 -> 10 - 3 - 3 = 4 context tokens per chunk
  opt.max_query_length = 4;  // max_length must exceed it + 3 (run_squad.py's flag check)
  opt.doc_stride = 2;
  opt.training = true;
  const squad::Features fs =
      squad::make_features({example("x", ctx, "What number?", {answer_at(ctx, "seven")})}, tok, opt);
  // Chunks start at 0, 2, 4, 6, 8 (4 tokens each) and 10 (3 tokens: 10 + 3 = 13 ends it).
  REQUIRE(fs.features.size() == 6);
  CHECK(fs.split_contexts == 1);
  const Ids head = ids_of({"[CLS]", "what", "number", "?", "[SEP]"});
  const std::vector<std::string> words = {"one",   "two",  "three", "four", "five", "six",   "seven",
                                          "eight", "nine", "ten",   "elev", "##en", "twelve"};
  const int64_t starts[] = {0, 2, 4, 6, 8, 10};
  for (size_t k = 0; k < 6; ++k) {
    const squad::Feature& f = fs.features[k];
    const int64_t len = k < 5 ? 4 : 3;
    std::vector<std::string> chunk(words.begin() + starts[k], words.begin() + starts[k] + len);
    Ids want = head;
    for (const int32_t id : ids_of(chunk)) want.push_back(id);
    want.push_back(tok.special().sep);
    CHECK(f.ids == want);
    CHECK(f.context_offset == 5);
    CHECK(f.types.size() == want.size());
    CHECK(f.types[4] == 0);
    CHECK(f.types[5] == 1);
    CHECK(f.types.back() == 1);
  }
  // "elev ##en" are both word 10 (ten is word 9, twelve word 11).
  CHECK(fs.features[4].token_word == Ids{-1, -1, -1, -1, -1, 8, 9, 10, 10, -1});
  CHECK(fs.features[5].token_word == Ids{-1, -1, -1, -1, -1, 10, 10, 11, -1});
  // "seven" (t = 6) lies in chunks 2 (4-7) and 3 (6-9): position 6 - 4 + 5 = 7 and 6 - 6 + 5 = 5;
  // the other four chunks point at [CLS].
  CHECK((fs.features[2].start == 7 && fs.features[2].end == 7));
  CHECK((fs.features[3].start == 5 && fs.features[3].end == 5));
  for (const size_t k : {0, 1, 4, 5}) CHECK((fs.features[k].start == 0 && fs.features[k].end == 0));
  CHECK(fs.unanswerable_chunks == 4);
  // Max context, score = min(left, right) + 0.01 * chunk length. t = 6: chunk 2 has
  // min(2, 1) + 0.04 = 1.04, chunk 3 min(0, 3) + 0.04 = 0.04 -> chunk 2. In general the first
  // token of a chunk belongs to the previous one and the last to the next, except at the ends;
  // t = 11 (##en): chunk 4 min(3, 0) + 0.04 vs chunk 5 min(1, 1) + 0.03 -> chunk 5; t = 12 only
  // in chunk 5.
  CHECK(fs.features[0].max_context == u8({0, 0, 0, 0, 0, 1, 1, 1, 0, 0}));
  CHECK(fs.features[1].max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  CHECK(fs.features[2].max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  CHECK(fs.features[3].max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  CHECK(fs.features[4].max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  CHECK(fs.features[5].max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 0}));

  // An answer across a chunk boundary: "eight nine ten" (t = 7-9) fits only chunk 3 (6-9).
  const squad::Features f2 =
      squad::make_features({example("y", ctx, "What number?", {answer_at(ctx, "eight nine ten")})}, tok, opt);
  for (size_t k = 0; k < 6; ++k) {
    const bool in = k == 3;
    CHECK(f2.features[k].start == (in ? 6 : 0));
    CHECK(f2.features[k].end == (in ? 8 : 0));
  }
  CHECK(f2.unanswerable_chunks == 5);

  // Prediction takes a span only from its start token's max-context chunk: chunk 3 points hard at
  // "seven" (t = 6, not its max context there), chunk 2 weakly at "five" (t = 4, its max context
  // is chunk 1: chunk 2 gives min(0, 3)) and chunk 1 weakly at "five" too (position 4 - 2 + 5 = 7).
  std::vector<std::vector<float>> st, en;
  for (const auto& f : fs.features) st.emplace_back(f.ids.size(), 0.0f), en.emplace_back(f.ids.size(), 0.0f);
  st[3][5] = en[3][5] = 10;
  st[1][7] = en[1][7] = 1;
  squad::PredictOptions po;
  const auto pred = squad::predict({example("x", ctx, "What number?")}, fs, st, en, tok, po);
  CHECK(pred.at("x") == "five");
}

TEST_CASE("squad predict: spans, get_final_text, n-best, max length, v2.0 null answer", "[squad]") {
  const Tokenizer& tok = tokenizer();
  // Question "when was the company founded ?" = 6 tokens -> context offset 8. Context tokens:
  // the(8) company(9) was(10) founded(11) in(12) 1998(13) .(14) it(15) makes(16) cars(17) .(18)
  const std::string ctx = "The company was founded in 1998. It makes cars.";
  const std::vector<SquadExample> exs = {example("q", ctx, "When was the company founded?")};
  const squad::Features fs = squad::make_features(exs, tok, {});
  REQUIRE(fs.features.size() == 1);
  REQUIRE(fs.features[0].ids.size() == 20);
  REQUIRE(fs.features[0].ids[13] == tok.token_to_id("1998"));
  const size_t L = 20;
  auto logits = [&](std::initializer_list<std::pair<int, float>> s,
                    std::initializer_list<std::pair<int, float>> e, float rest = 0.0f) {
    std::vector<std::vector<float>> st(1, std::vector<float>(L, rest)), en(1, std::vector<float>(L, rest));
    for (const auto& [i, v] : s) st[0][static_cast<size_t>(i)] = v;
    for (const auto& [i, v] : e) en[0][static_cast<size_t>(i)] = v;
    return std::make_pair(st, en);
  };
  squad::PredictOptions po;
  auto run = [&](const std::pair<std::vector<std::vector<float>>, std::vector<std::vector<float>>>& l,
                 const squad::PredictOptions& o) {
    return squad::predict(exs, fs, l.first, l.second, tok, o).at("q");
  };

  // The word "1998." trimmed to the piece "1998"; with the "." piece, the whole word.
  CHECK(run(logits({{13, 5}}, {{13, 5}}), po) == "1998");
  CHECK(run(logits({{13, 5}}, {{14, 5}}), po) == "1998.");
  CHECK(run(logits({{11, 5}}, {{13, 5}}), po) == "founded in 1998");
  CHECK(run(logits({{8, 5}}, {{9, 5}}), po) == "The company");  // original case
  // Spans across words keep the context's own characters between them.
  CHECK(run(logits({{16, 5}}, {{18, 5}}), po) == "makes cars.");

  // max_answer_length: founded..1998 is 3 tokens; with 2, founded..in (5 + 3) is the best left.
  const auto l3 = logits({{11, 5}}, {{13, 5}, {12, 3}});
  CHECK(run(l3, po) == "founded in 1998");
  squad::PredictOptions short_ans = po;
  short_ans.max_answer_length = 2;
  CHECK(run(l3, short_ans) == "founded in");
  // n_best = 1: only (founded, 1998) is tried; too long -> no valid span, run_squad's "empty".
  short_ans.n_best = 1;
  CHECK(run(l3, short_ans) == "empty");
  // n_best = 2 reaches the end logit at "in".
  short_ans.n_best = 2;
  CHECK(run(l3, short_ans) == "founded in");
  // A start inside the question, or an end before the start, is never taken (the rest at -10).
  CHECK(run(logits({{3, 9}, {15, 1}}, {{3, 9}, {13, 8}, {17, 1}}, -10), po) == "It makes cars");

  // v2.0: null score start[0] + end[0] against the best span (5 + 5 = 10).
  squad::PredictOptions v2 = po;
  v2.version_2 = true;
  CHECK(run(logits({{13, 5}, {0, 6}}, {{13, 5}, {0, 5}}), v2) == "");      // 11 > 10
  CHECK(run(logits({{13, 5}, {0, 4}}, {{13, 5}, {0, 5}}), v2) == "1998");  // 9 < 10
  CHECK(run(logits({{13, 5}, {0, 6}}, {{13, 5}, {0, 5}}), po) == "1998");  // v1.1: no null
  v2.null_threshold = 2;
  CHECK(run(logits({{13, 5}, {0, 6}}, {{13, 5}, {0, 5}}), v2) == "1998");  // 11 - 10 < 2
  v2.null_threshold = 0;
  // v2.0 with no valid span among the n-best (n_best = 1: only question token 3): "".
  CHECK(run(logits({{3, 9}}, {{3, 9}}), {1, 30, true, 0.0}) == "");

  // The null score is the least over an example's features: chunks with null scores 100 and 1,
  // the best span 1 + 1 = 2 -> the span wins; with the chunks' null scores both 100, null wins.
  const std::string long_ctx = "one two three four five six seven eight nine ten eleven twelve";
  const std::vector<SquadExample> lx = {example("n", long_ctx, "What number?")};
  squad::FeatureOptions fo;
  fo.max_length = 10;
  fo.max_query_length = 4;
  fo.doc_stride = 2;
  const squad::Features lf = squad::make_features(lx, tok, fo);
  REQUIRE(lf.features.size() == 6);
  std::vector<std::vector<float>> st, en;
  for (const auto& f : lf.features)
    st.emplace_back(f.ids.size(), 50.0f), en.emplace_back(f.ids.size(), 50.0f);
  for (size_t k = 0; k < 6; ++k)
    for (size_t t = 5; t + 1 < lf.features[k].ids.size(); ++t) st[k][t] = en[k][t] = -1;
  st[2][7] = en[2][7] = 1;  // "seven" in its max-context chunk
  st[4][0] = en[4][0] = 0.5f;
  CHECK(squad::predict(lx, lf, st, en, tok, v2).at("n") == "seven");
  st[4][0] = en[4][0] = 50;
  CHECK(squad::predict(lx, lf, st, en, tok, v2).at("n") == "");

  // Size mismatches are errors.
  auto bad = logits({}, {});
  bad.first[0].pop_back();
  CHECK_ERROR(squad::predict(exs, fs, bad.first, bad.second, tok, po), Catch::Matchers::Contains("[squad]"));
}

TEST_CASE("squad final_text: the predicted pieces inside the original words", "[squad]") {
  CHECK(squad::final_text("stevesmith", "Steve Smith's") == "Steve Smith");
  CHECK(squad::final_text("1895", "(1895-1943).") == "1895");
  CHECK(squad::final_text("beyonceknowles", "Beyonc\u00e9 Knowles,") == "Beyonc\u00e9 Knowles");
  CHECK(squad::final_text("knowles", "Beyonc\u00e9 Knowles,") == "Knowles");
  CHECK(squad::final_text("beyonce", "Beyonc\u00e9's") == "Beyonc\u00e9");  // the accent's code points kept
  CHECK(squad::final_text("[unk]", "Houston,") == "Houston,");              // not found: all of it
  CHECK(squad::final_text("", "Houston,") == "Houston,");
}

TEST_CASE("squad impossible and unrecoverable training examples", "[squad]") {
  const Tokenizer& tok = tokenizer();
  const std::string ctx = "one two three four five six seven eight nine ten eleven twelve";
  SquadExample imp = example("imp", ctx, "What number?");
  imp.is_impossible = true;
  imp.plausible_answers = {answer_at(ctx, "seven")};
  squad::FeatureOptions opt;
  opt.max_length = 10;
  opt.max_query_length = 4;
  opt.doc_stride = 2;
  opt.training = true;
  // The answer text is not at its char_start: run_squad.py drops the example.
  SquadExample off = example("off", ctx, "What number?", {{"seven", 0}});
  const squad::Features fs = squad::make_features({imp, off}, tok, opt);
  REQUIRE(fs.features.size() == 6);
  for (const auto& f : fs.features) {
    CHECK(f.example == 0);
    CHECK((f.start == 0 && f.end == 0));
  }
  CHECK(fs.unanswerable_chunks == 0);
  CHECK(fs.skipped_examples == 1);
  CHECK(fs.word_spans.size() == 2);

  // An empty context still gives one feature: [CLS] question [SEP] [SEP].
  const squad::Features fe = squad::make_features({example("e", "", "What number?")}, tok, opt);
  REQUIRE(fe.features.size() == 1);
  CHECK(fe.features[0].ids == ids_of({"[CLS]", "what", "number", "?", "[SEP]", "[SEP]"}));

  // Bad options are errors.
  squad::FeatureOptions tight = opt;
  tight.max_query_length = 7;  // 10 - 7 - 3 = 0 context tokens
  CHECK_ERROR(squad::make_features({imp}, tok, tight), Catch::Matchers::Contains("max_query_length"));
}

TEST_CASE("squad round trip: gold positions -> one-hot logits -> the gold answer", "[squad]") {
  const Tokenizer& tok = tokenizer();
  const std::vector<std::pair<std::string, std::vector<std::string>>> paras = {
      {"The leader was John Smith (1895-1943).", {"1895", "John Smith", "leader", "1943", "The leader"}},
      {"Steve Smith's company makes cars in Texas.", {"Steve Smith", "cars", "Texas", "company makes cars"}},
      {"Beyonc\u00e9 Knowles was born in Houston, Texas, in 1981.",
       {"Beyonc\u00e9 Knowles", "Houston", "Houston, Texas", "1981", "Knowles"}},
      {"one two three four five six seven eight nine ten eleven twelve",
       {"one", "four", "five six", "seven eight nine", "eleven", "eleven twelve", "twelve"}}};
  std::vector<SquadExample> exs;
  for (const auto& [ctx, answers] : paras)
    for (const auto& a : answers)
      exs.push_back(example(std::to_string(exs.size()), ctx, "What?", {answer_at(ctx, a)}));
  squad::FeatureOptions opt;
  opt.max_length = 13;  // "what ?" -> 8 context tokens per chunk
  opt.max_query_length = 4;
  opt.doc_stride = 4;
  opt.training = true;
  const squad::Features fs = squad::make_features(exs, tok, opt);
  CHECK(fs.skipped_examples == 0);
  CHECK(fs.split_contexts > 0);
  std::vector<std::vector<float>> st, en;
  one_hot(fs, st, en);
  const auto pred = squad::predict(exs, fs, st, en, tok, {});
  for (const auto& ex : exs) {
    INFO("answer: " << ex.answers[0].text << " | predicted: " << pred.at(ex.id));
    CHECK(metrics::squad_normalize(pred.at(ex.id)) == metrics::squad_normalize(ex.answers[0].text));
  }
  // The texts themselves, for the answers whose word carries punctuation.
  CHECK(pred.at("0") == "1895");
  CHECK(pred.at("5") == "Steve Smith");
  CHECK(pred.at("9") == "Beyonc\u00e9 Knowles");
  CHECK(pred.at("11") == "Houston, Texas");
}

// ---- GPT-2: question <|endoftext|> chunk <|endoftext|> ------------------------------------------

namespace {

// A byte-level BPE vocabulary in which each of `words` (raw text; a leading space becomes "Ġ") is
// one token: every single character, then per word the merges joining its characters left to
// right (shared prefixes merged once), and <|endoftext|> last.
const Tokenizer& gpt2_tokenizer() {
  static const std::vector<std::string> words = {
      "Where",  " was",   " Beyonce", " born", "?",      " Knowles", " in",  " Houston",
      ",",      " Texas", ".",        " (",    "1981",   ")",        " one", " two",
      " three", " four",  " five",    " six",  " seven", " eight"};
  static const std::unique_ptr<Tokenizer> tok = [] {
    std::vector<std::string> vocab, merges;
    auto sym = [](char c) { return c == ' ' ? std::string("\u0120") : std::string(1, c); };
    auto add = [&](const std::string& s) {
      if (std::find(vocab.begin(), vocab.end(), s) == vocab.end()) vocab.push_back(s);
    };
    for (const std::string& w : words)
      for (char c : w) add(sym(c));
    for (const std::string& w : words) {
      std::string left = sym(w[0]);
      for (size_t i = 1; i < w.size(); ++i) {
        const std::string m = left + " " + sym(w[i]);
        if (std::find(merges.begin(), merges.end(), m) == merges.end()) merges.push_back(m);
        left += sym(w[i]);
        add(left);
      }
    }
    add("<|endoftext|>");
    nlohmann::json v = nlohmann::json::object();
    for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
    std::string mt = "#version: 0.2\n";
    for (const std::string& m : merges) mt += m + "\n";
    const std::string dir = test::tok_temp_dir("squad_gpt2");
    test::tok_write(dir, "vocab.json", v.dump());
    test::tok_write(dir, "merges.txt", mt);
    return load_tokenizer(dir);
  }();
  return *tok;
}

// The ids of `words`, each one token (checked: the vocabulary makes each a single piece).
Ids gpt2_ids(const std::vector<std::string>& words) {
  Ids out;
  for (const std::string& w : words) {
    if (w == "<eos>") {
      out.push_back(gpt2_tokenizer().special().eos);
      continue;
    }
    const Ids one = gpt2_tokenizer().encode(w);
    INFO(w);
    REQUIRE(one.size() == 1);
    out.push_back(one[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("squad GPT-2 features: question first, end-token separator, null at the last token", "[squad]") {
  const Tokenizer& tok = gpt2_tokenizer();
  // Words: Beyonce(0) Knowles(1) was(2) born(3) in(4) Houston,(5) Texas.(6), each tokenized with a
  // space before it: "Houston," -> " Houston" ",".
  const std::string ctx = "Beyonce Knowles was born in Houston, Texas.";
  const std::string q = "Where was Beyonce born?";
  SquadExample imp = example("imp", ctx, q);
  imp.is_impossible = true;
  const std::vector<SquadExample> exs = {example("h", ctx, q, {answer_at(ctx, "Houston")}),
                                         example("ht", ctx, q, {answer_at(ctx, "Houston, Texas")}), imp};
  squad::FeatureOptions opt;
  opt.training = true;
  opt.decoder = true;
  const squad::Features fs = squad::make_features(exs, tok, opt);
  REQUIRE(fs.features.size() == 3);
  CHECK(fs.split_contexts == 0);
  const squad::Feature& f = fs.features[0];
  // question (as it stands: "Where" without a space) <|endoftext|> context <|endoftext|>.
  CHECK(f.ids == gpt2_ids({"Where", " was", " Beyonce", " born", "?", "<eos>", " Beyonce", " Knowles", " was",
                           " born", " in", " Houston", ",", " Texas", ".", "<eos>"}));
  CHECK(f.types == Ids(16, 0));
  CHECK(f.context_offset == 6);
  CHECK(f.null_index == 15);
  CHECK(f.token_word == Ids{-1, -1, -1, -1, -1, -1, 0, 1, 2, 3, 4, 5, 5, 6, 6, -1});
  CHECK(f.max_context == u8({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  // "Houston": word 5 = tokens 11-12 (" Houston" ","), narrowed to " Houston".
  CHECK((f.start == 11 && f.end == 11));
  // "Houston, Texas": words 5-6 = tokens 11-14, narrowed to " Houston" "," " Texas".
  CHECK((fs.features[1].start == 11 && fs.features[1].end == 13));
  // Impossible (v2.0): both targets at the last token, the final <|endoftext|>.
  CHECK((fs.features[2].start == 15 && fs.features[2].end == 15));
  CHECK(fs.features[2].null_index == 15);

  // An answer inside a word: the word "(1981)" is " (" "1981" ")"; " 1981" (Ġ 1981) is not in it,
  // "1981" as it stands is: the span narrows to that one token.
  const std::string c2 = "born in (1981)";
  const squad::Features f2 =
      squad::make_features({example("y", c2, "Where?", {answer_at(c2, "1981")})}, tok, opt);
  REQUIRE(f2.features.size() == 1);
  CHECK(f2.features[0].ids == gpt2_ids({"Where", "?", "<eos>", " born", " in", " (", "1981", ")", "<eos>"}));
  CHECK(f2.features[0].token_word == Ids{-1, -1, -1, 0, 1, 2, 2, 2, -1});
  CHECK((f2.features[0].start == 6 && f2.features[0].end == 6));

  // Two specials per feature: max_length must exceed max_query_length + 2.
  squad::FeatureOptions tight = opt;
  tight.max_length = 6, tight.max_query_length = 4;
  CHECK_ERROR(squad::make_features(exs, tok, tight), Catch::Matchers::Contains("max_query_length (4) + 2"));
  // The encoder's layout needs [CLS]; the decoder's <|endoftext|>.
  CHECK_ERROR(squad::make_features(exs, tok, squad::FeatureOptions{}), Catch::Matchers::Contains("[CLS]"));
  opt.decoder = true;
  CHECK_ERROR(squad::make_features(exs, tokenizer(), opt), Catch::Matchers::Contains("<|endoftext|>"));
}

TEST_CASE("squad GPT-2 long context: stride, labels at the null token, max-context flags", "[squad]") {
  const Tokenizer& tok = gpt2_tokenizer();
  // 8 context tokens, question "Where ?" (2): max_length 8 leaves 8 - 2 - 2 = 4 per chunk; stride 2
  // gives chunks [0,3], [2,5], [4,7].
  const std::string ctx = "one two three four five six seven eight";
  squad::FeatureOptions opt;
  opt.training = true, opt.decoder = true;
  opt.max_length = 8, opt.doc_stride = 2, opt.max_query_length = 4;
  const squad::Features fs =
      squad::make_features({example("s", ctx, "Where?", {answer_at(ctx, "six")})}, tok, opt);
  REQUIRE(fs.features.size() == 3);
  CHECK(fs.split_contexts == 1);
  CHECK(fs.unanswerable_chunks == 1);
  const Ids head = gpt2_ids({"Where", "?", "<eos>"});
  const auto feature_ids = [&](std::vector<std::string> words) {
    Ids ids = head;
    words.push_back("<eos>");
    for (int32_t id : gpt2_ids(words)) ids.push_back(id);
    return ids;
  };
  CHECK(fs.features[0].ids == feature_ids({" one", " two", " three", " four"}));
  CHECK(fs.features[1].ids == feature_ids({" three", " four", " five", " six"}));
  CHECK(fs.features[2].ids == feature_ids({" five", " six", " seven", " eight"}));
  // "six" is context token 5: outside chunk 0 (null: the last token, 7), position 3 + 3 in chunk 1,
  // 3 + 1 in chunk 2.
  CHECK((fs.features[0].start == 7 && fs.features[0].end == 7));
  CHECK((fs.features[1].start == 6 && fs.features[1].end == 6));
  CHECK((fs.features[2].start == 4 && fs.features[2].end == 4));
  // _check_is_max_context on chunk 1 (tokens 2-5): token 2 scores min(2,1) in chunk 0 against
  // min(0,3) here; 3 and 4 score 1 here; token 5 scores min(1,2) = 1 in chunk 2 against 0 here.
  CHECK(fs.features[1].max_context == u8({0, 0, 0, 0, 1, 1, 0, 0}));
  CHECK(fs.features[0].max_context == u8({0, 0, 0, 1, 1, 1, 0, 0}));
  CHECK(fs.features[2].max_context == u8({0, 0, 0, 0, 1, 1, 1, 0}));
}

TEST_CASE("squad GPT-2 round trip and v2.0 null answer at the last token", "[squad]") {
  const Tokenizer& tok = gpt2_tokenizer();
  const std::string c1 = "Beyonce Knowles was born in Houston, Texas.";
  const std::string c2 = "one two three four five six seven eight";
  std::vector<SquadExample> exs;
  for (const char* a : {"Beyonce Knowles", "Houston", "Houston, Texas", "Texas"})
    exs.push_back(example(std::to_string(exs.size()), c1, "Where?", {answer_at(c1, a)}));
  for (const char* a : {"one", "four five", "six", "seven eight"})
    exs.push_back(example(std::to_string(exs.size()), c2, "Where?", {answer_at(c2, a)}));
  SquadExample imp = example("imp", c2, "Where?");
  imp.is_impossible = true;
  exs.push_back(imp);
  squad::FeatureOptions opt;
  opt.training = true, opt.decoder = true;
  opt.max_length = 8, opt.doc_stride = 2, opt.max_query_length = 4;
  const squad::Features fs = squad::make_features(exs, tok, opt);
  CHECK(fs.skipped_examples == 0);
  std::vector<std::vector<float>> st, en;
  one_hot(fs, st, en);
  squad::PredictOptions po;
  po.version_2 = true;
  std::map<std::string, double> odds;
  const auto pred = squad::predict(exs, fs, st, en, tok, po, &odds);
  CHECK(pred.at("0") == "Beyonce Knowles");
  CHECK(pred.at("1") == "Houston");
  CHECK(pred.at("2") == "Houston, Texas");
  CHECK(pred.at("3") == "Texas");
  CHECK(pred.at("4") == "one");
  CHECK(pred.at("5") == "four five");
  CHECK(pred.at("6") == "six");
  CHECK(pred.at("7") == "seven eight");
  // The impossible question: every feature's one-hot sits on its last token, so its null score
  // 1 + 1 beats every span (0 + 0): "", with odds 2 - 0.
  CHECK(pred.at("imp").empty());
  CHECK(odds.at("imp") == Approx(2.0));
  // An answerable example's chunk has null score 0 (the least over its features) and the gold
  // span 2: odds -2.
  CHECK(odds.at("6") == Approx(-2.0));
}
