// saobp::cuda adamw_step: AdamW's coefficients (formula::adamw_coeffs, as on the CPU), then
// optim.cu. CPU twin: src/tensor/cpu/optim.cpp.
#include <algorithm>
#include <vector>

#include "tensor/cuda/common.h"
#include "tensor/formulas.h"

namespace saobp::cuda {

// p, g, m, v: contiguous, same shape.
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  use_device_of(p, "adamw");
  if (p.numel() == 0) return;
  const formula::AdamWCoeffs c = formula::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  dispatch_float(p.dtype(), "adamw", [&](auto tag) {
    using T = decltype(tag);
    check(launch_adamw<T>(p.data<T>(), g.data<T>(), m.data<T>(), v.data<T>(), c, p.numel()), "adamw");
  });
}

namespace {

// Blocks of n elements in kMultiChunk chunks (at least one, so every tensor has a block).
int32_t chunks_of(int64_t n) {
  return static_cast<int32_t>(std::max<int64_t>(1, (n + kMultiChunk - 1) / kMultiChunk));
}

}  // namespace

// The tensors go in groups of kMultiTensors, one launch (and one scratch buffer) a group.
void multi_sum_squares(const std::vector<Tensor>& xs, Tensor& sums) {
  use_device_of(sums, "multi_sum_squares");
  dispatch_float(xs.front().dtype(), "multi_sum_squares", [&](auto tag) {
    using T = decltype(tag);
    for (size_t first = 0; first < xs.size(); first += kMultiTensors) {
      MultiSquares<T> list;
      list.first_block[0] = 0;
      for (size_t i = first; i < std::min(xs.size(), first + kMultiTensors); ++i) {
        const int k = list.count++;
        list.x[k] = xs[i].data<T>();
        list.n[k] = xs[i].numel();
        list.first_block[k + 1] = list.first_block[k] + chunks_of(list.n[k]);
      }
      const Tensor partial = Tensor::empty({list.first_block[list.count]}, DType::f64, sums.device());
      check(launch_multi_sum_squares<T>(list, partial.data<double>(), sums.data<double>() + first),
            "multi_sum_squares");
    }
  });
}

void multi_adamw_step(std::vector<Tensor>& p, std::vector<Tensor>& g, std::vector<Tensor>& m,
                      std::vector<Tensor>& v, const std::vector<AdamWParams>& h, double grad_scale) {
  use_device_of(p.front(), "multi_adamw");
  dispatch_float(p.front().dtype(), "multi_adamw", [&](auto tag) {
    using T = decltype(tag);
    MultiAdamW<T> list;
    int coeffs = 0;
    std::vector<AdamWParams> seen;
    auto launch = [&] {
      check(launch_multi_adamw<T>(list), "multi_adamw");
      list.count = 0, coeffs = 0;
      seen.clear();
    };
    list.grad_scale = grad_scale;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].numel() == 0) continue;
      auto same = [&](const AdamWParams& a) {
        return a.lr == h[i].lr && a.beta1 == h[i].beta1 && a.beta2 == h[i].beta2 && a.eps == h[i].eps &&
               a.weight_decay == h[i].weight_decay && a.step == h[i].step;
      };
      int c = static_cast<int>(std::find_if(seen.begin(), seen.end(), same) - seen.begin());
      if (list.count == kMultiTensors || (c == coeffs && coeffs == kMultiCoeffs)) {
        launch();
        c = 0;
      }
      if (c == coeffs) {
        seen.push_back(h[i]);
        list.coeffs[coeffs++] =
            formula::adamw_coeffs(h[i].lr, h[i].beta1, h[i].beta2, h[i].eps, h[i].weight_decay, h[i].step);
      }
      const int k = list.count++;
      if (k == 0) list.first_block[0] = 0;
      list.p[k] = p[i].data<T>(), list.g[k] = g[i].data<T>(), list.m[k] = m[i].data<T>();
      list.v[k] = v[i].data<T>();
      list.n[k] = p[i].numel();
      list.coeff[k] = static_cast<uint8_t>(c);
      list.first_block[k + 1] = list.first_block[k] + chunks_of(list.n[k]);
    }
    if (list.count > 0) launch();
  });
}

}  // namespace saobp::cuda
