// saobp::kern's attention kernels (src/attention/kernels.inc) and their parameters: the fused
// SAOBP attention of every (batch, head) tile and the head-skip gate. The op above them is
// attention() in attention.h; the device twins live in src/attention/cpu/ and
// src/attention/cuda/, behind src/attention/backend.h.
#pragma once
#include <cstdint>

#include "tensor/kernels.h"

namespace saobp {

// Attention variants: plain softmax, SAOBP with the repulsive (BP-High) or attractive (BP-Low)
// Potts factor, and the non-Potts BP-ElemMul baseline.
enum class AttnVariant : uint8_t { original, bp_high, bp_low, bp_elemmul };
struct AttnParams {
  AttnVariant variant = AttnVariant::original;
  bool causal = false;  // decoder: keys k <= query j, senders i < j
  int steps = 1;        // BP steps (each refines the previous beliefs)
  double scale = 1.0;   // score scale, 1/sqrt(HS)
  bool leak = false;    // causal: senders i != j, later rows too (AttentionConfig::leak, an ablation)
};
// BP-High and BP-Low: the variants with a Potts factor, hence a λ.
bool uses_lambda(AttnVariant v);

namespace kern {
#include "attention/kernels.inc"
}  // namespace kern

}  // namespace saobp
