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

// The cross-entropy's targets as i32 on `device`, with the number of rows that take part (those
// not ignore_index), counted on the host (targets are small) before host targets cross.
Tensor loss_targets(const Tensor& targets, int64_t N, int64_t ignore_index, Device device, int64_t& count,
                    const char* op);
// The weight of each of N rows of a mean over `count` of them, given the mean's gradient g (a
// scalar): g / count in every row. On the CPU from g's value; on a GPU there, without reading g.
Tensor mean_row_weights(const Tensor& g, int64_t count, int64_t N, const Tensor& like);

}  // namespace saobp
