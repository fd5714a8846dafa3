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
// The fused schedule (attention.cu's header). Encoder (or leaking decoder) forward of one BP
// step: C (tiles,n) = the column sums of F = log(1 - c P) (launch_potts_colsum), then
// B = softmax_allowed(s + C - F) row by row (launch_potts_refine; mask as the softmax's), and B
// rounded to bf16 into half (the operand of a bf16 B V) where half is not nullptr.
template <class T>
cudaError_t launch_potts_colsum(const T* P, const uint8_t* key, const double* c, int64_t batch, int64_t NH,
                                int64_t n, double* C);
template <class T>
cudaError_t launch_potts_refine(const T* P, const T* s, const double* C, const uint8_t* key, const double* c,
                                const MaskView& mask, int64_t batch, int64_t NH, int64_t n, T* B,
                                uint16_t* half);
// x, y: (R,C). launch_softmax_forward's softmax (log = false), x == y allowed (in place), and y's
// bf16 copy into half (R,C) where half is not nullptr.
template <class T>
cudaError_t launch_softmax_half(const T* x, const MaskView& mask, T* y, uint16_t* half, int64_t R, int64_t C);
// y, gy, gx: (R,C). gx = y (gy - <gy, y>) row by row, written (the softmax backward of
// launch_softmax_backward without the accumulation, so gx needs no zeroing); its bf16 copy into
// half (R,C) where half is not nullptr.
template <class T>
cudaError_t launch_softmax_grad(const T* y, const T* gy, T* gx, uint16_t* half, int64_t R, int64_t C);
// One BP step of the backward from dL (the gradient at the step's logits) and P (the step's input
// beliefs): ds = (first ? 0 : ds) + dL, then at the last step (P = A) ds += the softmax backward
// through A of dP, else dL_prev = that softmax backward (the previous step's dL); dc[tile, i] +=
// row i's share of dL/dc. Scratch: D (tiles,n) for the encoder, dF (tiles,n,n) for the decoder
// (causal: not leaking); the other may be nullptr. dL_prev is unused when last; ds_half, where
// not nullptr, receives the last step's ds rounded to bf16.
template <class T>
cudaError_t launch_potts_backward_step(const T* P, const T* dL, const uint8_t* key, const double* c,
                                       int64_t batch, int64_t NH, int64_t n, bool causal, bool first,
                                       bool last, double* D, T* dF, T* ds, uint16_t* ds_half, T* dL_prev,
                                       double* dc);
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

// ---- tiled.cu (T: float, double) ----
// The tiled kernels (kernels.inc attention_tiled_forward / _backward): each pass one thread block
// per (head, query block) or (head, key block), head tile = b NH + h, nb = tiled_blocks(n) blocks
// a head. q, k, v, out, gout, gq, gk, gv: (tiles, n, hs) (gq, gk, gv nullptr: skipped); key:
// (batch, n) u8 or nullptr; c: (NH) the Potts c of each head (launch_potts_params), nullptr when
// S = 0; lse: (S+1, tiles, n); colsum: (S, tiles, n) (nullptr when S = 0). all: every other
// token row sends (encoder, leaking decoder). Scratch: qs (tiles, n, hs) scale·Q; work, the tiles
// of each thread block (tiles · nb · tiled_block_elems elements of T); cells, the blocks' column
// parts (tiles · tiled_cells_per_head doubles: a decoder's P table (nb, S, n) per head, an
// encoder's parts of one level (nb, n)); backward: rho (tiles, S+1, n), E (tiles, S, n), R (a
// decoder's (tiles, nb, S, n)) and dc (tiles, nb): ∂L/∂c of each query block's rows.
template <class T>
struct TiledArgs {
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  const uint8_t* key = nullptr;
  const double* c = nullptr;
  int64_t NH = 0, n = 0, hs = 0, tiles = 0, nb = 0;
  int S = 0;
  bool causal = false, all = true;
  bool staged = false;  // tile products through shared memory (tiled.cu, SAOBP_TILED_STAGED=1)
  double scale = 1;
  T *lse = nullptr, *colsum = nullptr;
  const T *out = nullptr, *gout = nullptr;  // backward
  T *gq = nullptr, *gk = nullptr, *gv = nullptr;
  T *qs = nullptr, *work = nullptr;
  double *cells = nullptr, *rho = nullptr, *E = nullptr, *R = nullptr, *dc = nullptr;
};
// Tiles of 64 query rows × 64 keys, as the CPU twin's (src/attention/cpu/tiled.cpp); a key
// block is a query block's width, so the passes over key blocks have nb items a head too.
constexpr int64_t kTiledRows = 64, kTiledCols = 64, kTiledArea = kTiledRows * kTiledCols;
static_assert(kTiledRows == kTiledCols);
constexpr int64_t tiled_blocks(int64_t n) { return (n + kTiledRows - 1) / kTiledRows; }
// The tiles of one thread block in elements of T: s, tmp and ds, then the levels 0..S of x, b, g
// and dL, one tile each.
constexpr int64_t tiled_block_elems(int S) { return (3 + 4 * (S + int64_t{1})) * kTiledArea; }
constexpr int64_t tiled_cells_per_head(int64_t n, int S, bool all) {
  return tiled_blocks(n) * (all ? 1 : int64_t{S}) * n;
}
template <class T>
cudaError_t launch_attention_tiled_forward(const TiledArgs<T>& a, T* out);
template <class T>
cudaError_t launch_attention_tiled_backward(const TiledArgs<T>& a);

// ---- sink_gate.cu (T: float, double) ----
// probs: (B,NH,Tn,Tn)  mask: (B,Tn) u8 or null  keep: (B,NH). The head-skip gate (kernels.inc).
template <class T>
cudaError_t launch_sink_gate(const T* probs, const uint8_t* mask, double tau, double fraction, T* keep,
                             int64_t B, int64_t NH, int64_t Tn);

}  // namespace saobp::cuda
