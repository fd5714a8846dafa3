// Corpora, the token cache and the batchers: formats, errors naming file and line, cache
// validation, packing, masking statistics, deterministic shuffling, causal-LM windows.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "data/token_cache.h"

using namespace saobp;
namespace fs = std::filesystem;

#define CHECK_ERROR(expr, matcher)         \
  do {                                     \
    CHECK_THROWS_AS(expr, ::saobp::Error); \
    CHECK_THROWS_WITH(expr, matcher);      \
  } while (0)

using Catch::Matchers::Contains;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("saobp-data-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Doc {
  std::vector<std::string> lines;
  std::string file;
  int64_t line;
};

std::vector<Doc> read_all(const CorpusSpec& spec) {
  std::vector<Doc> out;
  for_each_document(spec, [&](const Document& d) { out.push_back({d.lines, d.file, d.first_line}); });
  return out;
}

// A cache from explicit documents of sentences of ids.
std::shared_ptr<const TokenCache> make_cache(const std::string& path,
                                             const std::vector<std::vector<std::vector<int32_t>>>& docs) {
  TokenCacheWriter w(path, {1, 2});
  for (const auto& d : docs) {
    for (const auto& s : d) w.add_sentence(s);
    w.end_document();
  }
  w.finish();
  return std::make_shared<const TokenCache>(TokenCache::open(path));
}

std::vector<int32_t> run(int32_t from, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = from + i;
  return v;
}

}  // namespace

TEST_CASE("corpus: text files split documents at blank lines, folders read in path order", "[data]") {
  const std::string dir = temp_dir("text");
  write(dir + "/b.txt", "third doc\n");
  write(dir + "/a.txt", "first line\r\nsecond line\n\n \n\nanother doc\n");
  fs::create_directories(dir + "/.hidden");
  write(dir + "/.hidden/x.txt", "never read\n");
  const auto docs = read_all({"text", dir, "text"});
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].lines == std::vector<std::string>{"first line", "second line"});
  CHECK(docs[0].line == 1);
  CHECK(docs[1].lines == std::vector<std::string>{"another doc"});
  CHECK(docs[1].line == 6);
  CHECK(docs[2].lines == std::vector<std::string>{"third doc"});
  CHECK(fs::path(docs[2].file).filename() == "b.txt");
}

TEST_CASE("corpus: fortune, wikitext and jsonl formats", "[data]") {
  const std::string dir = temp_dir("formats");
  write(dir + "/f", "A day for firm decisions.\n%\nTwo\nlines.\n%\n%\nLast.\n");
  write(dir + "/f.dat", std::string("\x00\x01\x02", 3));  // the strfile index, skipped
  const auto f = read_all({"fortune", dir, "text"});
  REQUIRE(f.size() == 3);
  CHECK(f[1].lines == std::vector<std::string>{"Two", "lines."});
  CHECK(f[2].lines == std::vector<std::string>{"Last."});

  const std::string wiki = dir + "/wiki.raw";
  write(wiki,
        " \n = Valkyria = \n \n Senjō no Valkyria 3 .\n \n = = Gameplay = = \n \n Text .\n = Tower = \n Body "
        ".\n");
  const auto w = read_all({"wikitext", wiki, "text"});
  REQUIRE(w.size() == 2);
  CHECK(w[0].lines.front() == " = Valkyria = ");
  CHECK(w[0].lines.size() == 4);  // title, paragraph, section heading, paragraph
  CHECK(w[1].lines == std::vector<std::string>{" = Tower = ", " Body ."});

  const std::string jl = dir + "/c.jsonl";
  write(jl, "{\"text\": \"one\\ntwo\", \"id\": 1}\n\n{\"body\": \"x\", \"text\": \"three\"}\n");
  const auto j = read_all({"jsonl", jl, "text"});
  REQUIRE(j.size() == 2);
  CHECK(j[0].lines == std::vector<std::string>{"one", "two"});
  CHECK(j[1].line == 3);
}

