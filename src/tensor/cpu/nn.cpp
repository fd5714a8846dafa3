// CPU kernels of the network layers: GELU, LayerNorm, (log-)softmax with masks, embedding,
// cross-entropy. Each forward sits above its backward; the derivation is in the comment.
// CUDA twins: src/tensor/cuda/nn.cu, embedding.cu, loss.cu.
// The exp/erfc loops here are compute-bound: let GCC use 512-bit vectors where the target has
// them (-march=native on AVX-512 machines tunes for 256). Same IEEE operations per element
// whatever the width (no contraction, vec_math.h), so results do not change.
#pragma GCC target("prefer-vector-width=512")
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/cpu/common.h"
#include "tensor/cpu/softmax_row.h"

namespace saobp::cpu {

// ------------------------------------------------------------------------------------- GELU
// exact:  y = x Φ(x) = 0.5 x (1 + erf(x/√2))            y' = Φ(x) + x φ(x), φ(x) = e^{-x²/2}/√(2π)
// tanh:   u = √(2/π)(x + 0.044715 x³), y = 0.5 x (1 + tanh u)
//         y' = 0.5 (1 + tanh u) + 0.5 x (1 - tanh² u) √(2/π) (1 + 3·0.044715 x²)
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// Doubles (gradient checks) evaluate the formulas above with libm. Floats use forms that
// vectorize and stay accurate in the tails (vec_math.h; no libm call in the loop):
//   exact:  Φ(x) = 1 - ½ erfc(x/√2) for x >= 0, ½ erfc(-x/√2) below (no cancellation in 1 + erf)
//   tanh:   ½ (1 + tanh u) = σ(2u) = 1 / (1 + e^{-2u}),  ½ (1 - tanh² u) = 2 e^{-2u} σ(2u)²
template <class T>
static inline T gelu_value(T x, bool tanh_approx) {
  if (tanh_approx) {
    const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(u));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
}

template <class T>
static inline T gelu_grad(T x, bool tanh_approx) {
  if (tanh_approx) {
    const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    const T t = std::tanh(u);
    return T(0.5) * (T(1) + t) +
           T(0.5) * x * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
  }
  return T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
}

static inline float gelu_phi(float x) {  // Φ(x), the standard normal CDF
  const float u = x * float(kInvSqrt2), e = erfc_approx_nonneg(std::fabs(u));
  return u >= 0.0f ? 1.0f - 0.5f * e : 0.5f * e;
}
static inline float gelu_value_f(float x) { return x * gelu_phi(x); }
static inline float gelu_grad_f(float x) {
  return gelu_phi(x) + x * float(kInvSqrt2Pi) * exp_approx(-0.5f * x * x);
}
static inline float gelu_tanh_value_f(float x) {
  const float u = float(kSqrt2OverPi) * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp_approx(-2.0f * u));
}
static inline float gelu_tanh_grad_f(float x) {
  const float u = float(kSqrt2OverPi) * (x + 0.044715f * x * x * x);
  const float e = exp_approx(-2.0f * u), s = 1.0f / (1.0f + e);
  return s + 2.0f * x * (e * s * s) * float(kSqrt2OverPi) * (1.0f + float(3 * 0.044715) * x * x);
}

// x, y: contiguous, same shape.
void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  check_shape(y, x.shape(), "gelu", "output");
  dispatch_float(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        if (tanh_approx)
          for (int64_t i = b; i < e; ++i) yp[i] = gelu_tanh_value_f(xp[i]);
        else
          for (int64_t i = b; i < e; ++i) yp[i] = gelu_value_f(xp[i]);
      } else {
        for (int64_t i = b; i < e; ++i) yp[i] = gelu_value(xp[i], tanh_approx);
      }
    });
  });
}

