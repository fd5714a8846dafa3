#include "attention/rope_analysis.h"

#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "core/error.h"

namespace saobp {

std::vector<double> rope_thetas(int64_t HS, double base) {
  if (HS < 2 || HS % 2 != 0) fail("rope", "the head size must be even and >= 2, got {}", HS);
  if (!(base > 0)) fail("rope", "rope_base must be positive, got {}", base);
  std::vector<double> t(static_cast<size_t>(HS / 2));
  for (int64_t i = 0; i < HS / 2; ++i)
    t[static_cast<size_t>(i)] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(HS));
  return t;
}

std::vector<double> rope_decay_bound(int64_t HS, double base, const std::vector<int64_t>& distances) {
  const std::vector<double> theta = rope_thetas(HS, base);
  std::vector<double> out;
  for (int64_t m : distances) {
    std::complex<double> S = 0;  // S_j = Σ_{i<j} e^{i m θ_i}, j = 1 .. HS/2
    double sum = 0;
    for (double th : theta) {
      S += std::polar(1.0, static_cast<double>(m) * th);
      sum += std::abs(S);
    }
    out.push_back(sum / static_cast<double>(theta.size()));
  }
  return out;
}

std::vector<int64_t> rope_decay_distances(int64_t max_distance) {
  std::vector<int64_t> d;
  for (int64_t m = 0; m <= std::min<int64_t>(64, max_distance); ++m) d.push_back(m);
  for (int k = 1; d.back() < max_distance; ++k) {
    const auto m = static_cast<int64_t>(std::llround(64.0 * std::exp2(k / 16.0)));
    if (m > d.back()) d.push_back(std::min(m, max_distance));
  }
  return d;
}

RopePairNorms::RopePairNorms(int64_t layers, int64_t heads, int64_t head_size)
    : L_(layers), NH_(heads), P_(head_size / 2) {
  if (layers < 1 || heads < 1 || head_size < 2 || head_size % 2 != 0)
    fail("rope", "pair norms need layers, heads >= 1 and an even head size, got {}, {}, {}", layers, heads,
         head_size);
  q_.assign(static_cast<size_t>(L_ * NH_ * P_), 0.0);
  k_.assign(q_.size(), 0.0);
  count_.assign(static_cast<size_t>(L_), 0);
}

void RopePairNorms::add(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& key_mask) {
  if (layer < 0 || layer >= L_) fail("rope", "layer {} of {}", layer, L_);
  if (q.dim() != 4 || q.size(1) != NH_ || q.size(3) != 2 * P_ || k.shape() != q.shape())
    fail("rope", "q {} and k {} must be (B,{},T,{})", q.str(), k.str(), NH_, 2 * P_);
  const int64_t B = q.size(0), T = q.size(2);
  if (key_mask.defined() && key_mask.shape() != Shape{B, T})
    fail("rope", "key_mask {} does not match q {}", key_mask.str(), q.str());
  const std::vector<double> qv = q.to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>(),
                            kv = k.to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
  const std::vector<uint8_t> m = key_mask.defined()
                                     ? key_mask.to(Device::cpu()).contiguous().to_vector<uint8_t>()
                                     : std::vector<uint8_t>(static_cast<size_t>(B * T), 1);
  const int64_t HS = 2 * P_;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      if (!m[static_cast<size_t>(b * T + t)]) continue;
      ++count_[static_cast<size_t>(layer)];
      for (int64_t h = 0; h < NH_; ++h) {
        const size_t row = static_cast<size_t>(((b * NH_ + h) * T + t) * HS);
        double* qs = q_.data() + (layer * NH_ + h) * P_;
        double* ks = k_.data() + (layer * NH_ + h) * P_;
        for (int64_t i = 0; i < P_; ++i) {
          const size_t a = row + static_cast<size_t>(2 * i);
          qs[i] += std::hypot(qv[a], qv[a + 1]);
          ks[i] += std::hypot(kv[a], kv[a + 1]);
        }
      }
    }
}

std::vector<std::vector<std::vector<double>>> RopePairNorms::mean(const std::vector<double>& sums) const {
  std::vector<std::vector<std::vector<double>>> out(static_cast<size_t>(L_));
  for (int64_t l = 0; l < L_; ++l) {
    const auto n = static_cast<double>(std::max<int64_t>(count_[static_cast<size_t>(l)], 1));
    for (int64_t h = 0; h < NH_; ++h) {
      const double* s = sums.data() + (l * NH_ + h) * P_;
      std::vector<double> row(static_cast<size_t>(P_));
      for (int64_t i = 0; i < P_; ++i) row[static_cast<size_t>(i)] = s[i] / n;
      out[static_cast<size_t>(l)].push_back(std::move(row));
    }
  }
  return out;
}

RopeReport RopePairNorms::report(double base, int64_t seq_len, int64_t max_distance) const {
  RopeReport r;
  r.base = base;
  r.head_size = 2 * P_;
  r.seq_len = seq_len;
  r.theta = rope_thetas(r.head_size, base);
  for (double t : r.theta) r.wavelength.push_back(2 * std::numbers::pi / t);
  r.q_norm = q_norm();
  r.k_norm = k_norm();
  r.distances = rope_decay_distances(max_distance);
  r.bound = rope_decay_bound(r.head_size, base, r.distances);
  return r;
}

std::vector<double> RopeReport::slow_share() const {
  std::vector<double> share;
  for (size_t l = 0; l < q_norm.size(); ++l) {
    double slow = 0, all = 0;
    for (size_t h = 0; h < q_norm[l].size(); ++h)
      for (size_t i = 0; i < wavelength.size(); ++i) {
        const double e = q_norm[l][h][i] * k_norm[l][h][i];
        all += e;
        if (wavelength[i] > static_cast<double>(seq_len)) slow += e;
      }
    share.push_back(all > 0 ? slow / all : std::nan(""));
  }
  return share;
}

nlohmann::json RopeReport::to_json() const {
  return {{"base", base},
          {"head_size", head_size},
          {"seq_len", seq_len},
          {"theta", theta},
          {"wavelength", wavelength},
          {"q_norm", q_norm},
          {"k_norm", k_norm},
          {"slow_share", slow_share()},
          {"decay", {{"distance", distances}, {"bound", bound}}}};
}

std::string RopeReport::bands_csv() const {
  std::string s = "layer,head,pair,theta,wavelength,q_norm,k_norm\n";
  for (size_t l = 0; l < q_norm.size(); ++l)
    for (size_t h = 0; h < q_norm[l].size(); ++h)
      for (size_t i = 0; i < theta.size(); ++i)
        s += fmt::format("{},{},{},{:.10g},{:.10g},{:.10g},{:.10g}\n", l, h, i, theta[i], wavelength[i],
                         q_norm[l][h][i], k_norm[l][h][i]);
  return s;
}

std::string RopeReport::decay_csv() const {
  std::string s = "distance,bound\n";
  for (size_t i = 0; i < distances.size(); ++i) s += fmt::format("{},{:.10g}\n", distances[i], bound[i]);
  return s;
}

}  // namespace saobp
