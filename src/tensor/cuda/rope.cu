// CUDA kernel of the rotary position embedding: one thread per pair (2i, 2i+1) of a row.
// CPU twin: src/tensor/cpu/rope.cpp. Host side (checks, angle table): rope.cpp.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// x, y: (rows, HS)  cs, sn: (Tp, HS/2). The products are rounded one by one (__dmul_rn,
// __dadd_rn: no fused multiply-add), as the CPU twin computes them under -ffp-contract=off.
template <class T>
__global__ void rope_kernel(const T* x, const double* cs, const double* sn, bool inverse, T* y, int64_t rows,
                            int64_t Tp, int64_t HS) {
  const int64_t H = HS / 2, n = rows * H;
  for (int64_t k = thread_id(); k < n; k += thread_count()) {
    const int64_t r = k / H, i = k - r * H, t = r % Tp;
    const double c = cs[t * H + i], s = inverse ? -sn[t * H + i] : sn[t * H + i];
    const double x0 = static_cast<double>(x[r * HS + 2 * i]), x1 = static_cast<double>(x[r * HS + 2 * i + 1]);
    y[r * HS + 2 * i] = static_cast<T>(__dadd_rn(__dmul_rn(x0, c), -__dmul_rn(x1, s)));
    y[r * HS + 2 * i + 1] = static_cast<T>(__dadd_rn(__dmul_rn(x0, s), __dmul_rn(x1, c)));
  }
}

}  // namespace

template <class T>
cudaError_t launch_rope(const T* x, const double* cs, const double* sn, bool inverse, T* y, int64_t rows,
                        int64_t Tp, int64_t HS) {
  rope_kernel<<<grid_for(rows * (HS / 2)), kBlock>>>(x, cs, sn, inverse, y, rows, Tp, HS);
  return cudaGetLastError();
}

template cudaError_t launch_rope<float>(const float*, const double*, const double*, bool, float*, int64_t,
                                        int64_t, int64_t);
template cudaError_t launch_rope<double>(const double*, const double*, const double*, bool, double*, int64_t,
                                         int64_t, int64_t);

}  // namespace saobp::cuda
