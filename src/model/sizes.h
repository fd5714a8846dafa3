// The size checks both model families share. Errors name the run config's keys (model.hidden,
// model.heads, ...), which are the same for both families whatever the field names of the
// model's own config struct.
#pragma once
#include <cstdint>

#include "attention/attention.h"
#include "model/positions.h"

namespace saobp {

struct ModelSizes {
  int64_t vocab, max_positions, hidden, layers, heads, intermediate;
  double dropout;
  PositionKind positions;
  double rope_base;
};

inline void validate_sizes(const ModelSizes& s, const AttentionSpec& attention) {
  if (s.vocab <= 0 || s.max_positions <= 0 || s.hidden <= 0 || s.layers <= 0 || s.heads <= 0 ||
      s.intermediate <= 0)
    fail("config", "model sizes must be positive");
  if (s.hidden % s.heads != 0)
    fail("config", "model.hidden {} is not divisible by model.heads {}", s.hidden, s.heads);
  if (!(s.dropout >= 0 && s.dropout < 1))
    fail("config", "model.dropout must be in [0, 1), got {}", s.dropout);
  if (s.positions == PositionKind::rope) {
    if ((s.hidden / s.heads) % 2 != 0)
      fail("config", "model.positions = rope needs an even head size, got {}", s.hidden / s.heads);
    if (!(s.rope_base > 0)) fail("config", "model.rope_base must be positive, got {}", s.rope_base);
  }
  attention.validate(s.layers);
}

}  // namespace saobp
