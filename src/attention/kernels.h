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

// How the CPU's tiled kernels share their work among threads (docs/saobp-gradients.md §10.4):
// `blocks` runs each pass over every (head, query block) in parallel, as the CUDA twin does;
// `heads` gives each thread whole heads and walks their query blocks top down, fusing the passes
// that order allows. Both give the same bits. `automatic` (the default) takes `heads` when a call
// has at least as many heads as threads.
enum class TiledSchedule : uint8_t { automatic, heads, blocks };

namespace kern {
#include "attention/kernels.inc"
// Sets the schedule of later tiled calls on the CPU (for tests; not thread-safe).
void set_tiled_schedule(TiledSchedule s);
}  // namespace kern

}  // namespace saobp
