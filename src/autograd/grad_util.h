// Small helpers shared by the backward closures of src/autograd/functions_*.cpp.
#pragma once
#include "autograd/var.h"
#include "tensor/kernels.h"

namespace saobp {

// grad += g, where g has the broadcast shape of an op and grad the shape of one of its inputs:
// the broadcast dims are summed away (numpy broadcasting rules, leading dims padded with 1).
void accumulate_broadcast(const Tensor& g, Tensor& grad);
// The same into input i's gradient; a first gradient is written rather than added to zeros.
void accumulate_broadcast(const Tensor& g, GradSlots& gin, size_t i);

// A GEMM operand for `t`'s last two dims: t itself if contiguous, the contiguous tensor whose
// transpose t is (trans = true), or a contiguous copy.
Tensor gemm_operand(const Tensor& t, bool& trans);

}  // namespace saobp
