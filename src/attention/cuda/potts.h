// The Potts constants of each head for the CUDA attention kernels (attention.cpp, tiled.cpp),
// host code: λ per head as the CPU reads it (rounded to the element type), then c and dc/dλ
// computed on the device (potts_params_kernel, attention.cu): no copy of λ to the host, no wait.
#pragma once
#include "attention/cuda/launch.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

struct Potts {
  Tensor c, dc_dlambda;  // (NH) f64 on the device
};

template <class T>
Potts potts_params(const Tensor& lambda, AttnVariant variant, Device device, const char* op) {
  const Tensor rounded = lambda.to(device).to(dtype_of<T>::value).contiguous();
  const int64_t NH = rounded.numel();
  Potts p{Tensor::empty({NH}, DType::f64, device), Tensor::empty({NH}, DType::f64, device)};
  check(launch_potts_params<T>(rounded.data<T>(), NH, variant == AttnVariant::bp_high, p.c.data<double>(),
                               p.dc_dlambda.data<double>()),
        op);
  return p;
}

}  // namespace saobp::cuda
