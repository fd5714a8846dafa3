// saobp::cuda attention_forward / attention_backward: the fused SAOBP attention of every
// (batch, head) tile, as batched cuBLAS GEMMs around the masked softmax kernels of nn.cu and the
// Potts / ElemMul kernels of attention.cu.
// CPU twin: src/attention/cpu/attention.cpp (same steps):
//   forward:  s = scale Q Kᵀ,  A = softmax_allowed(s),  B = refine(A),  O = B V
//   backward: dB = dO Vᵀ, dV += Bᵀ dO, ds = refine_backward(dB) (through A), dQ += scale ds K,
//             dK += scale dsᵀ Q,  dλ_h += ∂L/∂c · dc/dλ
// Every sum has a fixed order (cuBLAS in pedantic mode, warp-per-row softmaxes, column kernels,
// λ summed over the batch in order): results are bitwise reproducible run to run.
// bf16 GEMM operands (kernels.inc): bf16 q, k, v go straight into the bf16 GEMMs (tensor cores,
// f32 sums); B, dO and ds are cast to bf16 copies for theirs; the maps stay f32.
// SAOBP_FUSED_ATTENTION=1 runs the maps' passes fused (attention.cu's header): the Potts steps
// in fewer passes over the T×T maps, ds written whole rather than added to zeros, and under bf16
// operands the bf16 copies of B (for B V) and ds (for its products) written by the kernels that
// write B and ds. The unfused schedule (each of those a pass of its own) stays the default until
// the fused one has run on a GPU; it is the baseline the fused one is measured and tested against.
#include <cmath>
#include <vector>

#include "attention/backend.h"
#include "attention/cuda/launch.h"
#include "attention/cuda/potts.h"
#include "attention/formulas.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {

using Dims = AttnDims;

// allowed(j,k) of every tile row: key k is a token (key_mask (B,T) broadcast over heads and
// query rows) and, when causal, k <= j.
MaskView tile_mask(const Tensor& key_mask, const AttnParams& p, const Dims& d) {
  MaskView m;
  if (key_mask.defined()) {
    const Shape rows{d.B, d.NH, d.T}, strides{d.T, 0, 0};
    m.base = key_mask.data<uint8_t>();
    m.rows = make_indexer<1>(rows, {&strides}, "attention");
    m.step = 1;
  }
  m.causal = p.causal ? d.T : 0;
  return m;
}

const uint8_t* key_ptr(const Tensor& key_mask) {
  return key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
}

// Tile t of a (steps or 1, B, NH, T, T) tensor, as (B, NH, T, T).
Tensor step_tiles(const Tensor& saved, int64_t t) { return saved.slice(0, t, t + 1).squeeze(0); }

// x as the operand of a GEMM whose other operand is `partner`: a bf16 copy when partner is bf16
// (the bf16 GEMM takes two bf16 operands), else x itself.
Tensor operand_like(const Tensor& x, const Tensor& partner) {
  return partner.dtype() == DType::bf16 ? x.to(DType::bf16) : x;
}

// True when SAOBP_FUSED_ATTENTION=1.
bool fused_schedule() { return env_switch_on("SAOBP_FUSED_ATTENTION"); }

// A bf16 map of probs' shape for a GEMM operand, where `want`; its bits for a kernel to write.
Tensor half_map(bool want, const Tensor& probs) {
  return want ? Tensor::empty(probs.shape(), DType::bf16, probs.device()) : Tensor();
}
uint16_t* half_bits(Tensor& t) { return t.defined() ? &t.data<bf16>()->bits : nullptr; }

// The Potts beliefs b^0 = A .. b^steps = B: saved[0 .. steps-1], then probs.
std::vector<Tensor> potts_beliefs(const Tensor& saved, const Tensor& probs, int64_t steps) {
  std::vector<Tensor> b;
  for (int64_t t = 0; t < steps; ++t) b.push_back(step_tiles(saved, t));
  b.push_back(probs);
  return b;
}

