// The launchers of the attention's CUDA kernels (attention.cu, sink_gate.cu), called by their
// host halves (attention.cpp, sink_gate.cpp). Same conventions as src/tensor/cuda/launch.h: raw
// device pointers and plain structs (nvcc never sees tensor.h), the legacy default stream, the
// launch's cudaError_t returned to the caller.
#pragma once
#include "tensor/cuda/launch.h"

namespace saobp::cuda {

// ---- attention.cu (T: float, double) ----
// Tiles are the (n,n) score matrices of the batch*NH heads, tile = b NH + h. key: (batch,n) u8,
// 1 = token (the senders of SAOBP messages), or nullptr; c: (NH) the Potts c of each head.
// P, s, L: (tiles,n,n). L = s + G with G the messages of beliefs P (src/attention/cpu/bp_potts.cpp).
// lambda: (NH) -> c, dc_dlambda: (NH) the Potts c of each head and its derivative in λ (formulas.h),
// computed on the device from λ as the element type holds it (no copy to the host).
template <class T>
cudaError_t launch_potts_params(const T* lambda, int64_t NH, bool high, double* c, double* dc_dlambda);
template <class T>
cudaError_t launch_potts_messages(const T* P, const T* s, const uint8_t* key, const double* c, int64_t batch,
                                  int64_t NH, int64_t n, bool causal, T* L);
// P, dL, dP: (tiles,n,n)  dc: (tiles,n). dP = the gradient at P given dL at the refined logits;
// dc[tile, k] += column k's share of dL/dc.
template <class T>
cudaError_t launch_potts_chain(const T* P, const T* dL, const uint8_t* key, const double* c, int64_t batch,
                               int64_t NH, int64_t n, bool causal, T* dP, double* dc);
// dc: (tiles,n)  dc_dlambda: (NH) -> glambda: (NH) += sum over b, in order, of tile (b,h)'s
// total dc times dc_dlambda[h].
template <class T>
cudaError_t launch_lambda_grad(const double* dc, const double* dc_dlambda, int64_t batch, int64_t NH,
                               int64_t n, T* glambda);
// P, out: (R,C)  r: (R). ElemMul: out = P / r on allowed entries (else 0), r = allowed row sum.
template <class T>
cudaError_t launch_elemmul_normalize(const T* P, const MaskView& mask, T* out, T* r, int64_t R, int64_t C);
// B, dB, dP: (R,C)  r: (R). dP = (dB - <dB,B>) / r on allowed entries of rows with r > 0, else 0.
template <class T>
cudaError_t launch_elemmul_grad(const T* B, const T* dB, const T* r, const MaskView& mask, T* dP, int64_t R,
                                int64_t C);

// ---- sink_gate.cu (T: float, double) ----
// probs: (B,NH,Tn,Tn)  mask: (B,Tn) u8 or null  keep: (B,NH). The head-skip gate (kernels.inc).
template <class T>
cudaError_t launch_sink_gate(const T* probs, const uint8_t* mask, double tau, double fraction, T* keep,
                             int64_t B, int64_t NH, int64_t Tn);

}  // namespace saobp::cuda
