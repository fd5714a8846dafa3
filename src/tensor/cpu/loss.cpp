// CPU kernels of the cross-entropy loss: forward (loss and logsumexp per row) and backward.
// CUDA twin: src/tensor/cuda/loss.cpp + loss.cu.
// The exp loops here are compute-bound: 512-bit vectors where the target has them, as in nn.cpp
// (the width changes no element's operations, so the results do not change).
#pragma GCC target("prefer-vector-width=512")
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/checks.h"
#include "tensor/cpu/common.h"
#include "tensor/cpu/vec_math.h"

namespace saobp::cpu {

// ---------------------------------------------------------------------------- cross-entropy
// loss_n = lse_n - x_{n,t_n},  lse_n = log Σ_v e^{x_{n,v}};  ∂loss_n/∂x_{n,v} = p_{n,v} - [v = t_n].

// logits: (N,V), rows ld apart  targets: (N) i32  losses, lse: (N)
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1), ld = row_pitch(logits);
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const int32_t* t = targets.data<int32_t>();
    T *lp = losses.data<T>(), *sp = lse.data<T>();
    parallel_for(N, row_grain(V), [&](int64_t s, int64_t e) {
      // The exponentials go through a buffer first: that loop vectorizes, and lane_sum then adds
      // the same values in the same order as summing them on the fly would.
      std::vector<T> buf(static_cast<size_t>(V));
      T* __restrict ex = buf.data();
      for (int64_t n = s; n < e; ++n) {
        const T* __restrict xr = x + n * ld;
        const T mx = lane_max(V, [&](int64_t v) { return xr[v]; });
        for (int64_t v = 0; v < V; ++v) ex[v] = exp_approx(xr[v] - mx);
        const double sum = lane_sum(V, [&](int64_t v) { return ex[v]; });
        const T l = mx + static_cast<T>(std::log(sum));
        sp[n] = l;
        lp[n] = t[n] == ignore_index ? T(0) : l - xr[t[n]];
      }
    });
  });
}

// glogits[n] += gloss[n] (softmax(logits[n]) - onehot(t_n)); ignored rows get nothing. With
// !accumulate glogits is overwritten (ignored rows 0). Rows of logits and glogits are their
// row_pitch apart; bf16 glogits (from f32 logits, written) take each f32 value rounded once.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  const int64_t ld = row_pitch(logits), ldo = row_pitch(glogits);
  if (glogits.dtype() == DType::bf16) {
    const float *x = logits.data<float>(), *sp = lse.data<float>(), *gl = gloss.data<float>();
    const int32_t* t = targets.data<int32_t>();
    bf16* o = glogits.data<bf16>();
    parallel_for(N, row_grain(V), [&](int64_t s, int64_t e) {
      std::vector<float> buf(static_cast<size_t>(V));
      for (int64_t n = s; n < e; ++n) {
        bf16* orow = o + n * ldo;
        std::fill(buf.begin(), buf.end(), 0.0f);
        if (t[n] != ignore_index) {
          const float* __restrict xr = x + n * ld;
          const float g = gl[n], l = sp[n];
          for (int64_t v = 0; v < V; ++v) buf[static_cast<size_t>(v)] = g * exp_approx(xr[v] - l);
          buf[static_cast<size_t>(t[n])] -= g;
        }
        for (int64_t v = 0; v < V; ++v) orow[v].bits = bf16_bits(buf[static_cast<size_t>(v)]);
      }
    });
    return;
  }
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = logits.data<T>(), *sp = lse.data<T>(), *gl = gloss.data<T>();
    const int32_t* t = targets.data<int32_t>();
    T* o = glogits.data<T>();
    parallel_for(N, row_grain(V), [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) {
        T* __restrict orow = o + n * ldo;
        if (t[n] == ignore_index) {
          if (!accumulate) std::fill(orow, orow + V, T(0));
          continue;
        }
        const T* __restrict xr = x + n * ld;
        const T g = gl[n], l = sp[n];
        if (accumulate)
          for (int64_t v = 0; v < V; ++v) orow[v] += g * exp_approx(xr[v] - l);
        else
          for (int64_t v = 0; v < V; ++v) orow[v] = g * exp_approx(xr[v] - l);
        orow[t[n]] -= g;
      }
    });
  });
}

}  // namespace saobp::cpu
