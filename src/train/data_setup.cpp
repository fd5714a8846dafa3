#include "train/data_setup.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
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

uint64_t mix(uint64_t h, uint64_t v) { return fnv1a64_u64(v, h); }

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

// The run's two token files (train, valid) and the keys this run wants them to have.
struct CacheFiles {
  fs::path dir;
  std::string path[2];
  TokenCacheKey want[2];
  // Both files exist with this run's keys (read from their headers only).
  bool fresh() const {
    for (int s = 0; s < 2; ++s) {
      TokenCacheKey have;
      if (!read_token_cache_key(path[s], have) || !(have == want[s])) return false;
    }
    return true;
  }
};

CacheFiles cache_files(const RunConfig& cfg, const Tokenizer& tok) {
  CacheFiles f;
  f.dir = fs::path(cfg.train.run_dir) / "cache";
  const uint64_t key = split_key(cfg);
  f.want[0] = {tok.fingerprint(), mix(key, 1)}, f.want[1] = {tok.fingerprint(), mix(key, 2)};
  f.path[0] = (f.dir / "tokens-train.bin").string(), f.path[1] = (f.dir / "tokens-valid.bin").string();
  return f;
}

Caches open_caches(const CacheFiles& f) {
  return {std::make_shared<const TokenCache>(TokenCache::open(f.path[0])),
          std::make_shared<const TokenCache>(TokenCache::open(f.path[1]))};
}

