// The RoPE angle table, built on the host in double by both backends (src/tensor/cpu/rope.cpp
// and src/tensor/cuda/rope.cpp), so the CPU and the GPU rotate by identical angles.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace saobp {

// cos and sin of t θ_i, θ_i = base^(-2i/HS), for t in [0,T), i in [0,HS/2): row-major (T, HS/2).
// Entry (t, i) depends on t, i, HS and base only, so a longer table starts with a shorter one's rows.
inline void rope_table(int64_t T, int64_t HS, double base, std::vector<double>& cs, std::vector<double>& sn) {
  const int64_t H = HS / 2;
  cs.resize(static_cast<size_t>(T * H));
  sn.resize(static_cast<size_t>(T * H));
  for (int64_t i = 0; i < H; ++i) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(HS));
    for (int64_t t = 0; t < T; ++t) {
      const double a = static_cast<double>(t) * theta;
      cs[static_cast<size_t>(t * H + i)] = std::cos(a);
      sn[static_cast<size_t>(t * H + i)] = std::sin(a);
    }
  }
}

}  // namespace saobp
