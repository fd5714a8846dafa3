// CUDA optimizer kernels: one AdamW step. CPU twin: src/tensor/cpu/optim.cpp. Host: optim.cpp.
// Elementwise, one thread per parameter: no reduction, so nothing to order.
#include "tensor/cuda/device.cuh"

namespace saobp::cuda {

namespace {

// p, g, m, v: (n)
template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, AdamWCoeffs h, int64_t n) {
  const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), eps = static_cast<T>(h.eps);
  const T decay = static_cast<T>(h.decay), step_size = static_cast<T>(h.step_size);
  const T inv_sqrt_bc2 = static_cast<T>(h.inv_sqrt_bc2);
  for (int64_t i = thread_id(); i < n; i += thread_count()) {
    const T gi = g[i];
    const T mi = b1 * m[i] + (T(1) - b1) * gi;
    const T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (dmath::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace

template <class T>
cudaError_t launch_adamw(T* p, const T* g, T* m, T* v, const AdamWCoeffs& h, int64_t n) {
  adamw_kernel<<<grid_for(n), kBlock>>>(p, g, m, v, h, n);
  return cudaGetLastError();
}

template cudaError_t launch_adamw<float>(float*, const float*, float*, float*, const AdamWCoeffs&, int64_t);
template cudaError_t launch_adamw<double>(double*, const double*, double*, double*, const AdamWCoeffs&,
                                          int64_t);

}  // namespace saobp::cuda
