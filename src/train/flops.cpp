// The FLOP counts of src/train/flops.h.
#include "train/flops.h"

#include <fmt/format.h>

namespace saobp {

namespace {

// `mul` is 6 for a training step (forward + backward of every GEMM), 2 for a forward pass.
std::vector<FlopTerm> flops(const RunConfig& cfg, Head head, double tokens, double head_rows, double labels,
                            bool training) {
  const double mul = training ? 6 : 2;
  const ModelSection& m = cfg.model;
  const double C = static_cast<double>(m.hidden), I = static_cast<double>(m.intermediate);
  const double L = static_cast<double>(m.layers), V = static_cast<double>(m.vocab_size);
  const double NH = static_cast<double>(m.heads), T = static_cast<double>(cfg.train.seq_len);
  const double block_weights = L * (4 * C * C + 2 * C * I);
  std::vector<FlopTerm> t;
  t.push_back(
      {"blocks (q,k,v,out,fc1,fc2 weights)",
       fmt::format("{} * L(4C^2 + 2CI) * tokens = {} * {:.0f} * {:.0f}", mul, mul, block_weights, tokens),
       mul * block_weights * tokens});
  t.push_back({"attention (QK^T, AV; full TxT)",
               fmt::format("{} * 2 * L*T*C * tokens = {} * {:.0f}*{:.0f}*{:.0f} * {:.0f}", mul, 2 * mul, L, T,
                           C, tokens),
               2 * mul * L * T * C * tokens});
  // SAOBP's refinement: L·NH tiles of T x T per sequence, i.e. L·NH·T entries per token.
  const double per_entry = training ? 24 : 11, steps = static_cast<double>(m.attention.bp_steps);
  switch (m.attention.variant) {
    case AttnVariant::original:
      break;
    case AttnVariant::bp_high:
    case AttnVariant::bp_low:
      t.push_back({"SAOBP Potts refinement (elementwise)",
                   fmt::format("{} * steps * L*NH*T * tokens = {} * {:.0f} * {:.0f}*{:.0f}*{:.0f} * {:.0f}",
                               per_entry, per_entry, steps, L, NH, T, tokens),
                   per_entry * steps * L * NH * T * tokens});
      break;
    case AttnVariant::bp_elemmul:
      t.push_back({"SAOBP ElemMul (A A^T per tile)",
                   fmt::format("{} * L*NH*T^2 * tokens = {} * {:.0f}*{:.0f}*{:.0f} * {:.0f}", mul, mul, L, NH,
                               T * T, tokens),
                   mul * L * NH * T * T * tokens});
      break;
  }
  // A head GEMM of `weights` multiply-adds per row over `rows` rows.
  auto head_gemm = [&](const char* name, const char* what, double weights, double rows, bool fractional) {
    t.push_back({name,
                 fmt::format("{} * {} * rows = {} * {:.0f} * {}", mul, what, mul, weights,
                             fmt::format(fmt::runtime(fractional ? "{:.1f}" : "{:.0f}"), rows)),
                 mul * weights * rows});
  };
  switch (head) {
    case Head::mlm:
      head_gemm("MLM transform (dense CxC)", "C^2", C * C, head_rows, true);
      head_gemm("MLM decoder (tied, CxV)", "C*V", C * V, head_rows, true);
      break;
    case Head::lm:
      head_gemm("LM head (tied, CxV)", "C*V", C * V, head_rows, true);
      break;
    case Head::classifier:
      head_gemm("pooler (dense CxC)", "C^2", C * C, head_rows, false);
      head_gemm("classifier (CxK)", "C*K", C * labels, head_rows, false);
      break;
  }
  return t;
}

}  // namespace

std::vector<FlopTerm> step_flops(const RunConfig& cfg, Head head, double tokens, double head_rows,
                                 double labels) {
  return flops(cfg, head, tokens, head_rows, labels, true);
}

std::vector<FlopTerm> forward_flops(const RunConfig& cfg, Head head, double tokens, double head_rows,
                                    double labels) {
  return flops(cfg, head, tokens, head_rows, labels, false);
}

double total_flops(const std::vector<FlopTerm>& terms) {
  double s = 0;
  for (const FlopTerm& t : terms) s += t.flops;
  return s;
}

std::optional<DevicePeak> device_peak(const std::string& name) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  // NVIDIA's H200, H100 and A100 datasheets: "BF16 Tensor Core" (with sparsity: halved here) and
  // "FP32". The H100's variants by the names their boards report ("H100 80GB HBM3" is the SXM5).
  if (has("H200")) return DevicePeak{"H200 SXM", 989.5e12, 67e12};
  if (has("H100") && has("PCIe")) return DevicePeak{"H100 PCIe", 756.5e12, 51e12};
  if (has("H100") && has("NVL")) return DevicePeak{"H100 NVL", 835.5e12, 60e12};
  if (has("H100")) return DevicePeak{"H100 SXM", 989.5e12, 67e12};
  if (has("A100")) return DevicePeak{"A100", 312e12, 19.5e12};
  return std::nullopt;
}

}  // namespace saobp
