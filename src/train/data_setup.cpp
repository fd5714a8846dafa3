#include "train/data_setup.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "data/token_cache.h"
#include "tensor/philox.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSplitStream = 304;

CorpusSpec corpus_spec(const RunConfig& cfg) { return {cfg.data.kind, cfg.data.path, cfg.data.text_field}; }

// Document d of the corpus goes to validation with probability data.valid_fraction, drawn from
// (seed, d): the split is by document and fixed by the seed.
bool is_valid_doc(const RunConfig& cfg, uint64_t d) {
  return philox::to_unit_float(philox::word(cfg.train.seed, kSplitStream, d)) < cfg.data.valid_fraction;
}

uint64_t mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}

// What decides the split: the corpus, the seed and the validation fraction.
uint64_t split_key(const RunConfig& cfg) {
  uint64_t h = corpus_fingerprint(corpus_spec(cfg));
  h = mix(h, cfg.train.seed);
  double f = cfg.data.valid_fraction;
  uint64_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return mix(h, bits);
}

std::string joined(const Document& doc) {
  std::string s;
  for (const std::string& l : doc.lines) s += l, s += '\n';
  return s;
}

struct Caches {
  std::shared_ptr<const TokenCache> train, valid;
};

// The token caches of the run, rebuilt when missing or when their key (tokenizer, corpus,
// split) differs from this run's.
Caches token_caches(const RunConfig& cfg, const Tokenizer& tok) {
  const fs::path dir = fs::path(cfg.train.run_dir) / "cache";
  fs::create_directories(dir);
  const uint64_t key = split_key(cfg);
  const TokenCacheKey want[2] = {{tok.fingerprint(), mix(key, 1)}, {tok.fingerprint(), mix(key, 2)}};
  const std::string path[2] = {(dir / "tokens-train.bin").string(), (dir / "tokens-valid.bin").string()};
  bool fresh = true;
  for (int s = 0; s < 2; ++s) {
    TokenCacheKey have;
    if (!read_token_cache_key(path[s], have) || !(have == want[s])) fresh = false;
  }
  if (!fresh) {
    fmt::print("data: tokenizing {} into {}\n", cfg.data.path, dir.string());
    TokenCacheWriter train(path[0], want[0]), valid(path[1], want[1]);
    uint64_t d = 0;
    for_each_document(corpus_spec(cfg), [&](const Document& doc) {
      TokenCacheWriter& w = is_valid_doc(cfg, d++) ? valid : train;
      for (const std::string& line : doc.lines) {
        const std::vector<int32_t> ids = tok.encode(line);
        w.add_sentence(ids);
      }
      w.end_document();
    });
    train.finish(), valid.finish();
  }
  Caches c{std::make_shared<const TokenCache>(TokenCache::open(path[0])),
           std::make_shared<const TokenCache>(TokenCache::open(path[1]))};
  fmt::print("data: {} training tokens in {} documents, {} validation tokens in {} documents\n",
             c.train->tokens().size(), c.train->document_end().size(), c.valid->tokens().size(),
             c.valid->document_end().size());
  return c;
}

bool is_corpus(const RunConfig& cfg) { return cfg.data.kind != "synthetic" && cfg.data.kind != "task"; }

void check_fits(const RunConfig& cfg, const Tokenizer& tok) {
  if (tok.vocab_size() > cfg.model.vocab_size)
    fail("data", "the tokenizer has {} tokens, more than model.vocab_size = {}; raise model.vocab_size",
         tok.vocab_size(), cfg.model.vocab_size);
}

}  // namespace

std::shared_ptr<const Tokenizer> run_tokenizer(const RunConfig& cfg) {
  if (!cfg.data.vocab.empty()) return load_tokenizer(cfg.data.vocab);
  const std::string kind = cfg.model.family == "gpt2" ? "bpe" : "wordpiece";
  const fs::path dir = fs::path(cfg.train.run_dir) / "tokenizer";
  const fs::path stamp = dir / "saobp_vocab_source.json";
  const nlohmann::json want = {{"kind", kind},
                               {"vocab_size", cfg.data.vocab_size},
                               {"split_key", fmt::format("{:016x}", split_key(cfg))}};
  std::error_code ec;
  if (fs::exists(stamp, ec)) {
    nlohmann::json have;
    try {
      have = nlohmann::json::parse(read_file(stamp.string()));
    } catch (const nlohmann::json::exception&) {
    }
    if (have == want) return load_tokenizer(dir.string());
  }
  fmt::print("data: training a {} vocabulary of {} tokens on {}\n", kind, cfg.data.vocab_size, cfg.data.path);
  VocabTrainOptions opt;
  opt.kind = kind;
  opt.vocab_size = cfg.data.vocab_size;
  VocabTrainer trainer(opt);
  uint64_t d = 0;
  for_each_document(corpus_spec(cfg), [&](const Document& doc) {
    if (!is_valid_doc(cfg, d++)) trainer.feed(joined(doc));
  });
  std::shared_ptr<const Tokenizer> tok = trainer.finish();
  tok->save(dir.string());
  write_file_atomic(stamp.string(), want.dump(2) + "\n");
  return tok;
}

MlmData prepare_mlm_data(const RunConfig& cfg) {
  const int64_t B = cfg.train.batch_size, T = cfg.train.seq_len;
  MlmData d;
  if (!is_corpus(cfg)) {
    d.source = synthetic_mlm_source(B, T, cfg.data.vocab_size, cfg.train.seed, cfg.data.mlm_probability);
    return d;
  }
  d.tokenizer = run_tokenizer(cfg);
  check_fits(cfg, *d.tokenizer);
  const SpecialTokens& sp = d.tokenizer->special();
  const Caches c = token_caches(cfg, *d.tokenizer);
  d.pad_id = sp.pad;
  d.source = corpus_mlm_source(c.train, c.valid, B, T, d.tokenizer->vocab_size(), {sp.cls, sp.sep, sp.pad, sp.mask},
                               cfg.train.seed, cfg.data.mlm_probability);
  return d;
}

ClmData prepare_clm_data(const RunConfig& cfg) {
  const int64_t B = cfg.train.batch_size, T = cfg.train.seq_len;
  ClmData d;
  if (!is_corpus(cfg)) {
    d.source = synthetic_clm_source(B, T, cfg.data.vocab_size, cfg.train.seed);
    return d;
  }
  d.tokenizer = run_tokenizer(cfg);
  check_fits(cfg, *d.tokenizer);
  const Caches c = token_caches(cfg, *d.tokenizer);
  d.eos_id = d.tokenizer->special().eos;
  d.source = corpus_clm_source(c.train, c.valid, B, T, d.eos_id, cfg.train.seed);
  return d;
}

}  // namespace saobp
