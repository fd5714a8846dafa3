// VocabTrainer: the merges HF's BpeTrainer / WordPieceTrainer would make on a hand-countable
// corpus, save -> load round trips through every file format, determinism.
//
// The corpus of the first two tests is the one of Hugging Face's course (chapter 6, "Byte-Pair
// Encoding tokenization"): hug x10, pug x5, pun x12, bun x4, hugs x5. Its merges, counted by hand:
// (u,g) 20, then (u,n) 16, then (h,ug) 15.
#include <catch2/catch.hpp>

#include "support.h"
#include "tok_test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

using namespace saobp;
using Catch::Matchers::Contains;
using Ids = std::vector<int32_t>;

namespace {

void feed_course(VocabTrainer& tr) {
  const std::pair<const char*, int> words[] = {{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}};
  for (const auto& [w, n] : words)
    for (int i = 0; i < n; ++i) tr.feed(w);
}

// A small corpus with some variety, written by the test itself.
std::vector<std::string> small_corpus() {
  std::vector<std::string> t;
  const char* base[] = {
      "The quick brown fox jumps over the lazy dog.",
      "Natural language processing with transformers is fun; tokenizers split text into pieces.",
      "Caf\u00E9s in Espa\u00F1a serve caf\u00E9 con leche, and na\u00EFve visitors order two.",
      "\u4ECA\u65E5\u306F\u3044\u3044\u5929\u6C17\u3067\u3059\u3002 \U0001F600 emoji too!",
      "Numbers like 3.14159 and 2024 appear; so do contractions: it's, we've, don't.",
  };
  for (int r = 0; r < 6; ++r)
    for (const char* s : base) t.push_back(fmt::format("{} ({})", s, r));
  return t;
}

}  // namespace

TEST_CASE("vocab trainer bpe makes the course merges", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.kind = "bpe";
  opt.vocab_size = 256 + 3 + 1;  // bytes, three merges, <|endoftext|>
  opt.min_frequency = 1;
  VocabTrainer tr(opt);
  feed_course(tr);
  const auto tok = tr.finish();
  auto* bpe = dynamic_cast<BpeTokenizer*>(tok.get());
  REQUIRE(bpe);
  REQUIRE(bpe->merges().size() == 3);
  auto merge = [&](size_t i) {
    return bpe->tokens()[bpe->merges()[i].first] + " " + bpe->tokens()[bpe->merges()[i].second];
  };
  CHECK(merge(0) == "u g");
  CHECK(merge(1) == "u n");
  CHECK(merge(2) == "h ug");
  CHECK(tok->vocab_size() == 260);
  CHECK(tok->id_to_token(0) == "!");  // GPT-2's byte order
  CHECK(tok->id_to_token(259) == "<|endoftext|>");
  CHECK(tok->encode("hugs bun") == Ids{tok->token_to_id("hug"), tok->token_to_id("s"),
                                       tok->token_to_id("\u0120"), tok->token_to_id("b"),
                                       tok->token_to_id("un")});
}

TEST_CASE("vocab trainer wordpiece makes the course merges with continuations", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.kind = "wordpiece";
  opt.vocab_size = 19;
  opt.min_frequency = 1;
  VocabTrainer tr(opt);
  feed_course(tr);
  const auto tok = tr.finish();
  // Specials, the alphabet by code point, the "##" symbols in the order the sorted words meet
  // them (bun hug hugs pug pun), then the merges ##u+##g, ##u+##n, h+##ug.
  const std::vector<std::string> expect = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b",   "g",
                                           "h",     "n",     "p",     "s",     "u",      "##u", "##n",
                                           "##g",   "##s",   "##ug",  "##un",  "hug"};
  REQUIRE(tok->vocab_size() == static_cast<int64_t>(expect.size()));
  for (size_t i = 0; i < expect.size(); ++i) CHECK(tok->id_to_token(static_cast<int32_t>(i)) == expect[i]);
  CHECK(tok->encode("Hugs pun") == Ids{18, 15, 9, 17});
}

