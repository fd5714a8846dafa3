// CUDA kernels of the fused attention that are not GEMMs or softmaxes: the SAOBP Potts messages
// and their backward, the λ gradient, and BP-ElemMul's row normalization and its backward.
// CPU twin: src/attention/cpu/bp_potts.cpp, bp_elemmul.cpp, attention.cpp. Host: attention.cpp.
//
// Column kernels give column k of a tile to one thread, which walks the rows in order: sums
// down a column (encoder: all senders; decoder: an exclusive prefix or suffix) have one fixed
// order, and adjacent threads read adjacent columns. Row kernels give a row to a warp, as the
// softmax kernels do (softmax_row.cuh).
//
// The maps' passes come in two schedules over the (tiles, n, n) maps; both give the beliefs of
// the CPU twin's formulas, the second in fewer passes (docs/saobp-gradients.md §7):
//   unfused (the default until the fused one has run on a GPU, and the baseline it is measured
//     against): L = s + G written by a column kernel, then the softmax kernel; backward the softmax backward
//     into a zeroed dL, ds += dL, the chain through log(1 - c P) (potts_chain_kernel), and the softmax
//     backward of P into a zeroed ds, each a pass over the maps; under bf16 GEMM operands B and ds are cast
//     to bf16 by passes of their own;
//   fused (SAOBP_FUSED_ATTENTION=1): the encoder's forward is the column sums of F = log(1 - c P) (a vector
//     per tile) and one row pass that forms L_j = s_j + C - F_j and its softmax in place in B_j;
//     the backward is, per BP step, one column pass (the column sums of dL, or a decoder's
//     suffix sums dF) and one row pass that forms dP from them, its softmax backward through P
//     and the update of ds, with ∂L/∂c summed per row; original's ds is written, not added to
//     zeros; and the kernels that write B and ds write their bf16 copies too (write_half).
// State: the fused schedule passes under the CUDA emulator (tests/cuda_emu): its kernels in the
// [emu] test "cuda emulator: the fused attention schedule gives the unfused one's maps and
// gradients" (the unfused schedule's values, the CPU twin's within rounding, no race), and the
// whole backend with it switched on in the [cuda] tests on the emulated GPU (tools/emu_check.sh
// full), among them "cuda fused attention schedule gives the unfused one's values" and "cuda
// bf16 attention: the fused schedule gives the unfused one's results". It has not run on a GPU
// yet, where its speed is the point: those tests and gpu_check.sh's `fused` stage are its checks
// there.
#include <type_traits>

#include "attention/cuda/launch.h"
#include "attention/formulas.h"
#include "tensor/bf16.h"
#include "tensor/cuda/device.cuh"
#include "tensor/cuda/softmax_row.cuh"

