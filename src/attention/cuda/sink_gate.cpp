// saobp::cuda sink_gate: checks on the host, then the kernel of sink.cu.
// CPU twin: src/attention/cpu/sink_gate.cpp (same checks and rule).
#include "attention/backend.h"
#include "attention/cuda/launch.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

// probs: (B,NH,T,T)  key_mask: (B,T) u8 or undefined  keep: (B,NH)
void sink_gate(const Tensor& probs, const Tensor& key_mask, double tau, double fraction, Tensor& keep) {
  prepare("sink_gate", keep, probs);
  check_sink_gate(probs, key_mask, keep);
  const int64_t B = probs.size(0), NH = probs.size(1), T = probs.size(2);
  if (B * NH == 0) return;
  const uint8_t* m = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  dispatch_float(probs.dtype(), "sink_gate", [&](auto tag) {
    using F = decltype(tag);
    check(launch_sink_gate<F>(probs.data<F>(), m, tau, fraction, keep.data<F>(), B, NH, T), "sink_gate");
  });
}

}  // namespace saobp::cuda