template <class T>
void forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
               const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
               Tensor& aux, const Dims& d) {
  const char* op = "attention";
  const int64_t rows = d.B * d.NH * d.T;
  const MaskView mask = tile_mask(key_mask, p, d);
  Tensor s = probs.empty_like();
  gemm(q, false, k, true, s, p.scale, 0.0);
  const bool fused = fused_schedule();
  // bf16 operands: B's copy for B V, written with B (ElemMul's and the unfused schedule's: cast).
  Tensor Bh = half_map(fused && v.dtype() == DType::bf16 && p.variant != AttnVariant::bp_elemmul, probs);
  switch (p.variant) {
    case AttnVariant::original:
      check(launch_softmax_half<T>(s.data<T>(), mask, probs.data<T>(), half_bits(Bh), rows, d.T), op);
      break;
    case AttnVariant::bp_high:
    case AttnVariant::bp_low: {
      const Potts potts = potts_params<T>(lambda, p.variant, q.device(), "attention");
      const std::vector<Tensor> belief = potts_beliefs(saved, probs, p.steps);
      const bool prefix = p.causal && !p.leak;
      check(launch_softmax_forward<T>(s.data<T>(), mask, belief[0].data<T>(), rows, d.T, false), op);
      const size_t last = belief.size() - 1;
      if (!prefix && fused) {
        Tensor C = Tensor::empty({rows}, DType::f64, q.device());  // (tiles, T) column sums of F
        for (size_t t = 1; t < belief.size(); ++t) {
          check(launch_potts_colsum<T>(belief[t - 1].data<T>(), key_ptr(key_mask), potts.c.data<double>(),
                                       d.B, d.NH, d.T, C.data<double>()),
                op);
          check(launch_potts_refine<T>(belief[t - 1].data<T>(), s.data<T>(), C.data<double>(),
                                       key_ptr(key_mask), potts.c.data<double>(), mask, d.B, d.NH, d.T,
                                       belief[t].data<T>(), t == last ? half_bits(Bh) : nullptr),
                op);
        }
        break;
      }
      // L = s + G by columns, then its softmax; fused (a decoder's), L goes into the step's own
      // beliefs and the softmax runs there in place: no map of its own.
      Tensor L_map = fused ? Tensor() : probs.empty_like();
      for (size_t t = 1; t < belief.size(); ++t) {
        T* L = fused ? belief[t].data<T>() : L_map.data<T>();
        check(launch_potts_messages<T>(belief[t - 1].data<T>(), s.data<T>(), key_ptr(key_mask),
                                       potts.c.data<double>(), d.B, d.NH, d.T, prefix, L),
              op);
        check(launch_softmax_half<T>(L, mask, belief[t].data<T>(), t == last ? half_bits(Bh) : nullptr, rows,
                                     d.T),
              op);
      }
      break;
    }
    case AttnVariant::bp_elemmul: {
      Tensor A = step_tiles(saved, 0);
      check(launch_softmax_forward<T>(s.data<T>(), mask, A.data<T>(), rows, d.T, false), op);
      Tensor P = s;  // s is no longer needed: P = A Aᵀ takes its place
      gemm(A, false, A, true, P, 1.0, 0.0);
      check(launch_elemmul_normalize<T>(P.data<T>(), mask, probs.data<T>(), aux.data<T>(), rows, d.T), op);
      break;
    }
  }
  gemm(Bh.defined() ? Bh : operand_like(probs, v), false, v, false, out, 1.0, 0.0);
}

// The unfused Potts backward (without SAOBP_FUSED_ATTENTION=1): per BP step the softmax backward into a
// zeroed dL, ds += dL, the chain through log(1 - c P) into dP (dc by columns); then the softmax
// backward of A into ds. ds arrives zeroed.
template <class T>
void unfused_potts_backward(const std::vector<Tensor>& belief, const Tensor& dB, const Tensor& key_mask,
                            const Potts& potts, bool prefix, const MaskView& mask, const Dims& d, Tensor& ds,
                            Tensor& dc) {
  const char* op = "attention_backward";
  const int64_t rows = d.B * d.NH * d.T;
  Tensor db = dB, dL = dB.empty_like(), dP = dB.empty_like();
  for (size_t t = belief.size() - 1; t >= 1; --t) {
    fill(dL, 0.0);
    check(launch_softmax_backward<T>(belief[t].data<T>(), db.data<T>(), mask, dL.data<T>(), rows, d.T, false),
          op);
    axpby(dL, 1.0, ds, 1.0);  // L = s + G: s gets dL directly
    check(launch_potts_chain<T>(belief[t - 1].data<T>(), dL.data<T>(), key_ptr(key_mask),
                                potts.c.data<double>(), d.B, d.NH, d.T, prefix, dP.data<T>(),
                                dc.data<double>()),
          op);
    std::swap(db, dP);
  }
  check(launch_softmax_backward<T>(belief[0].data<T>(), db.data<T>(), mask, ds.data<T>(), rows, d.T, false),
        op);  // db now holds dA
}