namespace saobp::cuda {

namespace {

// Column k of tile `tile`: its element offset, key row and Potts c.
struct Column {
  int64_t base, k;
  const uint8_t* key;
  double c;
};
__device__ __forceinline__ Column column(int64_t i, const uint8_t* key, const double* c, int64_t NH,
                                         int64_t n) {
  const int64_t tile = i / n, k = i - tile * n;
  return {tile * n * n + k, k, key ? key + tile / NH * n : nullptr, c[tile % NH]};
}

// F_ik = log(1 - c P_ik) for sender rows i (key[i] = 1), 0 for padding rows.
template <class T>
__device__ __forceinline__ T log_factor(const Column& col, const T* P, int64_t i, int64_t n) {
  if (col.key && !col.key[i]) return T(0);
  return dmath::log(T(1) - static_cast<T>(col.c) * P[col.base + i * n]);
}

// P, s, L: (tiles,n,n). One thread per (tile, column k):
//   encoder  G_jk = sum_i F_ik - F_jk  (every sender but j)
//   decoder  G_jk = sum_{i<j} F_ik     (an exclusive prefix sum down the column)
// L_jk = s_jk + G_jk, with G summed in double.
template <class T>
__global__ void potts_messages_kernel(const T* P, const T* s, const uint8_t* key, const double* c,
                                      int64_t tiles, int64_t NH, int64_t n, bool causal, T* L) {
  for (int64_t i = thread_id(); i < tiles * n; i += thread_count()) {
    const Column col = column(i, key, c, NH, n);
    double acc = 0;
    if (causal) {
      for (int64_t j = 0; j < n; ++j) {
        L[col.base + j * n] = s[col.base + j * n] + static_cast<T>(acc);
        acc += log_factor(col, P, j, n);
      }
    } else {
      for (int64_t r = 0; r < n; ++r) acc += log_factor(col, P, r, n);
      for (int64_t j = 0; j < n; ++j)
        L[col.base + j * n] = s[col.base + j * n] + static_cast<T>(acc - log_factor(col, P, j, n));
    }
  }
}

// P, dL, dP: (tiles,n,n)  dc: (tiles,n). One thread per (tile, column k):
//   dF_ik = sum over the rows j that heard sender i of dL_jk (encoder: column sum minus row i;
//   decoder: exclusive suffix sum), then through F = log(1 - c P):
//   dP_ik = dF_ik (-c) / (1 - c P_ik),   dc += dF_ik (-P_ik) / (1 - c P_ik)   (senders only).
template <class T>
__global__ void potts_chain_kernel(const T* P, const T* dL, const uint8_t* key, const double* c,
                                   int64_t tiles, int64_t NH, int64_t n, bool causal, T* dP, double* dc) {
  for (int64_t t = thread_id(); t < tiles * n; t += thread_count()) {
    const Column col = column(t, key, c, NH, n);
    const T cc = static_cast<T>(col.c);
    double acc = 0, dck = 0;
    auto chain = [&](int64_t i, T dF) {
      const int64_t at = col.base + i * n;
      if (col.key && !col.key[i]) {
        dP[at] = T(0);
        return;
      }
      const T denom = T(1) - cc * P[at];
      dP[at] = dF * -cc / denom;
      dck += dF * -P[at] / denom;
    };
    if (causal) {
      for (int64_t i = n - 1; i >= 0; --i) {
        chain(i, static_cast<T>(acc));
        acc += dL[col.base + i * n];
      }
    } else {
      for (int64_t j = 0; j < n; ++j) acc += dL[col.base + j * n];
      for (int64_t i = 0; i < n; ++i) chain(i, static_cast<T>(acc - dL[col.base + i * n]));
    }
    dc[t] += dck;
  }
}

// ---- the fused schedule ----

// bf16 GEMM operands: hr[c] = y_c rounded to bf16 (nearest, ties to even: the cast kernel's
// rounding) for the entries of a row of C that this lane wrote in yr; nothing when hr is nullptr
// (or T is double, whose maps never feed a bf16 GEMM). A map's operand copy is then made where
// the map is written, not by a cast pass of its own.
template <class T>
__device__ __forceinline__ void write_half(const T* yr, uint16_t* hr, int64_t C) {
  if constexpr (std::is_same_v<T, float>) {
    if (hr)
      for (int64_t c = lane(); c < C; c += kWarp) hr[c] = bf16_bits(yr[c]);
  }
}

// x, y: (R,C)  half: (R,C) or nullptr. One warp per row: the masked softmax of nn.cu's kernel
// (softmax_row), and y's bf16 copy where asked.
template <class T>
__global__ void softmax_half_kernel(const T* x, MaskView mask, T* y, uint16_t* half, int64_t R, int64_t C) {
  for (int64_t r = warp_id(); r < R; r += warp_count()) {
    softmax_row(x + r * C, row_mask(mask, r, C), C, false, y + r * C);
    write_half(y + r * C, half ? half + r * C : nullptr, C);
  }
}

// Row r of the (tiles,n,n) maps: its tile, whether it sends messages (key[row] = 1, or no key
// mask) and its head's Potts c.
struct Row {
  int64_t tile;
  bool sends;
  double c;
};
__device__ __forceinline__ Row row_of(int64_t r, const uint8_t* key, const double* c, int64_t NH, int64_t n) {
  const int64_t tile = r / n, i = r - tile * n;
  return {tile, !key || key[tile / NH * n + i], c[tile % NH]};
}

// P: (tiles,n,n) -> C: (tiles,n). One thread per (tile, column k): C_k = sum over the sender
// rows i, in order, of F_ik (in double), the encoder's column sums of potts_messages_kernel.
template <class T>
__global__ void potts_colsum_kernel(const T* P, const uint8_t* key, const double* c, int64_t tiles,
                                    int64_t NH, int64_t n, double* C) {
  for (int64_t i = thread_id(); i < tiles * n; i += thread_count()) {
    const Column col = column(i, key, c, NH, n);
    double acc = 0;
    for (int64_t r = 0; r < n; ++r) acc += log_factor(col, P, r, n);
    C[i] = acc;
  }
}

// P, s, B: (tiles,n,n)  C: (tiles,n). One warp per row j (the encoder, or a leaking decoder):
// L_jk = s_jk + (C_k - F_jk) written into B_j, then B_j = softmax(L_j) over the allowed keys in
// place: the entries potts_messages_kernel and softmax_forward_kernel give, in one pass (and B's
// bf16 copy into half, where asked).
template <class T>
__global__ void potts_refine_kernel(const T* P, const T* s, const double* C, const uint8_t* key,
                                    const double* c, MaskView mask, int64_t tiles, int64_t NH, int64_t n,
                                    T* B, uint16_t* half) {
  for (int64_t r = warp_id(); r < tiles * n; r += warp_count()) {
    const Row row = row_of(r, key, c, NH, n);
    const T cc = static_cast<T>(row.c);
    const T *Pj = P + r * n, *sj = s + r * n;
    const double* Ct = C + row.tile * n;
    T* Bj = B + r * n;
    for (int64_t k = lane(); k < n; k += kWarp) {
      const T F = row.sends ? dmath::log(T(1) - cc * Pj[k]) : T(0);
      Bj[k] = sj[k] + static_cast<T>(Ct[k] - F);
    }
    softmax_row(Bj, row_mask(mask, r, n), n, false, Bj);  // each lane rereads its own entries
    write_half(Bj, half ? half + r * n : nullptr, n);
  }
}

// y, gy, gx: (R,C)  half: (R,C) or nullptr. One warp per row: gx = y (gy - <gy, y>), written (not
// added), and its bf16 copy where asked.
template <class T>
__global__ void softmax_grad_kernel(const T* y, const T* gy, T* gx, uint16_t* half, int64_t R, int64_t C) {
  for (int64_t r = warp_id(); r < R; r += warp_count()) {
    const T *yr = y + r * C, *g = gy + r * C;
    const T d = softmax_grad_dot(
        yr, [g](int64_t k) { return g[k]; }, C);
    T* o = gx + r * C;
    for (int64_t k = lane(); k < C; k += kWarp) o[k] = yr[k] * (g[k] - d);
    write_half(o, half ? half + r * C : nullptr, C);
  }
}

// dL: (tiles,n,n). One thread per (tile, column k):
//   encoder  D_k = sum over all rows j, in order, of dL_jk           -> D: (tiles,n)
//   decoder  dF_ik = sum over j > i of dL_jk (exclusive suffix sums)  -> dF: (tiles,n,n)
// the sums the first loop of potts_chain_kernel forms.
template <class T>
__global__ void potts_grad_columns_kernel(const T* dL, int64_t tiles, int64_t n, bool causal, double* D,
                                          T* dF) {
  for (int64_t i = thread_id(); i < tiles * n; i += thread_count()) {
    const int64_t tile = i / n, k = i - tile * n, base = tile * n * n + k;
    double acc = 0;
    if (causal) {
      for (int64_t r = n - 1; r >= 0; --r) {
        dF[base + r * n] = static_cast<T>(acc);
        acc += dL[base + r * n];
      }
    } else {
      for (int64_t r = 0; r < n; ++r) acc += dL[base + r * n];
      D[i] = acc;
    }
  }
}

// One BP step of the backward, row i of every tile to a warp, given dL at the step's logits and
// the sums of potts_grad_columns_kernel:
//   dF_ik = D_k - dL_ik (encoder) or the decoder's dF_ik;
//   dP_ik = dF_ik (-c) / (1 - c P_ik) for sender rows (0 for the others); ∂L/∂c of the row,
//     sum over k of dF_ik (-P_ik) / (1 - c P_ik), added to dc[tile, i];
//   y_i = P_i (dP_i - <dP_i, P_i>), the softmax backward through the previous beliefs P;
//   ds_i = (first ? 0 : ds_i) + dL_i (L = s + G: s gets dL directly), plus y_i at the last step
//     (P = A, whose logits are s), with its bf16 copy into ds_half where asked; else y_i is the
//     next step's dL, written to dL_prev.
// Two sweeps of the row: dP for the dot and ∂L/∂c, then dP again for y (the same operations, so
// the same value; storing it would be a map's write and read more). Each entry's value is the
// one potts_chain_kernel and the softmax backward give; the dot is softmax_grad_dot's sum.
template <class T>
__global__ void potts_rows_backward_kernel(const T* P, const T* dL, const double* D, const T* dF,
                                           const uint8_t* key, const double* c, int64_t tiles, int64_t NH,
                                           int64_t n, bool causal, bool first, bool last, T* ds,
                                           uint16_t* ds_half, T* dL_prev, double* dc) {
  for (int64_t r = warp_id(); r < tiles * n; r += warp_count()) {
    const Row row = row_of(r, key, c, NH, n);
    const bool sends = row.sends;
    const T cc = static_cast<T>(row.c);
    const T *Pi = P + r * n, *dLi = dL + r * n;
    const double* Dt = causal ? nullptr : D + row.tile * n;
    const T* dFi = causal ? dF + r * n : nullptr;
    auto grad_F = [&](int64_t k) { return causal ? dFi[k] : static_cast<T>(Dt[k] - dLi[k]); };
    auto grad_P = [&](int64_t k) { return sends ? grad_F(k) * -cc / (T(1) - cc * Pi[k]) : T(0); };
    double dot = 0, dck = 0;
    for (int64_t k = lane(); k < n; k += kWarp) {
      const T g = grad_P(k);
      dot += g * Pi[k];
      if (sends) dck += grad_F(k) * -Pi[k] / (T(1) - cc * Pi[k]);
    }
    const T d = static_cast<T>(warp_reduce(dot, Sum{}));
    if (sends) {
      dck = warp_reduce(dck, Sum{});
      if (lane() == 0) dc[r] += dck;
    }
    T* dsi = ds + r * n;
    T* out = last ? nullptr : dL_prev + r * n;
    for (int64_t k = lane(); k < n; k += kWarp) {
      const T acc = first ? dLi[k] : dsi[k] + dLi[k];
      const T y = Pi[k] * (grad_P(k) - d);
      if (last) {
        dsi[k] = acc + y;
      } else {
        dsi[k] = acc;
        out[k] = y;
      }
    }
    if (last) write_half(dsi, ds_half ? ds_half + r * n : nullptr, n);
  }
}

// dc: (tiles,n)  dc_dlambda: (NH)  glambda: (NH). One thread per head.
template <class T>
__global__ void lambda_grad_kernel(const double* dc, const double* dc_dlambda, int64_t batch, int64_t NH,
                                   int64_t n, T* glambda) {
  for (int64_t h = thread_id(); h < NH; h += thread_count()) {
    double acc = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const double* row = dc + (b * NH + h) * n;
      double tile = 0;
      for (int64_t k = 0; k < n; ++k) tile += row[k];
      acc += tile * dc_dlambda[h];
    }
    glambda[h] += static_cast<T>(acc);
  }
}

// P, out: (R,C)  r: (R). One warp per row.
template <class T>
__global__ void elemmul_normalize_kernel(const T* P, MaskView mask, T* out, T* r, int64_t R, int64_t C) {
  for (int64_t j = warp_id(); j < R; j += warp_count()) {
    const T* Pj = P + j * C;
    T* oj = out + j * C;
    const RowMask allowed = row_mask(mask, j, C);
    double sum = 0;
    for (int64_t k = lane(); k < C; k += kWarp)
      if (allowed(k)) sum += Pj[k];
    sum = warp_reduce(sum, Sum{});
    if (lane() == 0) r[j] = static_cast<T>(sum);
    const T inv = sum > 0 ? static_cast<T>(1.0 / sum) : T(0);
    for (int64_t k = lane(); k < C; k += kWarp) oj[k] = allowed(k) ? Pj[k] * inv : T(0);
  }
}

// B, dB, dP: (R,C)  r: (R). One warp per row.
template <class T>
__global__ void elemmul_grad_kernel(const T* B, const T* dB, const T* r, MaskView mask, T* dP, int64_t R,
                                    int64_t C) {
  for (int64_t j = warp_id(); j < R; j += warp_count()) {
    const T *Bj = B + j * C, *dBj = dB + j * C;
    T* dPj = dP + j * C;
    if (!(r[j] > T(0))) {  // no allowed entry: B_j = 0 and no gradient
      for (int64_t k = lane(); k < C; k += kWarp) dPj[k] = T(0);
      continue;
    }
    double dot = 0;
    for (int64_t k = lane(); k < C; k += kWarp) dot += dBj[k] * Bj[k];
    const T d = static_cast<T>(warp_reduce(dot, Sum{}));
    const T inv = T(1) / r[j];
    const RowMask allowed = row_mask(mask, j, C);
    for (int64_t k = lane(); k < C; k += kWarp) dPj[k] = allowed(k) ? (dBj[k] - d) * inv : T(0);
  }
}

unsigned grid_for_rows(int64_t rows) { return grid_for(rows, kBlock / kWarp); }

}  // namespace

