// CUDA kernels of the fused attention that are not GEMMs or softmaxes: the SAOBP Potts messages
// and their backward, the λ gradient, and BP-ElemMul's row normalization and its backward.
// CPU twin: src/attention/cpu/bp_potts.cpp, bp_elemmul.cpp, attention.cpp. Host: attention.cpp.
//
// Column kernels give column k of a tile to one thread, which walks the rows in order: sums
// down a column (encoder: all senders; decoder: an exclusive prefix or suffix) have one fixed
// order, and adjacent threads read adjacent columns.
#include "attention/cuda/launch.h"
#include "attention/formulas.h"
#include "tensor/cuda/device.cuh"

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

#define SAOBP_FLOATING(T)                                                                                   \
  template cudaError_t launch_potts_params<T>(const T*, int64_t, bool, double*, double*);                   \
  template cudaError_t launch_potts_messages<T>(const T*, const T*, const uint8_t*, const double*, int64_t, \
                                                int64_t, int64_t, bool, T*);                                \
  template cudaError_t launch_potts_chain<T>(const T*, const T*, const uint8_t*, const double*, int64_t,    \
                                             int64_t, int64_t, bool, T*, double*);                          \
  template cudaError_t launch_lambda_grad<T>(const double*, const double*, int64_t, int64_t, int64_t, T*);  \
  template cudaError_t launch_elemmul_normalize<T>(const T*, const MaskView&, T*, T*, int64_t, int64_t);    \
  template cudaError_t launch_elemmul_grad<T>(const T*, const T*, const T*, const MaskView&, T*, int64_t,   \
                                              int64_t);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