template <class T>
void backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv, Tensor& glambda,
                const Dims& d) {
  const char* op = "attention_backward";
  const int64_t rows = d.B * d.NH * d.T;
  const MaskView mask = tile_mask(key_mask, p, d);
  Tensor dB = probs.empty_like();
  const Tensor dO = operand_like(gout, v);  // rounded once, for both of its products
  gemm(dO, false, v, true, dB, 1.0, 0.0);
  if (gv.defined()) gemm(operand_like(probs, v), true, dO, false, gv, 1.0, 1.0);
  const bool wants_lambda = glambda.defined() && uses_lambda(p.variant);
  if (!gq.defined() && !gk.defined() && !wants_lambda) return;
  // ds: written whole by the fused schedule (and, under bf16 operands, its bf16 copy for ds K
  // and dsᵀ Q with it); ElemMul and the unfused schedule add into zeros (and cast).
  const bool fused = fused_schedule() && p.variant != AttnVariant::bp_elemmul;
  Tensor ds = fused ? probs.empty_like() : probs.zeros_like();
  Tensor dSh = half_map(fused && q.dtype() == DType::bf16 && (gq.defined() || gk.defined()), probs);
  switch (p.variant) {
    case AttnVariant::original:
      if (fused)
        check(launch_softmax_grad<T>(probs.data<T>(), dB.data<T>(), ds.data<T>(), half_bits(dSh), rows, d.T),
              op);
      else
        check(launch_softmax_backward<T>(probs.data<T>(), dB.data<T>(), mask, ds.data<T>(), rows, d.T, false),
              op);
      break;
    case AttnVariant::bp_high:
    case AttnVariant::bp_low: {
      const Potts potts = potts_params<T>(lambda, p.variant, q.device(), "attention");
      const std::vector<Tensor> belief = potts_beliefs(saved, probs, p.steps);
      const bool prefix = p.causal && !p.leak;
      Tensor dc = Tensor::zeros({rows}, DType::f64, q.device());  // (tiles, T): rows' or columns' shares
      if (fused) {
        // dL at the last step's logits, then a column pass and a row pass per step (attention.cu).
        Tensor dL = probs.empty_like(), dL_prev = p.steps > 1 ? probs.empty_like() : Tensor();
        Tensor D = prefix ? Tensor() : Tensor::empty({rows}, DType::f64, q.device());
        Tensor dF = prefix ? probs.empty_like() : Tensor();
        check(launch_softmax_grad<T>(belief.back().data<T>(), dB.data<T>(), dL.data<T>(), nullptr, rows, d.T),
              op);
        for (size_t t = belief.size() - 1; t >= 1; --t) {
          check(
              launch_potts_backward_step<T>(
                  belief[t - 1].data<T>(), dL.data<T>(), key_ptr(key_mask), potts.c.data<double>(), d.B, d.NH,
                  d.T, prefix, t + 1 == belief.size(), t == 1, D.defined() ? D.data<double>() : nullptr,
                  dF.defined() ? dF.data<T>() : nullptr, ds.data<T>(), half_bits(dSh),
                  dL_prev.defined() ? dL_prev.data<T>() : nullptr, dc.data<double>()),
              op);
          std::swap(dL, dL_prev);
        }
      } else {
        unfused_potts_backward<T>(belief, dB, key_mask, potts, prefix, mask, d, ds, dc);
      }
      if (wants_lambda)
        check(launch_lambda_grad<T>(dc.data<double>(), potts.dc_dlambda.data<double>(), d.B, d.NH, d.T,
                                    glambda.data<T>()),
              op);
      break;
    }
    case AttnVariant::bp_elemmul: {
      const Tensor A = step_tiles(saved, 0);
      Tensor dP = probs.empty_like(), dA = probs.empty_like();
      check(
          launch_elemmul_grad<T>(probs.data<T>(), dB.data<T>(), aux.data<T>(), mask, dP.data<T>(), rows, d.T),
          op);
      gemm(dP, false, A, false, dA, 1.0, 0.0);  // dA = dP A + dPᵀ A
      gemm(dP, true, A, false, dA, 1.0, 1.0);
      check(launch_softmax_backward<T>(A.data<T>(), dA.data<T>(), mask, ds.data<T>(), rows, d.T, false), op);
      break;
    }
  }
  if (!gq.defined() && !gk.defined()) return;
  const Tensor dS = dSh.defined() ? dSh : operand_like(ds, q);
  if (gq.defined()) gemm(dS, false, k, false, gq, p.scale, 1.0);
  if (gk.defined()) gemm(dS, true, q, false, gk, p.scale, 1.0);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                       const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& probs, Tensor& saved,
                       Tensor& aux) {
  use_device_of(out, "attention");
  const Dims d = attn_dims(q);
  if (q.numel() == 0) return;
  dispatch_float(probs.dtype(), "attention", [&](auto tag) {  // the maps' dtype (f32 under bf16 q, k, v)
    forward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, probs, saved, aux, d);
  });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                        const Tensor& aux, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                        Tensor& glambda) {
  use_device_of(gout, "attention_backward");
  const Dims d = attn_dims(q);
  if (q.numel() == 0) return;
  dispatch_float(probs.dtype(), "attention_backward", [&](auto tag) {
    backward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, probs, saved, aux, gout, gq, gk, gv, glambda, d);
  });
}

}  // namespace saobp::cuda
