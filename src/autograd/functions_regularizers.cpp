// The two baseline regularizers of docs/baselines.md as fused ops with hand-derived backwards:
// Entropy-Reg (Jha & Reagen 2025, Algorithm 1) on the attention of one layer, and Eigen-Reg
// (Bao et al. 2024) on the QK eigenspectrum of one layer's weights. Plain CPU loops (f32 or
// f64), parallel over independent (batch, head) or head slices that each own their output, with
// every cross-slice sum taken serially in a fixed order: the results do not depend on the thread
// count. The composite references the tests compare against are built from ops.h primitives
// (tests/autograd/test_regularizers.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_util.h"
#include "autograd/ops.h"
#include "autograd/regularizers.h"

namespace saobp {

namespace {

void check_cpu_float(const Tensor& t, const char* op, const char* what) {
  if (t.device() != Device::cpu())
    fail(op, "{} must be on the CPU (this op has no GPU kernel), got {}", what, t.str());
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
    fail(op, "{} must be f32 or f64, got {}", what, t.str());
}

// Everything the entropy forward and backward share: the shapes, the mask and the scale.
struct EntropyGeom {
  int64_t B, NH, T, HS;
  double scale;  // 1/sqrt(HS)
  bool causal;
  const uint8_t* km;  // (B,T) 1 = token; null: no padding
  bool allowed(int64_t b, int64_t r, int64_t j) const {
    return (!km || km[b * T + j]) && (!causal || j <= r);
  }
  bool row_counted(int64_t b, int64_t r) const { return !km || km[b * T + r]; }
};

// Row r of head slice (q, k): a = softmax over the allowed keys of scale · q_r·k_j (0 elsewhere),
// returns H_r = -Σ_j a_j log a_j. q, k: (T,HS) of one (b, h); a: (T) scratch.
template <class T>
double row_softmax_entropy(const EntropyGeom& g, const T* q, const T* k, int64_t b, int64_t r, double* a) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < g.T; ++j) {
    if (!g.allowed(b, r, j)) {
      a[j] = -INFINITY;
      continue;
    }
    double s = 0;
    for (int64_t d = 0; d < g.HS; ++d)
      s += static_cast<double>(q[r * g.HS + d]) * static_cast<double>(k[j * g.HS + d]);
    a[j] = s * g.scale;
    mx = std::max(mx, a[j]);
  }
  double z = 0;
  for (int64_t j = 0; j < g.T; ++j) z += std::isinf(a[j]) ? 0.0 : std::exp(a[j] - mx);
  const double logz = std::log(z);
  double h = 0;
  for (int64_t j = 0; j < g.T; ++j) {
    if (std::isinf(a[j])) {
      a[j] = 0;
      continue;
    }
    const double la = a[j] - mx - logz;  // log a_j, exact even where a_j underflows
    a[j] = std::exp(la);
    h -= a[j] * la;
  }
  return h;
}

// Σ over the counted rows of one (b, h) slice of H_r.
template <class T>
double slice_entropy_sum(const EntropyGeom& g, const T* q, const T* k, int64_t b) {
  std::vector<double> a(static_cast<size_t>(g.T));
  double s = 0;
  for (int64_t r = 0; r < g.T; ++r)
    if (g.row_counted(b, r)) s += row_softmax_entropy(g, q, k, b, r, a.data());
  return s;
}