// The token caches of the run, rebuilt when missing or when their key (tokenizer, corpus,
// split) differs from this run's.
Caches token_caches(const RunConfig& cfg, const Tokenizer& tok) {
  const CacheFiles f = cache_files(cfg, tok);
  fs::create_directories(f.dir);
  if (!f.fresh()) {
    fmt::print("data: tokenizing {} into {}\n", cfg.data.path, f.dir.string());
    TokenCacheWriter train(f.path[0], f.want[0]), valid(f.path[1], f.want[1]);
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
  const Caches c = open_caches(f);
  fmt::print("data: {} training tokens in {} documents, {} validation tokens in {} documents\n",
             c.train->tokens().size(), c.train->document_end().size(), c.valid->tokens().size(),
             c.valid->document_end().size());
  return c;
}

// The held-out split alone, for a run that asks for no training batch (eval, analyze, inspect
// of a checkpoint): the run's caches when they are fresh (opened read-only), else the held-out
// documents tokenized into a temporary file that is unlinked once mapped, so nothing is left
// behind and the training documents are read but not tokenized. The same documents through
// the same loop as token_caches: the same tokens. `train` is the held-out cache again, a
// placeholder that no batch reads (a training batch rebuilds the source with token_caches).
Caches held_out_caches(const RunConfig& cfg, const Tokenizer& tok) {
  const CacheFiles f = cache_files(cfg, tok);
  if (f.fresh()) return open_caches(f);
  static std::atomic<uint64_t> serial{0};
  const fs::path path =
      fs::temp_directory_path() / fmt::format("saobp-{}-{}-tokens-valid.bin", ::getpid(), serial++);
  fmt::print("data: tokenizing the held-out documents of {}\n", cfg.data.path);
  {
    TokenCacheWriter valid(path.string(), f.want[1]);
    uint64_t d = 0;
    for_each_document(corpus_spec(cfg), [&](const Document& doc) {
      if (!is_valid_doc(cfg, d++)) return;
      for (const std::string& line : doc.lines) {
        const std::vector<int32_t> ids = tok.encode(line);
        valid.add_sentence(ids);
      }
      valid.end_document();
    });
    valid.finish();
  }
  struct Unlink {
    fs::path p;
    ~Unlink() {
      std::error_code ec;
      fs::remove(p, ec);  // a mapping outlives its name
    }
  } drop_name{path};
  const auto cache = std::make_shared<const TokenCache>(TokenCache::open(path.string()));
  if (cache->tokens().empty())
    fail("data", "{}: the held-out split has no text (data.valid_fraction = {}); raise data.valid_fraction",
         cfg.data.path, cfg.data.valid_fraction);
  fmt::print("data: {} validation tokens in {} documents\n", cache->tokens().size(),
             cache->document_end().size());
  return {cache, cache};
}

// A corpus source built on the first batch asked for: a training batch (or
// prepare_training) prepares both splits (token_caches, under train.run_dir), a held-out batch
// only the held-out one (held_out_caches), so a task made from a checkpoint touches no corpus
// until it needs one. Batches are those of the source it wraps: the held-out ones do not depend
// on the training split.
template <class Source, class Batch>
class LazySource : public Source {
 public:
  using Make = std::function<std::unique_ptr<Source>(const Caches&)>;
  LazySource(RunConfig cfg, std::shared_ptr<const Tokenizer> tok, Make make)
      : cfg_(std::move(cfg)), tok_(std::move(tok)), make_(std::move(make)) {}
  Batch batch(Split split, int64_t index) const override { return source(split)->batch(split, index); }
  int64_t examples(Split split) const override { return source(split)->examples(split); }
  void prepare_training() const { source(Split::train); }

 private:
  std::shared_ptr<const Source> source(Split split) const {
    std::lock_guard<std::mutex> lock(m_);
    if (split == Split::train && !with_train_) {
      source_ = make_(token_caches(cfg_, *tok_));
      with_train_ = true;
    } else if (!source_) {
      source_ = make_(held_out_caches(cfg_, *tok_));
    }
    return source_;
  }

  RunConfig cfg_;
  std::shared_ptr<const Tokenizer> tok_;
  Make make_;
  mutable std::mutex m_;
  mutable std::shared_ptr<const Source> source_;
  mutable bool with_train_ = false;
};

bool is_corpus(const RunConfig& cfg) { return cfg.data.kind != "synthetic" && cfg.data.kind != "task"; }

// Where a run's tokenizer comes from, for messages: data.vocab, or the run's own vocabulary.
std::string tokenizer_source(const RunConfig& cfg) {
  return cfg.data.vocab.empty() ? fmt::format("{}/tokenizer (trained on data.path)", cfg.train.run_dir)
                                : fmt::format("{} (data.vocab)", cfg.data.vocab);
}

void check_fits(const RunConfig& cfg, const Tokenizer& tok) {
  if (tok.vocab_size() > cfg.model.vocab_size)
    fail("data", "the tokenizer {} has {} tokens, more than model.vocab_size = {}: {}", tokenizer_source(cfg),
         tok.vocab_size(), cfg.model.vocab_size,
         cfg.data.vocab.empty() ? "raise model.vocab_size"
                                : "the tokenizer and the model do not belong together");
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
      have = read_json_file(stamp.string(), "data");
    } catch (const nlohmann::json::exception&) {
    }
    if (have == want) return load_tokenizer(dir.string());
  }
  fmt::print("data: training a {} vocabulary of {} tokens on {}\n", kind, cfg.data.vocab_size, cfg.data.path);
  VocabTrainOptions opt;
  opt.kind = kind;
  opt.vocab_size = cfg.data.vocab_size;
  opt.size_name = "data.vocab_size";
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
  d.pad_id = sp.pad;
  const int64_t V = d.tokenizer->vocab_size();
  const MlmSpecials specials{sp.cls, sp.sep, sp.pad, sp.mask};
  const uint64_t seed = cfg.train.seed;
  const double p = cfg.data.mlm_probability;
  auto source = std::make_unique<LazySource<MlmSource, MlmBatch>>(cfg, d.tokenizer, [=](const Caches& c) {
    return corpus_mlm_source(c.train, c.valid, B, T, V, specials, seed, p);
  });
  d.prepare_training = [s = source.get()] { s->prepare_training(); };
  d.source = std::move(source);
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
  d.eos_id = d.tokenizer->special().eos;
  const int32_t eos = d.eos_id;
  const uint64_t seed = cfg.train.seed;
  auto source = std::make_unique<LazySource<ClmSource, ClmBatch>>(cfg, d.tokenizer, [=](const Caches& c) {
    return corpus_clm_source(c.train, c.valid, B, T, eos, seed);
  });
  d.prepare_training = [s = source.get()] { s->prepare_training(); };
  d.source = std::move(source);
  return d;
}

}  // namespace saobp
