// A benchmark's examples as model rows, the one encoding that `saobp finetune` trains on, `eval
// --task` scores and `analyze --data TASK:DIR` measures attention on:
//   BERT    [CLS] a [SEP] (b [SEP]), token types 0 for the first segment and 1 for the second;
//   GPT-2   a (<|endoftext|> b), types 0 (an empty text becomes <|endoftext|> alone).
// A pair longer than seq_len is cut longest-first (the longer side loses a token until it fits);
// cut examples are counted. Multiple choice gives one row per ending, the context paired with
// "question ending" (RACE: the ending replaces a "_" blank when the question has one; HellaSwag:
// ctx_b + " " + ending), as Hugging Face's run_swag and RACE processors do. SQuAD gives one row
// per document-stride feature (squad_features.h): [CLS] question [SEP] chunk [SEP] for BERT,
// question <|endoftext|> chunk <|endoftext|> for GPT-2.
//
// Batches are padded to their longest row and masked, so every batch runs the pretraining
// step's kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "finetune/benchmark.h"
#include "finetune/squad_features.h"
#include "tensor/tensor.h"
#include "tokenizer/tokenizer.h"

namespace saobp::finetune {

// One example as model rows: one row (classify, span) or one per ending (choice).
struct Item {
  std::vector<std::vector<int32_t>> ids, types;
  int32_t label = -1;
  float score = 0;
  int32_t start = 0, end = 0;
};

struct Batch {
  Tensor ids, types, mask;       // (R,T)
  std::vector<int64_t> lengths;  // (R)
  int64_t items = 0, rows_per_item = 1;
  std::vector<int32_t> labels, starts, ends;
  std::vector<float> scores;
};

struct EncodeOptions {
  std::string family = "bert";  // "bert" or "gpt2"
  int64_t seq_len = 128;        // tokens per row, specials included
  int64_t doc_stride = 128;     // SQuAD: tokens between the starts of a context's chunks
  int64_t max_query_length = 64;
};

class InputEncoder {
 public:
  // Checks the tokenizer has the family's special tokens ([CLS], [SEP], [PAD]; <|endoftext|>):
  // errors are `op`'s and name `vocab`, the tokenizer's file.
  // `tok` must outlive the encoder.
  InputEncoder(const BenchmarkSpec& spec, const Tokenizer& tok, const EncodeOptions& opt, const char* op,
               const std::string& vocab);

  // Every example of a split as rows; `truncated` counts the examples cut to seq_len (SQuAD: the
  // contexts split into several chunks). `feats` receives SQuAD's features (kept for prediction).
  // Training fills SQuAD's answer positions and refuses an empty split.
  std::vector<Item> encode(const SplitData& d, bool training, int64_t& truncated,
                           squad::Features* feats = nullptr) const;

  // The padding id: [PAD] for BERT, <|endoftext|> for GPT-2 (masked out either way).
  int32_t pad() const { return pad_; }

 private:
  BenchmarkSpec spec_;
  const Tokenizer* tok_;
  EncodeOptions opt_;
  int32_t pad_ = 0;

  Item text_item(const std::string& a, const std::string& b, bool& cut) const;
};

// Items `which` of `items` as one batch padded to its longest row with `pad`; the items must
// have the same number of rows each.
Batch make_batch(const std::vector<Item>& items, const std::vector<int64_t>& which, int32_t pad);

}  // namespace saobp::finetune
