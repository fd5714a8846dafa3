// The fused CPU attention kernel: for every (batch, head) tile, in parallel over tiles,
//   forward:  s = scale Q Kᵀ,  A = softmax_allowed(s),  B = refine(A),  O = B V
//   backward: dB = dO Vᵀ, dV += Bᵀ dO, ds = refine_backward(dB) (through A), dQ += scale ds K,
//             dK += scale dsᵀ Q,  dλ_h += ∂L/∂c · dc/dλ
// with refine = identity (original), the Potts BP steps (bp_potts.cpp) or ElemMul
// (bp_elemmul.cpp). Each tile's GEMMs run on its thread (tile_gemm: our sgemm for f32, Eigen for
// f64), and λ's gradient is summed over the batch in order: results do not depend on the thread
// count.
// bf16 GEMM operands (kernels.inc): q, k and v are widened to f32, which is exact, and the f32
// kernel runs with B, dO and ds rounded to bf16 values where they enter a product: the same
// terms as the GPU's bf16 GEMMs, the reference for them.
// CUDA twin: src/attention/cuda/attention.cpp + attention.cu.
#include <type_traits>
#include <vector>

#include "attention/backend.h"
#include "attention/cpu/tile.h"
#include "tensor/bf16.h"
#include "tensor/cpu/common.h"
#include "tensor/cpu/tile_gemm.h"

namespace saobp::cpu {

using attn::Scratch;
using attn::TileMask;

namespace {

using Dims = AttnDims;

// x[0..n) rounded to bf16 values (nearest, ties to even), in place or into y.
void round_bf16(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_value(bf16_bits(x[i]));
}
template <class T>
const T* rounded_for_gemm(bool half, const T* x, std::vector<T>& buf, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (half) {
      if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
      round_bf16(x, buf.data(), n);
      return buf.data();
    }
  }
  return x;
}

// `half`: bf16 GEMM operands (q, k, v already widened from bf16 by the caller).
template <class T>
void forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
               const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
               Tensor& aux, const Dims& d, bool half) {
  const int64_t T2 = d.T * d.T, tiles = d.B * d.NH, QS = d.T * d.HS;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const T* qp = q.data<T>();
  const T* kp = k.data<T>();
  const T* vp = v.data<T>();
  T* op = out.data<T>();
  T* pp = probs.data<T>();
  T* sp = saved.defined() ? saved.data<T>() : nullptr;
  T* ap = aux.defined() ? aux.data<T>() : nullptr;
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    static thread_local Scratch<T> w;
    static thread_local std::vector<T> Bh;  // B rounded (half)
    w.ensure(T2, d.T);
    for (int64_t bh = t0; bh < t1; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      const TileMask m{d.T, km ? km + b * d.T : nullptr, p.causal, p.leak};
      T* s = w.d.data();
      tile_gemm(d.T, d.T, d.HS, static_cast<T>(p.scale), qp + bh * QS, false, kp + bh * QS, true, T(0),
                s);  // scale Q Kᵀ
      T* B = pp + bh * T2;
      switch (p.variant) {
        case AttnVariant::original:
          attn::softmax_tile(m, s, B);
          break;
        case AttnVariant::bp_high:
        case AttnVariant::bp_low: {
          std::vector<T*> beliefs(static_cast<size_t>(p.steps) + 1);
          for (int t = 0; t < p.steps; ++t) beliefs[static_cast<size_t>(t)] = sp + (t * tiles + bh) * T2;
          beliefs.back() = B;
          attn::softmax_tile(m, s, beliefs[0]);
          attn::potts_forward(m,
                              attn::potts_c(p.variant == AttnVariant::bp_high, lam[static_cast<size_t>(h)]),
                              p.steps, s, beliefs.data(), w);
          break;
        }
        case AttnVariant::bp_elemmul: {
          T* A = sp + bh * T2;
          attn::softmax_tile(m, s, A);
          attn::elemmul_forward(m, A, B, ap + bh * d.T, w);
          break;
        }
      }
      tile_gemm(d.T, d.HS, d.T, T(1), rounded_for_gemm(half, B, Bh, T2), false, vp + bh * QS, false, T(0),
                op + bh * QS);  // O = B V
    }
  });
}

