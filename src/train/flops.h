// FLOP counts of a training step and of an inference forward pass of the model a run config
// describes (`saobp bench` prints them term by term; `saobp cost` tabulates them per attention
// variant, the paper's Table 9). A multiply-add is 2 FLOPs; a GEMM costs 2 x its multiply-adds
// forward and 4 x backward (input and weight gradients), hence 6 in a training step. Elementwise
// work of the plain model (GELU, LayerNorm, softmax, dropout, AdamW) is not counted; SAOBP's
// refinement is, since it is the extra work a variant adds (docs/performance.md, "FLOPs per step",
// gives every formula):
//   BP-High / BP-Low: per score entry and BP step, 11 operations forward (log(1 - cP): 3; the
//     column or prefix sum: 1; G = sum - F: 1; L = s + G: 1; the softmax of L: 5) and 13 backward
//     (softmax backward 4, ds += dL 1, the sums of dL 2, dP = dF (-c)/(1 - cP) 4, dc 2);
//   BP-ElemMul: the product A Aᵀ of each T x T tile, a GEMM of T³ multiply-adds (2 T³ forward,
//     6 T³ per training step).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"

namespace saobp {

// One named term of a FLOP count.
struct FlopTerm {
  std::string name, formula;
  double flops = 0;
};

// The head a step ends in.
enum class Head { mlm, lm, classifier };

// A training step over `tokens` tokens (B·T·grad_accum); `head_rows` is the number of rows the
// head runs on (masked positions, every position, or the [CLS] rows), `labels` the classifier's
// outputs. The SAOBP term is present for the variants that refine attention.
std::vector<FlopTerm> step_flops(const RunConfig& cfg, Head head, double tokens, double head_rows,
                                 double labels);
// One inference forward pass over `tokens` tokens (no backward: 2 x the multiply-adds).
std::vector<FlopTerm> forward_flops(const RunConfig& cfg, Head head, double tokens, double head_rows,
                                    double labels);
double total_flops(const std::vector<FlopTerm>& terms);

// A GPU's peak arithmetic rates (FLOP/s), NVIDIA's datasheet figures: dense bf16 on the tensor
// cores (the sparsity-doubled figure halved) and plain f32 (no TF32). `saobp bench` reports its
// model FLOPs per second against both (model FLOP utilization, MFU).
struct DevicePeak {
  std::string model;  // the datasheet's name of the part
  double bf16_dense = 0, f32 = 0;
};
// By the name CUDA reports (cudaDeviceProp::name): H200, H100 (SXM, PCIe, NVL), A100; nothing for
// any other device.
std::optional<DevicePeak> device_peak(const std::string& device_name);

}  // namespace saobp