template <class T>
cudaError_t launch_potts_messages(const T* P, const T* s, const uint8_t* key, const double* c, int64_t batch,
                                  int64_t NH, int64_t n, bool causal, T* L) {
  const int64_t tiles = batch * NH;
  potts_messages_kernel<<<grid_for(tiles * n), kBlock>>>(P, s, key, c, tiles, NH, n, causal, L);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_potts_chain(const T* P, const T* dL, const uint8_t* key, const double* c, int64_t batch,
                               int64_t NH, int64_t n, bool causal, T* dP, double* dc) {
  const int64_t tiles = batch * NH;
  potts_chain_kernel<<<grid_for(tiles * n), kBlock>>>(P, dL, key, c, tiles, NH, n, causal, dP, dc);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_potts_colsum(const T* P, const uint8_t* key, const double* c, int64_t batch, int64_t NH,
                                int64_t n, double* C) {
  const int64_t tiles = batch * NH;
  potts_colsum_kernel<<<grid_for(tiles * n), kBlock>>>(P, key, c, tiles, NH, n, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_potts_refine(const T* P, const T* s, const double* C, const uint8_t* key, const double* c,
                                const MaskView& mask, int64_t batch, int64_t NH, int64_t n, T* B,
                                uint16_t* half) {
  const int64_t tiles = batch * NH;
  potts_refine_kernel<<<grid_for_rows(tiles * n), kBlock>>>(P, s, C, key, c, mask, tiles, NH, n, B, half);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_softmax_half(const T* x, const MaskView& mask, T* y, uint16_t* half, int64_t R,
                                int64_t C) {
  softmax_half_kernel<<<grid_for_rows(R), kBlock>>>(x, mask, y, half, R, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_softmax_grad(const T* y, const T* gy, T* gx, uint16_t* half, int64_t R, int64_t C) {
  softmax_grad_kernel<<<grid_for_rows(R), kBlock>>>(y, gy, gx, half, R, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_potts_backward_step(const T* P, const T* dL, const uint8_t* key, const double* c,
                                       int64_t batch, int64_t NH, int64_t n, bool causal, bool first,
                                       bool last, double* D, T* dF, T* ds, uint16_t* ds_half, T* dL_prev,
                                       double* dc) {
  const int64_t tiles = batch * NH;
  potts_grad_columns_kernel<<<grid_for(tiles * n), kBlock>>>(dL, tiles, n, causal, D, dF);
  potts_rows_backward_kernel<<<grid_for_rows(tiles * n), kBlock>>>(P, dL, D, dF, key, c, tiles, NH, n, causal,
                                                                   first, last, ds, ds_half, dL_prev, dc);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_lambda_grad(const double* dc, const double* dc_dlambda, int64_t batch, int64_t NH,
                               int64_t n, T* glambda) {
  lambda_grad_kernel<<<grid_for(NH), kBlock>>>(dc, dc_dlambda, batch, NH, n, glambda);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_elemmul_normalize(const T* P, const MaskView& mask, T* out, T* r, int64_t R, int64_t C) {
  elemmul_normalize_kernel<<<grid_for_rows(R), kBlock>>>(P, mask, out, r, R, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_elemmul_grad(const T* B, const T* dB, const T* r, const MaskView& mask, T* dP, int64_t R,
                                int64_t C) {
  elemmul_grad_kernel<<<grid_for_rows(R), kBlock>>>(B, dB, r, mask, dP, R, C);
  return cudaGetLastError();
}

namespace {
template <class T>
__global__ void potts_params_kernel(const T* lambda, int64_t NH, bool high, double* c, double* dc_dlambda) {
  for (int64_t h = thread_id(); h < NH; h += thread_count()) {
    const double l = static_cast<double>(lambda[h]);
    c[h] = attn::potts_c(high, l);
    dc_dlambda[h] = attn::potts_dc_dlambda(high, l);
  }
}
}  // namespace

template <class T>
cudaError_t launch_potts_params(const T* lambda, int64_t NH, bool high, double* c, double* dc_dlambda) {
  potts_params_kernel<<<grid_for(NH), kBlock>>>(lambda, NH, high, c, dc_dlambda);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                                    \
  template cudaError_t launch_potts_params<T>(const T*, int64_t, bool, double*, double*);                    \
  template cudaError_t launch_potts_messages<T>(const T*, const T*, const uint8_t*, const double*, int64_t,  \
                                                int64_t, int64_t, bool, T*);                                 \
  template cudaError_t launch_potts_chain<T>(const T*, const T*, const uint8_t*, const double*, int64_t,     \
                                             int64_t, int64_t, bool, T*, double*);                           \
  template cudaError_t launch_lambda_grad<T>(const double*, const double*, int64_t, int64_t, int64_t, T*);   \
  template cudaError_t launch_potts_colsum<T>(const T*, const uint8_t*, const double*, int64_t, int64_t,     \
                                              int64_t, double*);                                             \
  template cudaError_t launch_potts_refine<T>(const T*, const T*, const double*, const uint8_t*,             \
                                              const double*, const MaskView&, int64_t, int64_t, int64_t, T*, \
                                              uint16_t*);                                                    \
  template cudaError_t launch_softmax_half<T>(const T*, const MaskView&, T*, uint16_t*, int64_t, int64_t);   \
  template cudaError_t launch_softmax_grad<T>(const T*, const T*, T*, uint16_t*, int64_t, int64_t);          \
  template cudaError_t launch_potts_backward_step<T>(const T*, const T*, const uint8_t*, const double*,      \
                                                     int64_t, int64_t, int64_t, bool, bool, bool, double*,   \
                                                     T*, T*, uint16_t*, T*, double*);                        \
  template cudaError_t launch_elemmul_normalize<T>(const T*, const MaskView&, T*, T*, int64_t, int64_t);     \
  template cudaError_t launch_elemmul_grad<T>(const T*, const T*, const T*, const MaskView&, T*, int64_t,    \
                                              int64_t);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
