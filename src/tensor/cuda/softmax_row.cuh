// The row steps of the masked softmax, one warp per row (lanes stride over the columns; sums in
// double, combined by warp_reduce). nn.cu's softmax kernels and the fused SAOBP kernels of
// src/attention/cuda/attention.cu both call them, so a softmax computed by either gives the
// same bits.
#pragma once
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

// y = the (log-)softmax of x over the allowed entries of one row of C. Masked entries and rows
// with nothing allowed give 0. NaN propagates as on the CPU (src/tensor/cpu/softmax_row.h): the
// max skips NaN, so a row whose allowed entries are all NaN (or NaN and -inf) looks empty; it
// gives NaN, not zeros. The softmax (not the log-softmax) may run in place (xr == yr): each lane
// reads an entry of x before it writes the same entry of y.
template <class T>
__device__ __forceinline__ void softmax_row(const T* xr, const RowMask& allowed, int64_t C, bool log, T* yr) {
  T mx = dmath::neg_inf<T>();
  for (int64_t c = lane(); c < C; c += kWarp)
    if (allowed(c) && xr[c] > mx) mx = xr[c];
  mx = warp_reduce(mx, Max{});
  if (mx == dmath::neg_inf<T>()) {  // nothing allowed (or all -inf), or NaN
    T nan = T(0);
    for (int64_t c = lane(); c < C; c += kWarp)
      if (allowed(c) && xr[c] != xr[c]) nan = T(1);
    nan = warp_reduce(nan, Max{});
    const T fill = nan > T(0) ? static_cast<T>(NAN) : T(0);
    for (int64_t c = lane(); c < C; c += kWarp) yr[c] = fill;
    return;
  }
  double sum = 0;
  for (int64_t c = lane(); c < C; c += kWarp) {
    const T v = allowed(c) ? dmath::exp(xr[c] - mx) : T(0);
    yr[c] = v;
    sum += v;
  }
  sum = warp_reduce(sum, Sum{});
  if (log) {
    const T lse = static_cast<T>(::log(sum));
    for (int64_t c = lane(); c < C; c += kWarp) yr[c] = allowed(c) ? xr[c] - mx - lse : T(0);
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t c = lane(); c < C; c += kWarp) yr[c] *= inv;  // this lane wrote yr[c] above
  }
}

// d = <g, y> of one row of C, summed in double: the softmax backward's dot, after which the
// gradient at the logits is y_c (g_c - d). g is an accessor, g(c) the row's gradient at entry c
// (in T), so a kernel can compute g on the fly.
template <class T, class G>
__device__ __forceinline__ T softmax_grad_dot(const T* yr, G g, int64_t C) {
  double dot = 0;
  for (int64_t c = lane(); c < C; c += kWarp) dot += g(c) * yr[c];
  return static_cast<T>(warp_reduce(dot, Sum{}));
}

}  // namespace saobp::cuda
