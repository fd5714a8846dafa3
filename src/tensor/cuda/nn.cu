// CUDA kernels of the network layers: GELU, LayerNorm, (log-)softmax with masks.
// CPU twin: src/tensor/cpu/nn.cpp (the derivations are there). Host side: nn.cpp.
//
// Row kernels give one row to one warp: each lane walks the columns lane, lane + 32, ... and
// the lanes' partial sums meet in a fixed butterfly (warp_reduce), so every row is reduced in
// the same order on every run. Row statistics accumulate in double, as on the CPU. LayerNorm's
// gw, gb use the chunked column sums of reduce.cu.
#include "tensor/cuda/device.cuh"
#include "tensor/cuda/softmax_row.cuh"

namespace saobp::cuda {

namespace {

// ---------------------------------------------------------------------------------------- GELU
// formula::gelu_value and gelu_grad (src/tensor/formulas.h), in the element type.
using formula::gelu_grad;
using formula::gelu_value;

// x, y: (n)
template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n, bool tanh_approx) {
  for (int64_t i = thread_id(); i < n; i += thread_count()) y[i] = gelu_value(x[i], tanh_approx);
}

// x, gy, gx: (n)
template <class T>
__global__ void gelu_backward_kernel(const T* x, const T* gy, T* gx, int64_t n, bool tanh_approx,
                                     bool accumulate) {
  for (int64_t i = thread_id(); i < n; i += thread_count())
    gx[i] = (accumulate ? gx[i] : T(0)) + gy[i] * gelu_grad(x[i], tanh_approx);
}

// ----------------------------------------------------------------------------------- LayerNorm

// x, y: (N,C)  w, b: (C)  mean, rstd: (N). One warp per row.
template <class T>
__global__ void layernorm_forward_kernel(const T* x, const T* w, const T* b, double eps, T* y, T* mean,
                                         T* rstd, int64_t N, int64_t C) {
  for (int64_t n = warp_id(); n < N; n += warp_count()) {
    const T* xr = x + n * C;
    double acc = 0;
    for (int64_t c = lane(); c < C; c += kWarp) acc += xr[c];
    const double mu = warp_reduce(acc, Sum{}) / C;
    double var = 0;
    for (int64_t c = lane(); c < C; c += kWarp) var += (xr[c] - mu) * (xr[c] - mu);
    var = warp_reduce(var, Sum{});
    const T m = static_cast<T>(mu), r = static_cast<T>(1.0 / sqrt(var / C + eps));
    T* yr = y + n * C;
    for (int64_t c = lane(); c < C; c += kWarp) yr[c] = (xr[c] - m) * r * w[c] + b[c];
    if (lane() == 0) {
      mean[n] = m;
      rstd[n] = r;
    }
  }
}

// x, gy, gx: (N,C)  w: (C)  mean, rstd: (N). gx += r (d - mean(d) - n mean(d n)), d = gy w.
template <class T>
__global__ void layernorm_backward_input_kernel(const T* x, const T* w, const T* mean, const T* rstd,
                                                const T* gy, T* gx, int64_t N, int64_t C) {
  for (int64_t n = warp_id(); n < N; n += warp_count()) {
    const T *xr = x + n * C, *g = gy + n * C;
    const T m = mean[n], r = rstd[n];
    double dsum = 0, dnsum = 0;
    for (int64_t c = lane(); c < C; c += kWarp) {
      const T d = g[c] * w[c];
      dsum += d;
      dnsum += d * ((xr[c] - m) * r);
    }
    const T dmean = static_cast<T>(warp_reduce(dsum, Sum{}) / C);
    const T dnmean = static_cast<T>(warp_reduce(dnsum, Sum{}) / C);
    T* out = gx + n * C;
    for (int64_t c = lane(); c < C; c += kWarp) {
      const T nrm = (xr[c] - m) * r;
      out[c] += (g[c] * w[c] - dmean - nrm * dnmean) * r;
    }
  }
}

// x, gy: (N,C)  mean, rstd: (N) -> pw, pb: (chunks.count, C). Thread (p, c) sums rows of chunk p.
template <class T>
__global__ void layernorm_backward_params_kernel(const T* x, const T* mean, const T* rstd, const T* gy,
                                                 int64_t N, int64_t C, Chunks chunks, double* pw,
                                                 double* pb) {
  for (int64_t i = thread_id(); i < chunks.count * C; i += thread_count()) {
    const int64_t p = i / C, c = i - p * C;
    const int64_t end = imin(N, (p + 1) * chunks.per);
    double sw = 0, sb = 0;
    for (int64_t n = p * chunks.per; n < end; ++n) {
      const T g = gy[n * C + c];
      sw += g * ((x[n * C + c] - mean[n]) * rstd[n]);
      sb += g;
    }
    pw[i] = sw;
    pb[i] = sb;
  }
}

// ------------------------------------------------------------------------------------- softmax

// x, y: (R,C). One warp per row (softmax_row.cuh).
template <class T>
__global__ void softmax_forward_kernel(const T* x, MaskView mask, T* y, int64_t R, int64_t C, bool log) {
  for (int64_t r = warp_id(); r < R; r += warp_count())
    softmax_row(x + r * C, row_mask(mask, r, C), C, log, y + r * C);
}

// y, gy, gx: (R,C). One warp per row.
//   softmax:      gx += y (gy - sum_c gy y)
//   log-softmax:  gx_a += gy_a - e^{y_a} sum_a' gy_a' over allowed a; a row whose allowed y
//                 are all 0 (none allowed, all -inf, or a single entry) gets nothing, as on the CPU
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* gy, MaskView mask, T* gx, int64_t R, int64_t C,
                                        bool log) {
  for (int64_t r = warp_id(); r < R; r += warp_count()) {
    const T *yr = y + r * C, *g = gy + r * C;
    T* o = gx + r * C;
    const RowMask allowed = row_mask(mask, r, C);
    if (log) {
      bool live = false;
      double sg = 0;
      for (int64_t c = lane(); c < C; c += kWarp) {
        if (!allowed(c)) continue;
        sg += g[c];
        live = live || yr[c] != T(0);
      }
      if (!__any_sync(kFullMask, live)) continue;
      const T sgt = static_cast<T>(warp_reduce(sg, Sum{}));
      for (int64_t c = lane(); c < C; c += kWarp)
        if (allowed(c)) o[c] += g[c] - dmath::exp(yr[c]) * sgt;
    } else {
      const T d = softmax_grad_dot(
          yr, [g](int64_t c) { return g[c]; }, C);
      for (int64_t c = lane(); c < C; c += kWarp) o[c] += yr[c] * (g[c] - d);
    }
  }
}

