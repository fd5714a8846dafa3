// Batches from a token cache, for both objectives.
//
// Masked LM (BERT): consecutive sentences (corpus lines) are packed greedily into examples of at
// most T - 2 tokens, [CLS] s1 s2 ... [SEP], crossing documents with a [SEP] between them (the
// "full sentences" packing of RoBERTa); a sentence longer than T - 2 is cut into pieces. Rows
// shorter than T are padded with [PAD] and key_mask 0. Masking as BERT: each non-special
// position is chosen with probability p; of those 80% become [MASK], 10% a uniformly random id
// of the vocabulary, 10% stay; labels hold the original ids there, -100 elsewhere. Every draw is
// Philox of (seed, stream, example, position): a batch is a pure function of its index.
//
// Causal LM (GPT-2): the split's documents joined by <|endoftext|> (after each one) form one
// stream; window w is stream[w·T, w·T + T], ids its first T tokens, targets the last T.
//
// Shuffling: training example n of the whole run is example perm_e[n mod N] with epoch
// e = n div N and perm_e a Fisher-Yates permutation drawn from (seed, e): every epoch sees every
// example once, in an order that depends only on (seed, epoch). Validation is not shuffled.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/lm_source.h"
#include "data/token_cache.h"

namespace saobp {

// A packed masked-LM example: the token range [begin, end) of a cache (document boundaries
// inside it get a [SEP] at batch time).
struct PackedExample {
  uint64_t begin = 0, end = 0;
};
// Greedy packing of the cache's sentences into examples of at most `budget` tokens, counting
// one [SEP] per document boundary inside an example.
std::vector<PackedExample> pack_sentences(const TokenCache& cache, int64_t budget);

// Rows of token ids and their token types (each the same length as its ids row) as (R,T) tensors,
// T the longest row (at least 1): ids padded with `pad`, types with 0; mask (R,T) u8 is 1 on the
// rows' own tokens.
struct PaddedRows {
  Tensor ids, types, mask;
};
PaddedRows pad_rows(const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<const std::vector<int32_t>*>& types, int32_t pad);

// A permutation of [0, n) drawn from (seed, epoch) by Fisher-Yates over Philox words.
std::vector<uint32_t> epoch_permutation(uint64_t seed, uint64_t epoch, uint32_t n);

struct MlmSpecials {
  int32_t cls = -1, sep = -1, pad = -1, mask = -1;
};
std::unique_ptr<MlmSource> corpus_mlm_source(std::shared_ptr<const TokenCache> train,
                                             std::shared_ptr<const TokenCache> valid, int64_t B, int64_t T,
                                             int64_t vocab, MlmSpecials specials, uint64_t seed, double p);
std::unique_ptr<ClmSource> corpus_clm_source(std::shared_ptr<const TokenCache> train,
                                             std::shared_ptr<const TokenCache> valid, int64_t B, int64_t T,
                                             int32_t eos, uint64_t seed);

}  // namespace saobp
