#include "data/batching.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"
#include "tensor/philox.h"

namespace saobp {

namespace {

// Philox streams of the data pipeline.
constexpr uint64_t kShuffleStream = 300, kMaskSelect = 301, kMaskKind = 302, kMaskRandom = 303;

// The token index one past each document.
std::vector<uint64_t> document_token_ends(const TokenCache& c) {
  std::vector<uint64_t> ends;
  ends.reserve(c.document_end().size());
  for (uint64_t s : c.document_end()) ends.push_back(c.sentence_end()[s - 1]);
  return ends;
}

// Training examples in the shuffled order of their epoch; validation in order.
class Order {
 public:
  Order(uint64_t seed, uint64_t n) : seed_(seed), n_(n) {}
  uint64_t train(uint64_t k) const {
    const uint64_t epoch = k / n_;
    std::lock_guard<std::mutex> lock(m_);
    if (epoch != epoch_ || perm_.empty())
      perm_ = epoch_permutation(seed_, epoch, static_cast<uint32_t>(n_)), epoch_ = epoch;
    return perm_[k % n_];
  }

 private:
  uint64_t seed_, n_;
  mutable std::mutex m_;
  mutable uint64_t epoch_ = 0;
  mutable std::vector<uint32_t> perm_;
};

// `held_out_only`: the held-out split alone stands for both (eval, analyze, inspect of a
// checkpoint: data_setup.h's held_out_caches), its cache a temporary file already unlinked, so
// the message names the split and not that file.
void require_examples(size_t n, const TokenCache& c, const char* split, bool held_out_only, int64_t T) {
  if (n == 0 && held_out_only)
    fail("data",
         "the held-out split has no example of train.seq_len = {} tokens (too little text; raise "
         "data.valid_fraction or lower train.seq_len)",
         T);
  if (n == 0)
    fail("data",
         "{}: the {} split has no examples (too little text; for validation raise data.valid_fraction)",
         c.path(), split);
  if (n > UINT32_MAX) fail("data", "{}: {} examples, more than this loader indexes (2^32)", c.path(), n);
}

class CorpusMlm : public MlmSource {
 public:
  CorpusMlm(std::shared_ptr<const TokenCache> train, std::shared_ptr<const TokenCache> valid, int64_t B,
            int64_t T, int64_t vocab, MlmSpecials sp, uint64_t seed, double p)
      : B_(B), T_(T), vocab_(vocab), sp_(sp), seed_(seed), p_(p) {
    if (T < 3) fail("data", "masked-LM sequences need seq_len >= 3 ([CLS] x [SEP]), got {}", T);
    for (int32_t id : {sp.cls, sp.sep, sp.pad, sp.mask})
      if (id < 0)
        fail("data", "the tokenizer lacks one of [CLS] [SEP] [PAD] [MASK], which masked-LM batches need");
    split_[0].cache = std::move(train), split_[1].cache = std::move(valid);
    for (int s = 0; s < 2; ++s) {
      Split_& x = split_[s];
      x.examples = pack_sentences(*x.cache, T - 2);
      x.doc_ends = document_token_ends(*x.cache);
      require_examples(x.examples.size(), *x.cache, s == 0 ? "training" : "validation",
                       split_[0].cache == split_[1].cache, T);
    }
    order_ = std::make_unique<Order>(seed, split_[0].examples.size());
  }

  int64_t examples(Split split) const override {
    return static_cast<int64_t>(split_[split == Split::train ? 0 : 1].examples.size());
  }
  MlmBatch batch(Split split, int64_t index) const override {
    const Split_& x = split_[split == Split::train ? 0 : 1];
    const uint64_t stream_base = split == Split::train ? 0 : 1ull << 40;
    std::vector<int32_t> ids(static_cast<size_t>(B_ * T_), sp_.pad), labels(ids.size(), -100);
    std::vector<uint8_t> mask(ids.size(), 0);
    const auto tokens = x.cache->tokens();
    bool any = false;
    for (int64_t b = 0; b < B_; ++b) {
      const uint64_t k = static_cast<uint64_t>(index * B_ + b);
      const uint64_t e = split == Split::train ? order_->train(k) : k % x.examples.size();
      const PackedExample& ex = x.examples[e];
      int32_t* row = ids.data() + b * T_;
      int64_t t = 0;
      row[t++] = sp_.cls;
      auto doc = std::upper_bound(x.doc_ends.begin(), x.doc_ends.end(), ex.begin);
      for (uint64_t i = ex.begin; i < ex.end; ++i) {
        if (doc != x.doc_ends.end() && i == *doc) row[t++] = sp_.sep, ++doc;  // a document ends here
        row[t++] = static_cast<int32_t>(tokens[i]);
      }
      row[t++] = sp_.sep;
      std::fill(mask.begin() + b * T_, mask.begin() + b * T_ + t, 1);
      // Masking: draws indexed by (example draw k of this split, position).
      const uint64_t key = (stream_base + k) * static_cast<uint64_t>(T_);
      for (int64_t j = 1; j + 1 < t; ++j) {
        if (row[j] == sp_.sep) continue;
        const uint64_t r = key + static_cast<uint64_t>(j);
        if (philox::to_unit_float(philox::word(seed_, kMaskSelect, r)) >= p_) continue;
        any = true;
        labels[static_cast<size_t>(b * T_ + j)] = row[j];
        const float u = philox::to_unit_float(philox::word(seed_, kMaskKind, r));
        if (u < 0.8f)
          row[j] = sp_.mask;
        else if (u < 0.9f)
          row[j] = static_cast<int32_t>(philox::word(seed_, kMaskRandom, r) % static_cast<uint32_t>(vocab_));
      }
    }
    if (!any) {  // a tiny batch drew no position: predict the first token of row 0
      labels[1] = ids[1];
      ids[1] = sp_.mask;
    }
    MlmBatch out;
    out.ids = Tensor::from_vector(ids, {B_, T_});
    out.labels = Tensor::from_vector(labels, {B_, T_});
    out.key_mask = Tensor::from_vector(mask, {B_, T_});
    return out;
  }