// gx += gy * GELU'(x), or gx = gy * GELU'(x) when !accumulate.
void gelu_backward(const Tensor& x, const Tensor& gy, Tensor& gx, bool tanh_approx, bool accumulate) {
  check_shape(gy, x.shape(), "gelu_backward", "gy");
  check_shape(gx, x.shape(), "gelu_backward", "gx");
  dispatch_float(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* g = gy.data<T>();
    T* out = gx.data<T>();
    auto run = [&](auto acc) {  // acc: std::bool_constant, so each loop is one plain vector loop
      constexpr bool A = decltype(acc)::value;
      parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e) {
        if constexpr (std::is_same_v<T, float>) {
          if (tanh_approx)
            for (int64_t i = b; i < e; ++i) out[i] = (A ? out[i] : T(0)) + g[i] * gelu_tanh_grad_f(xp[i]);
          else
            for (int64_t i = b; i < e; ++i) out[i] = (A ? out[i] : T(0)) + g[i] * gelu_grad_f(xp[i]);
        } else {
          for (int64_t i = b; i < e; ++i) out[i] = (A ? out[i] : T(0)) + g[i] * gelu_grad(xp[i], tanh_approx);
        }
      });
    };
    if (accumulate)
      run(std::true_type{});
    else
      run(std::false_type{});
  });
}

// -------------------------------------------------------------------------------- LayerNorm
// Forward, per row of C:  μ = Σx/C,  σ² = Σ(x-μ)²/C,  r = 1/√(σ² + eps),  n = (x-μ) r,
//                         y = n w + b.
// Backward: with d = gy w (the gradient at n),
//   gx = r (d - mean(d) - n mean(d n)),   gw = Σ_rows gy n,   gb = Σ_rows gy.

// x: (N,C)  w,b: (C)  y: (N,C)  mean,rstd: (N)
void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  check_shape(w, {C}, "layernorm", "weight");
  check_shape(b, {C}, "layernorm", "bias");
  check_shape(y, x.shape(), "layernorm", "output");
  if (mean.numel() != N || rstd.numel() != N) fail("layernorm", "mean/rstd must hold {} rows", N);
  dispatch_float(x.dtype(), "layernorm", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.data<T>(), *wp = w.data<T>(), *bp = b.data<T>();
    T *yp = y.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
    parallel_for(N, row_grain(C), [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) {
        const T* xr = xp + n * C;
        const double mu = lane_sum(C, [&](int64_t c) { return xr[c]; }) / C;
        const double var = lane_sum(C, [&](int64_t c) {
          const double d = xr[c] - mu;
          return d * d;
        });
        const T m = static_cast<T>(mu), r = static_cast<T>(1.0 / std::sqrt(var / C + eps));
        T* yr = yp + n * C;
        for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * r * wp[c] + bp[c];
        mp[n] = m;
        rp[n] = r;
      }
    });
  });
}

// Accumulates gx (N,C), gw (C), gb (C); undefined ones are skipped. gw/gb are summed over fixed
// row blocks whose partial sums are then added in block order.
void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& gy, Tensor& gx, Tensor& gw, Tensor& gb) {
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  check_shape(gy, x.shape(), "layernorm_backward", "gy");
  dispatch_float(x.dtype(), "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.data<T>(), *wp = w.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
    const T* gp = gy.data<T>();
    T* gxp = gx.defined() ? gx.data<T>() : nullptr;
    const bool params = gw.defined() || gb.defined();
    const int64_t grain = std::max<int64_t>(64, (N + 255) / 256), blocks = (N + grain - 1) / grain;
    std::vector<double> pw(params ? static_cast<size_t>(blocks * C) : 0, 0.0), pb(pw.size(), 0.0);
    parallel_for(N, grain, [&](int64_t s, int64_t e) {
      double* bw = params ? pw.data() + s / grain * C : nullptr;
      double* bb = params ? pb.data() + s / grain * C : nullptr;
      for (int64_t n = s; n < e; ++n) {
        const T *xr = xp + n * C, *g = gp + n * C;
        const T m = mp[n], r = rp[n];
        if (gxp) {
          const double dmean = lane_sum(C, [&](int64_t c) { return g[c] * wp[c]; });
          const double dnmean = lane_sum(C, [&](int64_t c) { return g[c] * wp[c] * ((xr[c] - m) * r); });
          const T dm = static_cast<T>(dmean / C), dnm = static_cast<T>(dnmean / C);
          T* out = gxp + n * C;
          for (int64_t c = 0; c < C; ++c) {
            const T nrm = (xr[c] - m) * r;
            out[c] += (g[c] * wp[c] - dm - nrm * dnm) * r;
          }
        }
        if (params)
          for (int64_t c = 0; c < C; ++c) {
            bw[c] += g[c] * ((xr[c] - m) * r);
            bb[c] += g[c];
          }
      }
    });
    if (!params) return;
    for (int64_t c = 0; c < C; ++c) {
      double sw = 0, sb = 0;
      for (int64_t k = 0; k < blocks; ++k) sw += pw[k * C + c], sb += pb[k * C + c];
      if (gw.defined()) gw.data<T>()[c] += static_cast<T>(sw);
      if (gb.defined()) gb.data<T>()[c] += static_cast<T>(sb);
    }
  });
}