// Backward of one (b, h) slice, with c = ∂P/∂E_h / N (the weight of each counted row):
//   ∂H_r/∂s_rj = -a_rj (log a_rj + H_r)      (s_rj = scale · q_r·k_j, allowed j)
//   gq_r += scale Σ_j c ∂H_r/∂s_rj k_j,  gk_j += scale c ∂H_r/∂s_rj q_r.
template <class T>
void slice_entropy_backward(const EntropyGeom& g, const T* q, const T* k, int64_t b, double c, T* gq, T* gk) {
  std::vector<double> a(static_cast<size_t>(g.T));
  for (int64_t r = 0; r < g.T; ++r) {
    if (!g.row_counted(b, r)) continue;
    const double h = row_softmax_entropy(g, q, k, b, r, a.data());
    for (int64_t j = 0; j < g.T; ++j) {
      if (!g.allowed(b, r, j) || a[j] <= 0) continue;  // a log a -> 0: no gradient where a_j = 0
      const double ds = -c * a[j] * (std::log(a[j]) + h) * g.scale;
      for (int64_t d = 0; d < g.HS; ++d) {
        gq[r * g.HS + d] += static_cast<T>(ds * static_cast<double>(k[j * g.HS + d]));
        gk[j * g.HS + d] += static_cast<T>(ds * static_cast<double>(q[r * g.HS + d]));
      }
    }
  }
}

template <class T>
Var entropy_penalty_impl(const Var& q, const Var& k, const Tensor& key_mask, bool causal, const Var& theta,
                         double gamma) {
  const Tensor Q = q.data().contiguous(), K = k.data().contiguous(), TH = theta.data().contiguous();
  Tensor KM = key_mask.defined() ? key_mask.contiguous() : Tensor();
  EntropyGeom g{Q.size(0),
                Q.size(1),
                Q.size(2),
                Q.size(3),
                1.0 / std::sqrt(static_cast<double>(Q.size(3))),
                causal,
                KM.defined() ? KM.data<uint8_t>() : nullptr};
  const int64_t BH = g.B * g.NH, slice = g.T * g.HS;
  // Per (b, h) entropy sums in parallel, then E_h = Σ_b / N serially (fixed order).
  std::vector<double> part(static_cast<size_t>(BH));
  const T *qp = Q.data<T>(), *kp = K.data<T>();
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh)
    part[static_cast<size_t>(bh)] = slice_entropy_sum(g, qp + bh * slice, kp + bh * slice, bh / g.NH);
  int64_t n_rows = 0;
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t r = 0; r < g.T; ++r) n_rows += g.row_counted(b, r);
  const double logT = std::log(static_cast<double>(g.T)), margin = gamma * logT;
  const std::vector<T> th = TH.to_vector<T>();
  std::vector<double> dev(static_cast<size_t>(g.NH)), active(static_cast<size_t>(g.NH));
  double penalty = 0;
  for (int64_t h = 0; h < g.NH; ++h) {
    double e = 0;
    for (int64_t b = 0; b < g.B; ++b) e += part[static_cast<size_t>(b * g.NH + h)];
    e = n_rows ? e / static_cast<double>(n_rows) : 0.0;
    const size_t hh = static_cast<size_t>(h);
    dev[hh] = e - static_cast<double>(th[hh]) * logT;
    active[hh] = std::abs(dev[hh]) > margin ? 1.0 : 0.0;
    penalty += active[hh] * dev[hh] * dev[hh];
  }
  penalty /= static_cast<double>(g.NH);
  Tensor out = Tensor::full(Shape{}, penalty, Q.dtype());
  return make_result(out, "entropy_reg_penalty", {q, k, theta},
                     [Q, K, KM, g, dev, active, n_rows, logT, slice](const Tensor& gout, GradSlots& gin) {
                       const double go = gout.item();
                       const int64_t NH = g.NH;
                       // ∂P/∂E_h = 2 δ_h 1[|δ_h| > γ log T] / NH,  ∂P/∂θ_h = -log T ∂P/∂E_h.
                       std::vector<double> de(static_cast<size_t>(NH));
                       for (size_t h = 0; h < de.size(); ++h)
                         de[h] = go * 2.0 * dev[h] * active[h] / static_cast<double>(NH);
                       if (gin.needs(2)) {
                         std::vector<T> gth(static_cast<size_t>(NH));
                         for (size_t h = 0; h < de.size(); ++h) gth[h] = static_cast<T>(-logT * de[h]);
                         Tensor& gt = gin[2];
                         kern::axpby(Tensor::from_vector(gth, gt.shape()), 1.0, gt, 1.0);
                       }
                       if ((!gin.needs(0) && !gin.needs(1)) || n_rows == 0) return;
                       Tensor gq = Tensor::zeros(Q.shape(), Q.dtype()),
                              gk = Tensor::zeros(K.shape(), K.dtype());
                       const T *qp = Q.data<T>(), *kp = K.data<T>();
                       T *gqp = gq.data<T>(), *gkp = gk.data<T>();
                       const int64_t BH = g.B * NH;
#pragma omp parallel for schedule(static)
                       for (int64_t bh = 0; bh < BH; ++bh) {
                         const double c = de[static_cast<size_t>(bh % NH)] / static_cast<double>(n_rows);
                         if (c != 0)
                           slice_entropy_backward(g, qp + bh * slice, kp + bh * slice, bh / NH, c,
                                                  gqp + bh * slice, gkp + bh * slice);
                       }
                       if (gin.needs(0)) kern::axpby(gq, 1.0, gin[0], 1.0);
                       if (gin.needs(1)) kern::axpby(gk, 1.0, gin[1], 1.0);
                     });
}

