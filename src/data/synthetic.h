// A generated masked-LM source that needs no files: sequence n of a stream is
//   [CLS] s s [SEP]   with s a segment of (T - 2) / 2 random tokens drawn from (seed, stream, n),
// so every masked token can be recovered from the other copy and a model's loss falls clearly.
// Masking follows BERT: a fraction p of the non-special positions is chosen; of those 80%
// become [MASK], 10% a random token and 10% stay; the labels hold the original tokens there and
// -100 elsewhere. Batches are pure functions of (seed, stream, batch index): resumable by index.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace saobp {

// Special token ids of the synthetic vocabulary; regular tokens are [kFirstRegular, V).
constexpr int32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4, kFirstRegular = 5;

struct MlmBatch {
  Tensor ids;       // (B,T) i32
  Tensor labels;    // (B,T) i32, -100 where not predicted
  Tensor key_mask;  // (B,T) u8, all 1 (no padding in this source)
};

// The causal-LM form of the same source: sequence n is s s (T tokens, s of T/2 random tokens,
// no special tokens), targets[t] = ids[t+1] and -100 at the last position, so the second copy is
// predictable from the first.
struct ClmBatch {
  Tensor ids;       // (B,T) i32
  Tensor targets;   // (B,T) i32, next token (-100 at the end)
  Tensor key_mask;  // (B,T) u8, all 1
};
ClmBatch synthetic_clm_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t stream, int64_t index);

MlmBatch synthetic_mlm_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t stream, int64_t index,
                             double mlm_probability);

}  // namespace saobp
