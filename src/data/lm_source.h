// Batch sources of the language-model objectives. A batch is a pure function of (split, batch
// index), so training resumes from a saved index and evaluation always sees the same batches.
//   synthetic: generated copy data (synthetic.h), no files;
//   corpus:    a tokenized corpus (token_cache.h) packed into sequences (batching.h).
#pragma once
#include <cstdint>
#include <memory>

#include "data/synthetic.h"

namespace saobp {

enum class Split { train, valid };

class MlmSource {
 public:
  virtual ~MlmSource() = default;
  virtual MlmBatch batch(Split split, int64_t index) const = 0;
  // Examples (sequences) of a split before its batches repeat; 0: generated without end.
  virtual int64_t examples(Split split) const {
    (void)split;
    return 0;
  }
};

class ClmSource {
 public:
  virtual ~ClmSource() = default;
  virtual ClmBatch batch(Split split, int64_t index) const = 0;
  // Examples (windows) of a split before its batches repeat; 0: generated without end.
  virtual int64_t examples(Split split) const {
    (void)split;
    return 0;
  }
};

std::unique_ptr<MlmSource> synthetic_mlm_source(int64_t B, int64_t T, int64_t V, uint64_t seed,
                                                double mlm_probability);
std::unique_ptr<ClmSource> synthetic_clm_source(int64_t B, int64_t T, int64_t V, uint64_t seed);

}  // namespace saobp