// Blocks for one warp per row.
unsigned grid_for_rows(int64_t rows) { return grid_for(rows, kBlock / kWarp); }

}  // namespace

template <class T>
cudaError_t launch_gelu_forward(const T* x, T* y, int64_t n, bool tanh_approx) {
  gelu_forward_kernel<<<grid_for(n), kBlock>>>(x, y, n, tanh_approx);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_gelu_backward(const T* x, const T* gy, T* gx, int64_t n, bool tanh_approx,
                                 bool accumulate) {
  gelu_backward_kernel<<<grid_for(n), kBlock>>>(x, gy, gx, n, tanh_approx, accumulate);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_layernorm_forward(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd,
                                     int64_t N, int64_t C) {
  layernorm_forward_kernel<<<grid_for_rows(N), kBlock>>>(x, w, b, eps, y, mean, rstd, N, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_layernorm_backward_input(const T* x, const T* w, const T* mean, const T* rstd, const T* gy,
                                            T* gx, int64_t N, int64_t C) {
  layernorm_backward_input_kernel<<<grid_for_rows(N), kBlock>>>(x, w, mean, rstd, gy, gx, N, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_layernorm_backward_params(const T* x, const T* mean, const T* rstd, const T* gy, int64_t N,
                                             int64_t C, Chunks chunks, double* pw, double* pb) {
  layernorm_backward_params_kernel<<<grid_for(chunks.count * C), kBlock>>>(x, mean, rstd, gy, N, C, chunks,
                                                                           pw, pb);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_softmax_forward(const T* x, const MaskView& mask, T* y, int64_t R, int64_t C, bool log) {
  softmax_forward_kernel<<<grid_for_rows(R), kBlock>>>(x, mask, y, R, C, log);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_softmax_backward(const T* y, const T* gy, const MaskView& mask, T* gx, int64_t R,
                                    int64_t C, bool log) {
  softmax_backward_kernel<<<grid_for_rows(R), kBlock>>>(y, gy, mask, gx, R, C, log);
  return cudaGetLastError();
}

#define SAOBP_FLOATING(T)                                                                                    \
  template cudaError_t launch_gelu_forward<T>(const T*, T*, int64_t, bool);                                  \
  template cudaError_t launch_gelu_backward<T>(const T*, const T*, T*, int64_t, bool, bool);                 \
  template cudaError_t launch_layernorm_forward<T>(const T*, const T*, const T*, double, T*, T*, T*,         \
                                                   int64_t, int64_t);                                        \
  template cudaError_t launch_layernorm_backward_input<T>(const T*, const T*, const T*, const T*, const T*,  \
                                                          T*, int64_t, int64_t);                             \
  template cudaError_t launch_layernorm_backward_params<T>(const T*, const T*, const T*, const T*, int64_t,  \
                                                           int64_t, Chunks, double*, double*);               \
  template cudaError_t launch_softmax_forward<T>(const T*, const MaskView&, T*, int64_t, int64_t, bool);     \
  template cudaError_t launch_softmax_backward<T>(const T*, const T*, const MaskView&, T*, int64_t, int64_t, \
                                                  bool);
SAOBP_FLOATING(float)
SAOBP_FLOATING(double)

}  // namespace saobp::cuda
