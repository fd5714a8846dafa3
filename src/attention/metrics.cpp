#include "attention/metrics.h"

#include <cmath>

namespace saobp {

double row_entropy(const double* row, int64_t n) {
  double H = 0;
  for (int64_t j = 0; j < n; ++j)
    if (row[j] > 0) H -= row[j] * std::log(row[j]);
  return H;
}

std::vector<double> attention_entropy(const Tensor& probs, const Tensor& key_mask) {
  if (probs.dim() != 4 || probs.size(2) != probs.size(3))
    fail("attention_entropy", "expected (B,NH,T,T) attention, got {}", probs.str());
  const int64_t B = probs.size(0), NH = probs.size(1), T = probs.size(2);
  if (key_mask.defined()) check_shape(key_mask, {B, T}, "attention_entropy", "key_mask");
  const std::vector<double> p = probs.to(DType::f64).to_vector<double>();
  const std::vector<uint8_t> km = key_mask.defined() ? key_mask.to_vector<uint8_t>() : std::vector<uint8_t>();
  std::vector<double> out(static_cast<size_t>(NH), 0.0);
  for (int64_t h = 0; h < NH; ++h) {
    double total = 0;
    int64_t rows = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        if (!km.empty() && !km[static_cast<size_t>(b * T + i)]) continue;
        total += row_entropy(p.data() + ((b * NH + h) * T + i) * T, T);
        ++rows;
      }
    out[static_cast<size_t>(h)] = rows ? total / static_cast<double>(rows) : 0.0;
  }
  return out;
}

double mean_attention_entropy(const Tensor& probs, const Tensor& key_mask) {
  const std::vector<double> h = attention_entropy(probs, key_mask);
  double s = 0;
  for (double x : h) s += x;
  return h.empty() ? 0.0 : s / static_cast<double>(h.size());
}

}  // namespace saobp