 private:
  struct Split_ {
    std::shared_ptr<const TokenCache> cache;
    std::vector<PackedExample> examples;
    std::vector<uint64_t> doc_ends;
  };
  int64_t B_, T_, vocab_;
  MlmSpecials sp_;
  uint64_t seed_;
  double p_;
  Split_ split_[2];
  std::unique_ptr<Order> order_;
};

class CorpusClm : public ClmSource {
 public:
  CorpusClm(std::shared_ptr<const TokenCache> train, std::shared_ptr<const TokenCache> valid, int64_t B,
            int64_t T, int32_t eos, uint64_t seed)
      : B_(B), T_(T), eos_(eos) {
    if (eos < 0) fail("data", "the tokenizer lacks <|endoftext|>, which causal-LM batches need");
    split_[0].cache = std::move(train), split_[1].cache = std::move(valid);
    for (int s = 0; s < 2; ++s) {
      Split_& x = split_[s];
      x.doc_ends = document_token_ends(*x.cache);
      // The stream holds every token plus one <|endoftext|> per document.
      const uint64_t length = x.cache->tokens().size() + x.doc_ends.size();
      x.windows = length > 0 ? (length - 1) / static_cast<uint64_t>(T) : 0;
      require_examples(x.windows, *x.cache, s == 0 ? "training" : "validation",
                       split_[0].cache == split_[1].cache, T);
    }
    order_ = std::make_unique<Order>(seed, split_[0].windows);
  }

  int64_t examples(Split split) const override {
    return static_cast<int64_t>(split_[split == Split::train ? 0 : 1].windows);
  }
  ClmBatch batch(Split split, int64_t index) const override {
    const Split_& x = split_[split == Split::train ? 0 : 1];
    const auto tokens = x.cache->tokens();
    const size_t W = static_cast<size_t>(T_ + 1);
    std::vector<int32_t> ids(static_cast<size_t>(B_ * T_)), targets(ids.size());
    std::vector<int32_t> win(W);
    for (int64_t b = 0; b < B_; ++b) {
      const uint64_t k = static_cast<uint64_t>(index * B_ + b);
      const uint64_t w = split == Split::train ? order_->train(k) : k % x.windows;
      // Stream position p: document d starts at doc_start(d) + d (one <|endoftext|> per
      // earlier document); find the document holding the window's first position.
      uint64_t p = w * static_cast<uint64_t>(T_);
      size_t lo = 0, hi = x.doc_ends.size();
      while (lo < hi) {  // first d with stream end (doc_ends[d] + d + 1) > p
        const size_t mid = (lo + hi) / 2;
        if (x.doc_ends[mid] + mid + 1 > p)
          hi = mid;
        else
          lo = mid + 1;
      }
      size_t d = lo;
      for (size_t j = 0; j < W; ++j, ++p) {
        while (x.doc_ends[d] + d + 1 <= p) ++d;
        const uint64_t end = x.doc_ends[d] + d;  // the stream position of this document's <|endoftext|>
        win[j] = p == end ? eos_ : static_cast<int32_t>(tokens[p - d]);
      }
      std::copy(win.begin(), win.end() - 1, ids.begin() + b * T_);
      std::copy(win.begin() + 1, win.end(), targets.begin() + b * T_);
    }
    ClmBatch out;
    out.ids = Tensor::from_vector(ids, {B_, T_});
    out.targets = Tensor::from_vector(targets, {B_, T_});
    out.key_mask = Tensor::full({B_, T_}, 1.0, DType::u8);
    return out;
  }