// Per head h of NH: Q_h, K_h = rows [h HS, (h+1) HS) of wq, wk (HS, C); M_h = K_h Q_hᵀ (HS,HS).
//   t1 = tr M_h = Σ K_h ⊙ Q_h,  t2 = tr M_h² = Σ_ab M_ab M_ba,  var_h = t2/HS - (t1/HS)².
// Backward: ∂t1/∂Q_h = K_h, ∂t1/∂K_h = Q_h; ∂t2/∂M = 2 Mᵀ, so with G = 2 Mᵀ (∂t2/∂M),
//   ∂t2/∂K_h = G Q_h = 2 Mᵀ Q_h,  ∂t2/∂Q_h = Gᵀ K_h = 2 M K_h;
//   ∂var/∂t2 = 1/HS, ∂var/∂t1 = -2 t1 / HS².
template <class T>
Var eigen_variance_impl(const Var& wq, const Var& wk, int64_t heads) {
  const Tensor WQ = wq.data().contiguous(), WK = wk.data().contiguous();
  const int64_t C = WQ.size(1), HS = WQ.size(0) / heads;
  const double d = static_cast<double>(HS);
  // M of every head, (NH,HS,HS) in f64, kept for the backward.
  auto head_m = [WQ, WK, C, HS](int64_t h, std::vector<double>& m) {
    const T *qh = WQ.data<T>() + h * HS * C, *kh = WK.data<T>() + h * HS * C;
    m.assign(static_cast<size_t>(HS * HS), 0.0);
    for (int64_t a = 0; a < HS; ++a)
      for (int64_t b = 0; b < HS; ++b) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c)
          s += static_cast<double>(kh[a * C + c]) * static_cast<double>(qh[b * C + c]);
        m[static_cast<size_t>(a * HS + b)] = s;
      }
  };
  std::vector<double> var(static_cast<size_t>(heads)), t1(static_cast<size_t>(heads));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<double> m;
    head_m(h, m);
    double tr = 0, tr2 = 0;
    for (int64_t a = 0; a < HS; ++a) {
      tr += m[static_cast<size_t>(a * HS + a)];
      for (int64_t b = 0; b < HS; ++b)
        tr2 += m[static_cast<size_t>(a * HS + b)] * m[static_cast<size_t>(b * HS + a)];
    }
    t1[static_cast<size_t>(h)] = tr;
    var[static_cast<size_t>(h)] = tr2 / d - (tr / d) * (tr / d);
  }
  std::vector<T> out_v(var.begin(), var.end());
  return make_result(
      Tensor::from_vector(out_v, {heads}), "qk_eigen_variance", {wq, wk},
      [WQ, WK, C, HS, d, t1, head_m](const Tensor& gout, GradSlots& gin) {
        const std::vector<double> go = gout.to(DType::f64).contiguous().to_vector<double>();
        const int64_t NH = static_cast<int64_t>(go.size());
        Tensor gq = Tensor::zeros(WQ.shape(), WQ.dtype()), gk = Tensor::zeros(WK.shape(), WK.dtype());
        T *gqp = gq.data<T>(), *gkp = gk.data<T>();
#pragma omp parallel for schedule(static)
        for (int64_t h = 0; h < NH; ++h) {
          std::vector<double> m;
          head_m(h, m);
          const double g2 = go[static_cast<size_t>(h)] / d;  // ∂/∂t2
          const double g1 =
              -2.0 * go[static_cast<size_t>(h)] * t1[static_cast<size_t>(h)] / (d * d);  // ∂/∂t1
          const T *qh = WQ.data<T>() + h * HS * C, *kh = WK.data<T>() + h * HS * C;
          T *gqh = gqp + h * HS * C, *gkh = gkp + h * HS * C;
          for (int64_t a = 0; a < HS; ++a)
            for (int64_t c = 0; c < C; ++c) {
              double sq = g1 * static_cast<double>(kh[a * C + c]),
                     sk = g1 * static_cast<double>(qh[a * C + c]);
              for (int64_t b = 0; b < HS; ++b) {
                // (2 M K)_ac = 2 Σ_b M_ab K_bc;  (2 Mᵀ Q)_ac = 2 Σ_b M_ba Q_bc
                sq += 2.0 * g2 * m[static_cast<size_t>(a * HS + b)] * static_cast<double>(kh[b * C + c]);
                sk += 2.0 * g2 * m[static_cast<size_t>(b * HS + a)] * static_cast<double>(qh[b * C + c]);
              }
              gqh[a * C + c] = static_cast<T>(sq), gkh[a * C + c] = static_cast<T>(sk);
            }
        }
        if (gin.needs(0)) kern::axpby(gq, 1.0, gin[0], 1.0);
        if (gin.needs(1)) kern::axpby(gk, 1.0, gin[1], 1.0);
      });
}

}  // namespace