TEST_CASE("vocab trainer wordpiece round trip through vocab.txt and tokenizer.json", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.kind = "wordpiece";
  opt.vocab_size = 200;
  VocabTrainer tr(opt);
  for (const auto& s : small_corpus()) tr.feed(s);
  const auto tok = tr.finish();
  CHECK(tok->vocab_size() <= 200);
  CHECK(tok->special().pad == 0);
  CHECK(tok->special().mask == 4);
  const std::string dir = test::tok_temp_dir("vt_wp");
  tok->save(dir);
  const auto a = load_tokenizer(dir + "/vocab.txt");
  const auto b = load_tokenizer(dir + "/tokenizer.json");
  const auto c = load_tokenizer(dir);
  for (const auto& s : small_corpus()) {
    const Ids ids = tok->encode(s);
    CHECK(a->encode(s) == ids);
    CHECK(b->encode(s) == ids);
    CHECK(c->encode(s) == ids);
  }
  CHECK(a->fingerprint() == tok->fingerprint());
  CHECK(b->fingerprint() == tok->fingerprint());
}

TEST_CASE("vocab trainer bpe round trip through vocab.json, merges.txt and tokenizer.json", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.kind = "bpe";
  opt.vocab_size = 400;
  VocabTrainer tr(opt);
  for (const auto& s : small_corpus()) tr.feed(s);
  const auto tok = tr.finish();
  CHECK(tok->vocab_size() <= 400);
  CHECK(tok->special().eos == tok->vocab_size() - 1);
  const std::string dir = test::tok_temp_dir("vt_bpe");
  tok->save(dir);
  const auto a = load_tokenizer(dir + "/vocab.json");
  const auto b = load_tokenizer(dir + "/tokenizer.json");
  for (const auto& s : small_corpus()) {
    const Ids ids = tok->encode(s);
    CHECK(a->encode(s) == ids);
    CHECK(b->encode(s) == ids);
    CHECK(a->decode(ids) == s);
  }
  CHECK(a->fingerprint() == tok->fingerprint());
  CHECK(b->fingerprint() == tok->fingerprint());
}

TEST_CASE("vocab trainer is deterministic", "[tokenizer]") {
  for (const char* kind : {"wordpiece", "bpe"}) {
    std::string files[2];
    for (int run = 0; run < 2; ++run) {
      VocabTrainOptions opt;
      opt.kind = kind;
      opt.vocab_size = 300;
      VocabTrainer tr(opt);
      for (const auto& s : small_corpus()) tr.feed(s);
      const std::string dir = test::tok_temp_dir(fmt::format("vt_det_{}_{}", kind, run));
      tr.finish()->save(dir);
      for (const char* f :
           {"vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"})
        files[run] += std::string(f) + "\n" + test::tok_slurp(dir + "/" + f);
    }
    INFO(kind);
    CHECK(files[0] == files[1]);
    CHECK(files[0].size() > 1000);
  }
}

TEST_CASE("vocab trainer rejects bad options and text", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.kind = "unigram";
  CHECK_ERROR(VocabTrainer{opt}, Contains("wordpiece or bpe"));
  opt.kind = "bpe";
  VocabTrainer tr(opt);
  CHECK_ERROR(tr.feed("ok \xF0\x9F"), Contains("byte 3"));
}

TEST_CASE("vocab trainer refuses sizes and corpora that give no real vocabulary", "[tokenizer]") {
  VocabTrainOptions opt;
  opt.min_frequency = 1;
  // Smaller than the specials and the corpus's initial symbols: it wrote 109 tokens for 3.
  const auto course = [&] {
    VocabTrainer tr(opt);
    feed_course(tr);
    return tr.finish();
  };
  opt.kind = "wordpiece";
  opt.vocab_size = 3;
  CHECK_ERROR(course(), Contains("vocab_size (--size) = 3 is smaller than the initial vocabulary") &&
                            Contains("give at least 16"));
  opt.vocab_size = 16;  // exactly the initial vocabulary: no merge, but a vocabulary
  CHECK(course()->vocab_size() == 16);
  opt.kind = "bpe";
  opt.vocab_size = 100;
  CHECK_ERROR(VocabTrainer{opt}, Contains("100 is below the 257 tokens"));
  opt.vocab_size = 300;
  opt.min_frequency = -1;
  CHECK_ERROR(VocabTrainer{opt}, Contains("min_frequency (--min-frequency) must be >= 0, got -1"));
  opt.min_frequency = 1;
  // An empty corpus wrote a specials-only vocabulary with exit 0.
  for (const char* kind : {"wordpiece", "bpe"}) {
    INFO(kind);
    opt.kind = kind;
    const auto empty = [&] {
      VocabTrainer tr(opt);
      tr.feed("");
      return tr.finish();
    };
    CHECK_ERROR(empty(), Contains("the corpus has no words"));
  }
}
