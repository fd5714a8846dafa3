// CPU kernel of the rotary position embedding (RoFormer, Su et al. 2021).
// CUDA twin: src/tensor/cuda/rope.cpp (host side, same angle table) + rope.cu.
//
// Forward, per row (b, h, t) of HS values at position p = offset + t and pair i in [0, HS/2):
//   θ_i = base^(-2i/HS),  a = p θ_i (double),  (c, s) = (cos a, sin a)
//   y[2i]   = x[2i] c - x[2i+1] s
//   y[2i+1] = x[2i] s + x[2i+1] c
// The map is a rotation R(a) of each pair; inverse applies R(-a) = R(a)ᵀ: swap the signs of s.
// Backward: y = R x gives gx = Rᵀ gy, i.e. the same kernel with inverse = !inverse.
#include <cmath>
#include <vector>

#include "tensor/cpu/common.h"
#include "tensor/rope_table.h"

namespace saobp::cpu {

// x, y: (B,NH,T,HS) contiguous, HS even.
void rope(const Tensor& x, double base, bool inverse, Tensor& y, int64_t offset) {
  const int64_t T = x.size(2), HS = x.size(3), H = HS / 2, rows = x.numel() / std::max<int64_t>(HS, 1);
  if (rows == 0 || HS == 0) return;
  std::vector<double> cs, sn;
  rope_table(offset + T, HS, base, cs, sn);
  const double sign = inverse ? -1.0 : 1.0;
  dispatch_float(x.dtype(), "rope", [&](auto tag) {
    using F = decltype(tag);
    const F* xp = x.data<F>();
    F* yp = y.data<F>();
    parallel_for(rows, row_grain(HS), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const int64_t t = offset + r % T;
        const double* c = cs.data() + t * H;
        const double* sv = sn.data() + t * H;
        const F* xr = xp + r * HS;
        F* yr = yp + r * HS;
        for (int64_t i = 0; i < H; ++i) {
          const double x0 = xr[2 * i], x1 = xr[2 * i + 1], si = sign * sv[i];
          yr[2 * i] = static_cast<F>(x0 * c[i] - x1 * si);
          yr[2 * i + 1] = static_cast<F>(x0 * si + x1 * c[i]);
        }
      }
    });
  });
}

}  // namespace saobp::cpu