 private:
  struct Split_ {
    std::shared_ptr<const TokenCache> cache;
    std::vector<uint64_t> doc_ends;
    uint64_t windows = 0;
  };
  int64_t B_, T_;
  int32_t eos_;
  Split_ split_[2];
  std::unique_ptr<Order> order_;
};

}  // namespace

std::vector<PackedExample> pack_sentences(const TokenCache& c, int64_t budget) {
  if (budget < 1) fail("data", "packing budget {} < 1", budget);
  const auto B = static_cast<uint64_t>(budget);
  const auto sent = c.sentence_end();
  const auto docs = c.document_end();
  std::vector<PackedExample> out;
  PackedExample cur;
  uint64_t len = 0;  // tokens plus [SEP]s of document boundaries in `cur`
  size_t d = 0;
  for (size_t s = 0; s < sent.size(); ++s) {
    const uint64_t a = s ? sent[s - 1] : 0, b = sent[s];
    const bool new_doc = s > 0 && d < docs.size() && docs[d] == s;
    if (new_doc) ++d;
    const uint64_t extra = len > 0 && new_doc ? 1 : 0;
    if (len + extra + (b - a) <= B) {
      if (len == 0) cur.begin = a;
      cur.end = b, len += extra + (b - a);
      continue;
    }
    if (len > 0) out.push_back(cur);
    // Start afresh with this sentence, cutting it into pieces of `budget` tokens if it is long.
    uint64_t x = a;
    while (b - x > B) out.push_back({x, x + B}), x += B;
    cur = {x, b}, len = b - x;
  }
  if (len > 0) out.push_back(cur);
  return out;
}

std::vector<uint32_t> epoch_permutation(uint64_t seed, uint64_t epoch, uint32_t n) {
  std::vector<uint32_t> p(n);
  for (uint32_t i = 0; i < n; ++i) p[i] = i;
  for (uint32_t i = n; i > 1; --i) {
    // j uniform in [0, i): 64 random bits reduced by multiplication (bias below 2^-32).
    const uint64_t idx = (epoch << 32) + i;
    const uint64_t r = (static_cast<uint64_t>(philox::word(seed, kShuffleStream, 2 * idx)) << 32) |
                       philox::word(seed, kShuffleStream, 2 * idx + 1);
    const auto j = static_cast<uint32_t>((static_cast<unsigned __int128>(r) * i) >> 64);
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

std::unique_ptr<MlmSource> corpus_mlm_source(std::shared_ptr<const TokenCache> train,
                                             std::shared_ptr<const TokenCache> valid, int64_t B, int64_t T,
                                             int64_t vocab, MlmSpecials sp, uint64_t seed, double p) {
  return std::make_unique<CorpusMlm>(std::move(train), std::move(valid), B, T, vocab, sp, seed, p);
}
std::unique_ptr<ClmSource> corpus_clm_source(std::shared_ptr<const TokenCache> train,
                                             std::shared_ptr<const TokenCache> valid, int64_t B, int64_t T,
                                             int32_t eos, uint64_t seed) {
  return std::make_unique<CorpusClm>(std::move(train), std::move(valid), B, T, eos, seed);
}

PaddedRows pad_rows(const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<const std::vector<int32_t>*>& types, int32_t pad) {
  SAOBP_CHECK(ids.size() == types.size(), "batching", "{} rows of ids, {} of types", ids.size(),
              types.size());
  const auto R = static_cast<int64_t>(ids.size());
  int64_t T = 1;
  for (const std::vector<int32_t>* row : ids) T = std::max<int64_t>(T, static_cast<int64_t>(row->size()));
  std::vector<int32_t> iv(static_cast<size_t>(R * T), pad), tv(static_cast<size_t>(R * T), 0);
  std::vector<uint8_t> mv(static_cast<size_t>(R * T), 0);
  for (size_t r = 0; r < ids.size(); ++r) {
    SAOBP_CHECK(ids[r]->size() == types[r]->size(), "batching", "row {}: {} ids, {} token types", r,
                ids[r]->size(), types[r]->size());
    const auto at = static_cast<ptrdiff_t>(r) * T;
    std::copy(ids[r]->begin(), ids[r]->end(), iv.begin() + at);
    std::copy(types[r]->begin(), types[r]->end(), tv.begin() + at);
    std::fill_n(mv.begin() + at, ids[r]->size(), uint8_t{1});
  }
  return {Tensor::from_vector(iv, {R, T}), Tensor::from_vector(tv, {R, T}), Tensor::from_vector(mv, {R, T})};
}

}  // namespace saobp
