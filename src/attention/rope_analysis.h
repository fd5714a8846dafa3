// What rotary positions do to attention (the connection-bottleneck slides; RoFormer, docs/references.md):
// the frequency of each pair of a head, the long-term decay bound of q·k against relative
// distance, and how much of q and k each frequency carries in a trained model.
//
// RoPE turns pair i = (x_2i, x_2i+1) of the query at position t and of the key at position s by
// angles t θ_i and s θ_i, θ_i = base^(-2i/HS), so their product sees the relative distance
// m = t - s only, through e^{i m θ_i}. A pair whose wavelength 2π/θ_i exceeds the sequence
// barely turns across it: it can carry content independently of position; the fast pairs carry
// position (a previous-token head needs them). Where a model puts its q and k norm among the
// pairs shows which it uses (docs/diagnostics.md, "RoPE").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace saobp {

// θ_i = base^(-2i/HS) for the HS/2 pairs of a head, as the rope kernel turns them.
std::vector<double> rope_thetas(int64_t HS, double base);

// RoFormer's long-term decay (its section 3.4.3): with h_i = q_i k_i* per complex pair,
//   |Σ_i h_i e^{i m θ_i}| <= (max_i |h_{i+1} - h_i|) Σ_{j=1}^{HS/2} |S_j(m)|,  S_j(m) = Σ_{i<j} e^{i m θ_i},
// and the relative upper bound (1/(HS/2)) Σ_j |S_j(m)| (its Fig. 2) falls with the distance m.
// Returns that bound at each distance (at m = 0 it is (HS/2 + 1) / 2).
std::vector<double> rope_decay_bound(int64_t HS, double base, const std::vector<int64_t>& distances);

// The distances at which `analyze` reports the bound: every m in [0, 64], then 16 per octave
// (rounded, distinct) up to max_distance.
std::vector<int64_t> rope_decay_distances(int64_t max_distance);

struct RopeReport;

// The mean norm of each pair of q and of k per (layer, head) over the token positions fed:
// mean_t |(x_t,2i, x_t,2i+1)|. A rotation keeps a pair's norm, so q and k before or after RoPE
// give the same figures (up to rounding).
class RopePairNorms {
 public:
  RopePairNorms(int64_t layers, int64_t heads, int64_t head_size);
  // q, k: (B,NH,T,HS) of layer `layer`, any float dtype and device; key_mask: (B,T) u8 or
  // undefined (every position a token).
  void add(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& key_mask);
  // [L][NH][HS/2]; 0 before anything is fed.
  std::vector<std::vector<std::vector<double>>> q_norm() const { return mean(q_); }
  std::vector<std::vector<std::vector<double>>> k_norm() const { return mean(k_); }
  // The RopeReport of the norms fed, for `base`, inputs of up to seq_len tokens and the decay
  // bound at rope_decay_distances(max_distance).
  RopeReport report(double base, int64_t seq_len, int64_t max_distance) const;

 private:
  std::vector<std::vector<std::vector<double>>> mean(const std::vector<double>& sums) const;
  int64_t L_, NH_, P_;
  std::vector<double> q_, k_;   // sums, [L][NH][P]
  std::vector<int64_t> count_;  // token positions fed, [L]
};

// The RoPE section of `saobp analyze` (analysis.json "rope", rope_bands.csv, rope_decay.csv).
struct RopeReport {
  double base = 10000;
  int64_t head_size = 0, seq_len = 0;  // seq_len: the longest input analysed
  std::vector<double> theta, wavelength;
  std::vector<std::vector<std::vector<double>>> q_norm, k_norm;  // [L][NH][HS/2]
  std::vector<int64_t> distances;
  std::vector<double> bound;  // rope_decay_bound at distances
  // Per layer: the share of Σ_i q_norm_i k_norm_i (summed over heads) in the pairs whose
  // wavelength exceeds seq_len (the slow, content pairs); the rest is in the fast pairs.
  std::vector<double> slow_share() const;
  nlohmann::json to_json() const;
  std::string bands_csv() const;  // layer,head,pair,theta,wavelength,q_norm,k_norm
  std::string decay_csv() const;  // distance,bound
};

}  // namespace saobp
