#include "data/synthetic.h"

#include "data/lm_source.h"
#include "tensor/philox.h"

namespace saobp {

MlmBatch synthetic_mlm_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t stream, int64_t index,
                             double mlm_probability) {
  if (T < 4) fail("data", "synthetic sequences need seq_len >= 4, got {}", T);
  if (V <= kFirstRegular + 1)
    fail("data", "synthetic data needs vocab_size > {}, got {}", kFirstRegular + 1, V);
  const auto regular = static_cast<uint32_t>(V - kFirstRegular);
  const int64_t half = (T - 2) / 2;
  std::vector<int32_t> ids(static_cast<size_t>(B * T), kPad), labels(ids.size(), -100);
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t seq = static_cast<uint64_t>(index * B + b);
    int32_t* row = ids.data() + b * T;
    row[0] = kCls;
    for (int64_t t = 0; t < half; ++t) {
      const int32_t tok =
          kFirstRegular + static_cast<int32_t>(philox::word(seed, stream, seq * 4096 + t) % regular);
      row[1 + t] = row[1 + half + t] = tok;
    }
    row[1 + 2 * half] = kSep;  // T odd: one [PAD] follows, excluded from masking
    for (int64_t t = 1; t <= 2 * half; ++t) {
      const uint64_t k = seq * 4096 + 2048 + static_cast<uint64_t>(t);
      if (philox::to_unit_float(philox::word(seed, stream + 1, k)) >= mlm_probability) continue;
      labels[static_cast<size_t>(b * T + t)] = row[t];
      const float r = philox::to_unit_float(philox::word(seed, stream + 2, k));
      if (r < 0.8f)
        row[t] = kMask;
      else if (r < 0.9f)
        row[t] = kFirstRegular + static_cast<int32_t>(philox::word(seed, stream + 3, k) % regular);
    }
  }
  MlmBatch out;
  out.ids = Tensor::from_vector(ids, {B, T});
  out.labels = Tensor::from_vector(labels, {B, T});
  out.key_mask = Tensor::full({B, T}, 1.0, DType::u8);
  return out;
}

ClmBatch synthetic_clm_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t stream, int64_t index) {
  if (T < 2) fail("data", "synthetic sequences need seq_len >= 2, got {}", T);
  if (V <= kFirstRegular + 1)
    fail("data", "synthetic data needs vocab_size > {}, got {}", kFirstRegular + 1, V);
  const auto regular = static_cast<uint32_t>(V - kFirstRegular);
  const int64_t half = (T + 1) / 2;
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), targets(ids.size(), -100);
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t seq = static_cast<uint64_t>(index * B + b);
    int32_t* row = ids.data() + b * T;
    for (int64_t t = 0; t < half; ++t) {
      const int32_t tok =
          kFirstRegular + static_cast<int32_t>(philox::word(seed, stream, seq * 4096 + t) % regular);
      row[t] = tok;
      if (half + t < T) row[half + t] = tok;
    }
    for (int64_t t = 0; t + 1 < T; ++t) targets[static_cast<size_t>(b * T + t)] = row[t + 1];
  }
  ClmBatch out;
  out.ids = Tensor::from_vector(ids, {B, T});
  out.targets = Tensor::from_vector(targets, {B, T});
  out.key_mask = Tensor::full({B, T}, 1.0, DType::u8);
  return out;
}

// ---- the synthetic sources of lm_source.h ----------------------------------------------------

namespace {
// Stream of each split: training and validation never share sequences.
uint64_t split_stream(Split s) { return s == Split::train ? 100 : 200; }

class SyntheticMlm : public MlmSource {
 public:
  SyntheticMlm(int64_t B, int64_t T, int64_t V, uint64_t seed, double p)
      : B_(B), T_(T), V_(V), seed_(seed), p_(p) {}
  MlmBatch batch(Split s, int64_t index) const override {
    return synthetic_mlm_batch(B_, T_, V_, seed_, split_stream(s), index, p_);
  }

 private:
  int64_t B_, T_, V_;
  uint64_t seed_;
  double p_;
};

class SyntheticClm : public ClmSource {
 public:
  SyntheticClm(int64_t B, int64_t T, int64_t V, uint64_t seed) : B_(B), T_(T), V_(V), seed_(seed) {}
  ClmBatch batch(Split s, int64_t index) const override {
    return synthetic_clm_batch(B_, T_, V_, seed_, split_stream(s), index);
  }

 private:
  int64_t B_, T_, V_;
  uint64_t seed_;
};
}  // namespace

std::unique_ptr<MlmSource> synthetic_mlm_source(int64_t B, int64_t T, int64_t V, uint64_t seed, double p) {
  return std::make_unique<SyntheticMlm>(B, T, V, seed, p);
}
std::unique_ptr<ClmSource> synthetic_clm_source(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  return std::make_unique<SyntheticClm>(B, T, V, seed);
}

}  // namespace saobp