Var entropy_reg_penalty(const Var& q, const Var& k, const Tensor& key_mask, bool causal, const Var& theta,
                        double gamma) {
  const char* op = "entropy_reg_penalty";
  check_cpu_float(q.data(), op, "q");
  if (q.dim() != 4 || k.shape() != q.shape())
    fail(op, "q and k must be the same (B,NH,T,HS), got {} and {}", q.data().str(), k.data().str());
  if (k.dtype() != q.dtype() || theta.dtype() != q.dtype())
    fail(op, "q, k and theta must share a dtype, got {}, {}, {}", q.data().str(), k.data().str(),
         theta.data().str());
  check_shape(theta.data(), {q.size(1)}, op, "theta");
  if (key_mask.defined()) {
    check_dtype(key_mask, DType::u8, op, "key_mask");
    check_shape(key_mask, {q.size(0), q.size(2)}, op, "key_mask");
  }
  if (!(gamma >= 0)) fail(op, "gamma must be >= 0, got {}", gamma);
  return q.dtype() == DType::f64 ? entropy_penalty_impl<double>(q, k, key_mask, causal, theta, gamma)
                                 : entropy_penalty_impl<float>(q, k, key_mask, causal, theta, gamma);
}

Var qk_eigen_variance(const Var& wq, const Var& wk, int64_t heads) {
  const char* op = "qk_eigen_variance";
  check_cpu_float(wq.data(), op, "wq");
  if (wq.dim() != 2 || wk.shape() != wq.shape() || wk.dtype() != wq.dtype())
    fail(op, "wq and wk must be the same (NH·HS, C) matrix shape and dtype, got {} and {}", wq.data().str(),
         wk.data().str());
  if (heads <= 0 || wq.size(0) % heads != 0)
    fail(op, "{} rows do not split into {} heads", wq.size(0), heads);
  return wq.dtype() == DType::f64 ? eigen_variance_impl<double>(wq, wk, heads)
                                  : eigen_variance_impl<float>(wq, wk, heads);
}

}  // namespace saobp