template <class T>
void backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv, Tensor& glambda,
                const Dims& d, bool half) {
  const int64_t T2 = d.T * d.T, tiles = d.B * d.NH, QS = d.T * d.HS;
  const std::vector<double> lam = attn::head_lambdas<T>(lambda);
  const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *pp = probs.data<T>(),
          *gp = gout.data<T>();
  const T* sp = saved.defined() ? saved.data<T>() : nullptr;
  const T* ap = aux.defined() ? aux.data<T>() : nullptr;
  T* gqp = gq.defined() ? gq.data<T>() : nullptr;
  T* gkp = gk.defined() ? gk.data<T>() : nullptr;
  T* gvp = gv.defined() ? gv.data<T>() : nullptr;
  const uint8_t* km = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  std::vector<double> dlam(static_cast<size_t>(tiles), 0.0);  // per tile, summed in order below
  const T sc = static_cast<T>(p.scale);
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    static thread_local Scratch<T> w;
    static thread_local std::vector<T> Bh;  // B rounded (half)
    w.ensure(T2, d.T);
    for (int64_t bh = t0; bh < t1; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      const TileMask m{d.T, km ? km + b * d.T : nullptr, p.causal, p.leak};
      const T* B = pp + bh * T2;
      const T* dO = gp + bh * QS;  // rounded by the caller (half)
      T* dB = w.d.data();
      tile_gemm(d.T, d.T, d.HS, T(1), dO, false, vp + bh * QS, true, T(0), dB);  // dB = dO Vᵀ
      if (gvp)
        tile_gemm(d.T, d.HS, d.T, T(1), rounded_for_gemm(half, B, Bh, T2), true, dO, false, T(1),
                  gvp + bh * QS);  // dV += Bᵀ dO
      if (!gqp && !gkp && !glambda.defined()) continue;
      T* ds = w.e.data();
      std::fill(ds, ds + T2, T(0));
      switch (p.variant) {
        case AttnVariant::original:
          attn::softmax_tile_backward(m, B, dB, ds);
          break;
        case AttnVariant::bp_high:
        case AttnVariant::bp_low: {
          std::vector<const T*> beliefs(static_cast<size_t>(p.steps) + 1);
          for (int t = 0; t < p.steps; ++t) beliefs[static_cast<size_t>(t)] = sp + (t * tiles + bh) * T2;
          beliefs.back() = B;
          const double l = lam[static_cast<size_t>(h)];
          const bool high = p.variant == AttnVariant::bp_high;
          const double dc =
              attn::potts_backward(m, attn::potts_c(high, l), p.steps, beliefs.data(), dB, ds, w);
          dlam[static_cast<size_t>(bh)] = dc * attn::potts_dc_dlambda(high, l);
          break;
        }
        case AttnVariant::bp_elemmul:
          attn::elemmul_backward(m, sp + bh * T2, B, ap + bh * d.T, dB, ds, w);
          break;
      }
      if constexpr (std::is_same_v<T, float>)
        if (half && (gqp || gkp)) round_bf16(ds, ds, T2);
      if (gqp)
        tile_gemm(d.T, d.HS, d.T, sc, ds, false, kp + bh * QS, false, T(1), gqp + bh * QS);  // dQ += sc dS K
      if (gkp)
        tile_gemm(d.T, d.HS, d.T, sc, ds, true, qp + bh * QS, false, T(1), gkp + bh * QS);  // dK += sc dSᵀ Q
    }
  });
  if (glambda.defined() && !lam.empty()) attn::add_lambda_grad(dlam, d.B, d.NH, glambda.data<T>());
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                       const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
                       Tensor& aux) {
  const Dims d = attn_dims(q);
  if (q.dtype() == DType::bf16) {
    forward_t<float>(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), key_mask, lambda, p, out, probs,
                     saved, aux, d, true);
    return;
  }
  dispatch_float(q.dtype(), "attention", [&](auto tag) {
    forward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, probs, saved, aux, d, false);
  });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                        const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                        Tensor& glambda) {
  const Dims d = attn_dims(q);
  if (q.dtype() == DType::bf16) {
    const Tensor dO = gout.to(DType::bf16).to(DType::f32);  // rounded once, for both of its products
    backward_t<float>(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), key_mask, lambda, p, probs, saved,
                      aux, dO, gq, gk, gv, glambda, d, true);
    return;
  }
  dispatch_float(q.dtype(), "attention_backward", [&](auto tag) {
    backward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, probs, saved, aux, gout, gq, gk, gv, glambda, d,
                              false);
  });
}

}  // namespace saobp::cpu
