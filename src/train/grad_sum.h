// The gradient of one training step, summed over its micro-batches in a fixed order, across
// the ranks of an mpirun job (docs/distributed.md).
//
// A step takes K = grad_accum · N micro-batches, N = the number of ranks; rank r takes the
// micro-batches r·grad_accum .. r·grad_accum + grad_accum - 1 of the step. Each micro-batch's
// backward runs into fresh (empty) gradients, which take() moves out, so the step's gradient is
// S = g_0; S = S + g_1; ...; S = S + g_{K-1} in that order, whatever N is:
//   - ordered: rank 0 sums its micro-batches and sends S to rank 1, which adds its own one by
//     one and sends it on; the last rank broadcasts the total. Bitwise equal to one process
//     with grad_accum = K (the same additions in the same order).
//   - fast: each rank sums its own micro-batches, then MPI_Allreduce sums the ranks in buckets;
//     the order of that sum is MPI's.
// With one process both are the running sum, and with one micro-batch the gradients are left
// exactly as the backward made them. A parameter that no micro-batch reached keeps no gradient
// (AdamW then leaves it alone), and one that some reached starts the sum at its first gradient,
// on every rank, as in one process.
#pragma once
#include <string>
#include <vector>

#include "autograd/var.h"

namespace saobp {

class GradSum {
 public:
  // params: the trained parameters; reduce: "ordered" or "fast" (train.reduce).
  GradSum(std::vector<Var> params, std::string reduce);
  // After a micro-batch's backward: adds its gradients into the sum (or keeps them, on an
  // ordered rank after the first) and leaves the parameters' gradients empty.
  void take();
  // Sums across the ranks and puts the step's gradient into the parameters' gradients (the same
  // on every rank); the next step starts anew.
  void finish();

 private:
  // The gradients as one host buffer (zeros where undefined) and, per parameter, 1 where defined.
  std::vector<float> pack(const std::vector<Tensor>& grads, std::vector<float>& defined) const;
  void unpack(const std::vector<float>& flat, const std::vector<float>& defined);
  // The ordered chain on rank r > 0: receives the sum of the ranks before, adds this rank's
  // micro-batches and passes it on; returns the sum so far and its defined flags.
  void chain(std::vector<float>& flat, std::vector<float>& defined);

  std::vector<Var> params_;
  std::string reduce_;
  size_t numel_ = 0;
  std::vector<size_t> offset_;             // each parameter's place in the flat buffer
  std::vector<Tensor> sum_;                // the running sum (empty before the first take)
  std::vector<std::vector<Tensor>> kept_;  // ordered, rank > 0: this rank's micro-batches
};

}  // namespace saobp
