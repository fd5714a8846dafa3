// How a model encodes token positions: a learned table added to the embeddings (GPT-2, BERT),
// rotary embeddings applied to q and k in every layer (RoFormer; `rope` in autograd/ops.h), or
// none (a causal decoder can still infer positions; an encoder cannot).
#pragma once
#include <string>

#include "core/error.h"

namespace saobp {

enum class PositionKind { learned, rope, none };

inline const char* positions_name(PositionKind p) {
  switch (p) {
    case PositionKind::learned:
      return "learned";
    case PositionKind::rope:
      return "rope";
    case PositionKind::none:
      return "none";
  }
  return "?";
}

// "learned", "rope", "none"; throws naming the allowed values otherwise.
inline PositionKind parse_positions(const std::string& name) {
  if (name == "learned") return PositionKind::learned;
  if (name == "rope") return PositionKind::rope;
  if (name == "none") return PositionKind::none;
  fail("config", "model.positions must be one of learned, rope, none; got '{}'", name);
}

}  // namespace saobp
