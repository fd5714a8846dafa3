// The one place where a kernel call picks its backend.
#include "tensor/kernels.h"

namespace saobp::kern {

#define SAOBP_DISPATCH_KERNEL(name, dev, params, args) \
  void name params {                                   \
    switch (dev.device().type) {                       \
      case DeviceType::cpu:                            \
        return cpu::name args;                         \
      case DeviceType::cuda:                           \
        return cuda::name args;                        \
    }                                                  \
  }
SAOBP_KERNELS(SAOBP_DISPATCH_KERNEL)
#undef SAOBP_DISPATCH_KERNEL

}  // namespace saobp::kern