// ---------------------------------------------------------------------------------- softmax
// Over the allowed entries a of a row:  y_a = e^{x_a - m} / Σ_a' e^{x_a' - m}  (m = max x_a),
// log form  y_a = x_a - m - log Σ e^{x_a' - m}. Masked entries and rows with no allowed entry
// give 0 (never NaN): they carry no probability and receive no gradient.
// Backward: softmax  gx_a = y_a (gy_a - Σ_a' gy_a' y_a');  log-softmax  gx_a = gy_a - e^{y_a} Σ gy_a'.

namespace {
// Offset of row r's mask in a strided (broadcast) mask of x's shape.
struct MaskRows {
  const uint8_t* base = nullptr;
  Shape lead, lead_strides;
  int64_t step = 0;
  MaskRows(const Tensor& mask, const Tensor& x, const char* op) {
    if (!mask.defined()) return;
    check_dtype(mask, DType::u8, op, "mask");
    const Tensor m = mask.shape() == x.shape() ? mask : mask.expand(x.shape());
    base = m.data<uint8_t>();
    lead.assign(m.shape().begin(), m.shape().end() - 1);
    lead_strides.assign(m.strides().begin(), m.strides().end() - 1);
    step = m.stride(-1);
  }
  const uint8_t* row(int64_t r) const {
    int64_t off = 0;
    for (size_t i = lead.size(); i-- > 0;) {
      off += (r % lead[i]) * lead_strides[i];
      r /= lead[i];
    }
    return base + off;
  }
};
}  // namespace

// x, y: (rows, C) contiguous; mask: undefined or u8 broadcastable to x.
void softmax_forward(const Tensor& x, const Tensor& mask, Tensor& y, bool log) {
  check_shape(y, x.shape(), "softmax", "output");
  const int64_t C = x.size(-1), R = x.numel() / std::max<int64_t>(C, 1);
  const MaskRows mr(mask, x, "softmax");
  dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(R, row_grain(C), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const T* xr = xp + r * C;
        T* yr = yp + r * C;
        const uint8_t* m = mr.base ? mr.row(r) : nullptr;
        auto allowed = [&](int64_t c) { return !m || m[c * mr.step]; };
        softmax_row(xr, yr, C, m != nullptr, allowed, log);
      }
    });
  });
}