TEST_CASE("corpus: bad input names the file and line", "[data]") {
  const std::string dir = temp_dir("bad");
  write(dir + "/bad.txt", "good line\nbad \xC3\x28 byte\n");
  CHECK_ERROR(read_all({"text", dir + "/bad.txt", "text"}), Contains("bad.txt:2:") && Contains("UTF-8"));
  write(dir + "/over.txt", "overlong \xC0\xAF\n");
  CHECK_ERROR(read_all({"text", dir + "/over.txt", "text"}), Contains("over.txt:1:"));
  write(dir + "/surrogate.txt", "ok\nok\n\xED\xA0\x80\n");
  CHECK_ERROR(read_all({"text", dir + "/surrogate.txt", "text"}), Contains("surrogate.txt:3:"));
  write(dir + "/bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": \n");
  CHECK_ERROR(read_all({"jsonl", dir + "/bad.jsonl", "text"}), Contains("bad.jsonl:2:") && Contains("JSON"));
  write(dir + "/nofield.jsonl", "{\"body\": \"x\"}\n");
  CHECK_ERROR(read_all({"jsonl", dir + "/nofield.jsonl", "text"}),
              Contains("nofield.jsonl:1:") && Contains("\"text\""));
  CHECK_ERROR(read_all({"text", dir + "/missing", "text"}), Contains("missing") && Contains("no such file"));
  CHECK_ERROR(read_all({"csv", dir, "text"}), Contains("unknown corpus kind"));
}

TEST_CASE("corpus: the fingerprint changes with the files", "[data]") {
  const std::string dir = temp_dir("fp");
  write(dir + "/a.txt", "one\n");
  const CorpusSpec spec{"text", dir, "text"};
  const uint64_t a = corpus_fingerprint(spec);
  CHECK(corpus_fingerprint(spec) == a);
  write(dir + "/a.txt", "one two\n");
  CHECK(corpus_fingerprint(spec) != a);
  CHECK(corpus_fingerprint({"fortune", dir, "text"}) != corpus_fingerprint(spec));
}

TEST_CASE("token cache: round trip, key, and rejection of truncated or foreign files", "[data]") {
  const std::string dir = temp_dir("cache");
  const std::string path = dir + "/t.bin";
  {
    TokenCacheWriter w(path, {11, 22});
    w.add_sentence(std::vector<int32_t>{5, 6, 7});
    w.add_sentence(std::vector<int32_t>{8});
    w.end_document();
    w.add_sentence(std::vector<int32_t>{9, 10});
    w.end_document();
    w.end_document();  // an empty document is not recorded
    w.finish();
  }
  const TokenCache c = TokenCache::open(path);
  CHECK(c.key() == TokenCacheKey{11, 22});
  CHECK(std::vector<uint32_t>(c.tokens().begin(), c.tokens().end()) ==
        std::vector<uint32_t>{5, 6, 7, 8, 9, 10});
  CHECK(std::vector<uint64_t>(c.sentence_end().begin(), c.sentence_end().end()) ==
        std::vector<uint64_t>{3, 4, 6});
  CHECK(std::vector<uint64_t>(c.document_end().begin(), c.document_end().end()) ==
        std::vector<uint64_t>{2, 3});
  TokenCacheKey k;
  REQUIRE(read_token_cache_key(path, k));
  CHECK(k == TokenCacheKey{11, 22});
  CHECK_FALSE(read_token_cache_key(dir + "/none.bin", k));

  std::string bytes = read_file(path);
  write(dir + "/trunc.bin", bytes.substr(0, bytes.size() - 8));
  CHECK_ERROR(TokenCache::open(dir + "/trunc.bin"), Contains("trunc.bin") && Contains("truncated"));
  write(dir + "/short.bin", bytes.substr(0, 20));
  CHECK_ERROR(TokenCache::open(dir + "/short.bin"), Contains("short.bin") && Contains("truncated"));
  std::string foreign = bytes;
  foreign[0] = 'X';
  write(dir + "/foreign.bin", foreign);
  CHECK_ERROR(TokenCache::open(dir + "/foreign.bin"), Contains("not a saobp token file"));
  CHECK_FALSE(read_token_cache_key(dir + "/foreign.bin", k));
  std::string corrupt = bytes;
  corrupt[corrupt.size() - 16] = 99;  // the first document end, now past the sentence count
  write(dir + "/corrupt.bin", corrupt);
  CHECK_ERROR(TokenCache::open(dir + "/corrupt.bin"), Contains("corrupt"));
  // An unfinished writer leaves nothing behind.
  { TokenCacheWriter w(dir + "/never.bin", {1, 1}); }
  CHECK_FALSE(fs::exists(dir + "/never.bin"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 5);
}

TEST_CASE("packing: sentences fill examples up to the budget, with a SEP token between documents", "[data]") {
  const std::string dir = temp_dir("pack");
  // doc 0: sentences of 3 and 4 tokens; doc 1: one of 2; doc 2: one of 11 (longer than budget 5)
  const auto c = make_cache(dir + "/p.bin", {{run(10, 3), run(20, 4)}, {run(30, 2)}, {run(40, 11)}});
  const auto ex = pack_sentences(*c, 5);
  // [10..12] (3) then 20.. would make 7 > 5: emit; [20..23] (4) + SEP + 2 = 7 > 5: emit;
  // [30,31] (2) + SEP + 11 > 5: emit; 11 tokens -> 5, 5, 1.
  const std::vector<std::pair<uint64_t, uint64_t>> want = {{0, 3},  {3, 7},   {7, 9},
                                                           {9, 14}, {14, 19}, {19, 20}};
  REQUIRE(ex.size() == want.size());
  for (size_t i = 0; i < ex.size(); ++i) CHECK(std::make_pair(ex[i].begin, ex[i].end) == want[i]);
  const auto wide = pack_sentences(*c, 12);  // 3 + 4 + SEP + 2 = 10 fits; then the 11-token doc
  REQUIRE(wide.size() == 2);
  CHECK(wide[0].end == 9);
  CHECK(wide[1].begin == 9);
}

TEST_CASE("masked-LM batches: layout, masking statistics, determinism", "[data]") {
  const std::string dir = temp_dir("mlm");
  std::vector<std::vector<std::vector<int32_t>>> docs;
  for (int d = 0; d < 400; ++d) docs.push_back({run(10 + d % 50, 7), run(100 + d % 30, 9)});
  const auto train = make_cache(dir + "/train.bin", docs);
  const auto valid = make_cache(dir + "/valid.bin", {{run(10, 5)}, {run(20, 6)}});
  const MlmSpecials sp{2, 3, 0, 4};  // cls sep pad mask
  const int64_t B = 8, T = 24, V = 1000;
  const auto src = corpus_mlm_source(train, valid, B, T, V, sp, 42, 0.15);

  // Layout: [CLS] first, [SEP] last real token, padding after with key_mask 0.
  const MlmBatch v = src->batch(Split::valid, 0);
  const auto ids = v.ids.to_vector<int32_t>();
  const auto lab = v.labels.to_vector<int32_t>();
  const auto msk = v.key_mask.to_vector<uint8_t>();
  // valid example 0 is both documents packed: [CLS] 10..14 [SEP] 20..25 [SEP] = 14 tokens
  CHECK(ids[0] == 2);
  for (int t = 0; t < 14; ++t) CHECK(msk[static_cast<size_t>(t)] == 1);
  for (int t = 14; t < T; ++t) CHECK((msk[static_cast<size_t>(t)] == 0 && ids[static_cast<size_t>(t)] == 0));
  for (int t = 0; t < 14; ++t) {
    const int32_t orig =
        lab[static_cast<size_t>(t)] != -100 ? lab[static_cast<size_t>(t)] : ids[static_cast<size_t>(t)];
    const int32_t want = t == 0 ? 2 : t == 6 || t == 13 ? 3 : t < 6 ? 10 + t - 1 : 20 + t - 7;
    CHECK(orig == want);
  }

  // Statistics over many batches: 15% chosen among regular tokens, of which 80/10/10.
  int64_t regular = 0, chosen = 0, masked = 0, kept = 0, special_chosen = 0;  // originals are all >= 10
  for (int64_t i = 0; i < 200; ++i) {
    const MlmBatch b = src->batch(Split::train, i);
    const auto x = b.ids.to_vector<int32_t>();
    const auto y = b.labels.to_vector<int32_t>();
    const auto m = b.key_mask.to_vector<uint8_t>();
    for (size_t k = 0; k < x.size(); ++k) {
      special_chosen += y[k] != -100 && y[k] < 10;  // a label is always a regular original
      const bool special = y[k] == -100 && (x[k] == 2 || x[k] == 3 || x[k] == 0);
      if (!m[k] || special) continue;
      ++regular;
      if (y[k] == -100) continue;
      ++chosen;
      masked += x[k] == 4;
      kept += x[k] == y[k];
    }
  }
  CHECK(special_chosen == 0);
  const double p = static_cast<double>(chosen) / static_cast<double>(regular);
  CHECK(std::abs(p - 0.15) < 0.01);
  CHECK(std::abs(static_cast<double>(masked) / chosen - 0.8) < 0.02);
  CHECK(std::abs(static_cast<double>(kept) / chosen - 0.1) < 0.02);  // 10% kept (+ random hits, ~0.01%)

  // A batch is a pure function of its index.
  const auto again = corpus_mlm_source(train, valid, B, T, V, sp, 42, 0.15);
  for (int64_t i : {0, 5, 77}) {
    CHECK(src->batch(Split::train, i).ids.to_vector<int32_t>() ==
          again->batch(Split::train, i).ids.to_vector<int32_t>());
    CHECK(src->batch(Split::train, i).labels.to_vector<int32_t>() ==
          again->batch(Split::train, i).labels.to_vector<int32_t>());
  }
  const auto other = corpus_mlm_source(train, valid, B, T, V, sp, 43, 0.15);
  CHECK(src->batch(Split::train, 0).ids.to_vector<int32_t>() !=
        other->batch(Split::train, 0).ids.to_vector<int32_t>());
}

TEST_CASE("shuffling: each epoch is a permutation fixed by (seed, epoch)", "[data]") {
  const auto p0 = epoch_permutation(42, 0, 1000);
  std::vector<uint32_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(epoch_permutation(42, 0, 1000) == p0);
  CHECK(epoch_permutation(42, 1, 1000) != p0);
  CHECK(epoch_permutation(7, 0, 1000) != p0);
  CHECK(epoch_permutation(42, 0, 1) == std::vector<uint32_t>{0});
  // Position 0 of the permutation is roughly uniform over many epochs.
  std::map<uint32_t, int> first;
  for (uint64_t e = 0; e < 4000; ++e) first[epoch_permutation(1, e, 4)[0]]++;
  for (auto [k, n] : first) CHECK(std::abs(n - 1000) < 120);
}

TEST_CASE("causal-LM windows: documents joined by the end-of-text id, targets shifted by one", "[data]") {
  const std::string dir = temp_dir("clm");
  // stream: 10 11 12 E 20 21 E 30 31 32 33 E  (12 positions, E = 99)
  const auto c = make_cache(dir + "/c.bin", {{run(10, 3)}, {run(20, 2)}, {run(30, 4)}});
  const std::vector<int32_t> stream = {10, 11, 12, 99, 20, 21, 99, 30, 31, 32, 33, 99};
  const int64_t T = 3;
  const auto src = corpus_clm_source(c, c, 1, T, 99, 42);
  // (12 - 1) / 3 = 3 windows; validation reads them in order.
  for (int64_t w = 0; w < 3; ++w) {
    const ClmBatch b = src->batch(Split::valid, w);
    const auto x = b.ids.to_vector<int32_t>(), y = b.targets.to_vector<int32_t>();
    for (int64_t t = 0; t < T; ++t) {
      CHECK(x[static_cast<size_t>(t)] == stream[static_cast<size_t>(w * T + t)]);
      CHECK(y[static_cast<size_t>(t)] == stream[static_cast<size_t>(w * T + t + 1)]);
    }
  }
  // Training visits every window once per epoch.
  std::multiset<int32_t> firsts;  // the windows start with 10, 99 (position 3), 99 (position 6)
  for (int64_t i = 0; i < 3; ++i) firsts.insert(src->batch(Split::train, i).targets.to_vector<int32_t>()[0]);
  CHECK(firsts == std::multiset<int32_t>{11, 20, 30});
  const auto empty = make_cache(dir + "/e.bin", {});
  CHECK_ERROR(corpus_clm_source(empty, c, 1, T, 99, 42), Contains("no examples"));
}
