// saobp::kern: the device-agnostic kernel API (one function per entry of kernel_list.h). Each
// call dispatches on the device of its output tensor in one place, src/tensor/dispatch.cpp.
#pragma once
#include "tensor/backend.h"

namespace saobp::kern {
SAOBP_KERNELS(SAOBP_DECLARE_KERNEL)
}  // namespace saobp::kern