// gx += backward of softmax_forward given its output y.
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, Tensor& gx, bool log) {
  check_shape(gy, y.shape(), "softmax_backward", "gy");
  check_shape(gx, y.shape(), "softmax_backward", "gx");
  const int64_t C = y.size(-1), R = y.numel() / std::max<int64_t>(C, 1);
  const MaskRows mr(mask, y, "softmax_backward");
  dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *yp = y.data<T>(), *gp = gy.data<T>();
    T* out = gx.data<T>();
    parallel_for(R, row_grain(C), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const T *yr = yp + r * C, *g = gp + r * C;
        T* o = out + r * C;
        const uint8_t* m = mr.base ? mr.row(r) : nullptr;
        auto allowed = [&](int64_t c) { return !m || m[c * mr.step]; };
        if (log) {
          bool any = !m;
          for (int64_t c = 0; m && c < C && !any; ++c) any = allowed(c);
          if (!any) continue;
          // A row whose allowed entries were all -inf has y == 0 everywhere: no gradient. (A live
          // row with two or more allowed entries has some y < 0; with one, the gradient is 0.)
          bool dead = true;
          for (int64_t c = 0; c < C && dead; ++c) dead = !allowed(c) || yr[c] == T(0);
          if (dead) continue;
          const double sg = lane_sum(C, [&](int64_t c) { return allowed(c) ? g[c] : T(0); });
          const T sgt = static_cast<T>(sg);
          for (int64_t c = 0; c < C; ++c)
            if (allowed(c)) o[c] += g[c] - exp_approx(yr[c]) * sgt;
        } else {
          softmax_row_backward(yr, g, o, C);
        }
      }
    });
  });
}

// -------------------------------------------------------------------------------- embedding

// No i32 id equals it: embedding ids have no ignore value (-1 is out of range like any other).
constexpr int64_t kNoIgnore = std::numeric_limits<int64_t>::min();

static void check_ids(const Tensor& ids, int64_t V, const char* op, const char* what, int64_t ignore) {
  check_dtype(ids, DType::i32, op, what);
  const int32_t* p = ids.data<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n)
    if ((p[n] < 0 || p[n] >= V) && p[n] != ignore)
      fail(op, "{} {} at position {} is outside [0, {})", what, p[n], n, V);
}

// weight: (V,C)  ids: (N) i32  out: (N,C)
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  const int64_t V = weight.size(0), C = weight.size(1), N = ids.numel();
  check_shape(out, {N, C}, "embedding", "output");
  check_ids(ids, V, "embedding", "id", kNoIgnore);
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.data<T>();
    const int32_t* id = ids.data<int32_t>();
    T* o = out.data<T>();
    parallel_for(N, row_grain(C), [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) std::copy_n(w + id[n] * C, C, o + n * C);
    });
  });
}

// gweight[ids[n]] += gout[n]. Threads own column blocks and walk n in order: deterministic, no
// atomics, and only the rows of ids present are touched.
void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  const int64_t V = gweight.size(0), C = gweight.size(1), N = ids.numel();
  check_shape(gout, {N, C}, "embedding_backward", "gout");
  check_ids(ids, V, "embedding_backward", "id", kNoIgnore);
  dispatch_float(gweight.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    const int32_t* id = ids.data<int32_t>();
    const T* g = gout.data<T>();
    T* w = gweight.data<T>();
    parallel_for(C, 64, [&](int64_t cb, int64_t ce) {
      for (int64_t n = 0; n < N; ++n) {
        T* dst = w + id[n] * C;
        const T* src = g + n * C;
        for (int64_t c = cb; c < ce; ++c) dst[c] += src[c];
      }
    });
  });
}

// ---------------------------------------------------------------------------- cross-entropy
// loss_n = lse_n - x_{n,t_n},  lse_n = log Σ_v e^{x_{n,v}};  ∂loss_n/∂x_{n,v} = p_{n,v} - [v = t_n].

// logits: (N,V)  targets: (N) i32  losses, lse: (N)
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  if (targets.numel() != N)
    fail("cross_entropy", "{} targets for {} rows of logits {}", targets.numel(), N, logits.str());
  check_ids(targets, V, "cross_entropy", "target", ignore_index);
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
        const T* __restrict xr = x + n * V;
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
// !accumulate glogits is overwritten (ignored rows 0).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
  check_shape(glogits, logits.shape(), "cross_entropy_backward", "glogits");
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = logits.data<T>(), *sp = lse.data<T>(), *gl = gloss.data<T>();
    const int32_t* t = targets.data<int32_t>();
    T* o = glogits.data<T>();
    parallel_for(N, row_grain(V), [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) {
        T* __restrict orow = o + n * V;
        if (t[n] == ignore_index) {
          if (!accumulate) std::fill(orow, orow + V, T(0));
          continue;
        }
        const T* __restrict xr = x + n * V;
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
