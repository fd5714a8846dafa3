// From a run config to batches: the synthetic source, or a corpus with its tokenizer (loaded
// from data.vocab, or trained on the corpus and saved under train.run_dir/tokenizer) and its
// token cache (train.run_dir/tokens-*.bin), reused while the corpus and the vocabulary are
// unchanged.
#pragma once
#include <memory>

#include "data/lm_source.h"
#include "data/tokenizer.h"
#include "train/config.h"

namespace saobp {

struct MlmData {
  std::unique_ptr<MlmSource> source;
  std::shared_ptr<const Tokenizer> tokenizer;  // null for synthetic data
  int32_t pad_id = kPad;
};
struct ClmData {
  std::unique_ptr<ClmSource> source;
  std::shared_ptr<const Tokenizer> tokenizer;
  int32_t eos_id = -1;
};

MlmData prepare_mlm_data(const RunConfig& cfg);
ClmData prepare_clm_data(const RunConfig& cfg);

// The tokenizer of a corpus run: data.vocab when set, else the one trained on the corpus (train
// split only) with data.vocab_size tokens, cached in train.run_dir/tokenizer.
std::shared_ptr<const Tokenizer> run_tokenizer(const RunConfig& cfg);

}  // namespace saobp
