// The differentiable ops. Each computes its forward through saobp::kern and records a
// hand-written backward (kernels, not a composition of differentiable ops). Grouped by family:
// functions_linalg.cpp, functions_elementwise.cpp, functions_shape.cpp, functions_nn.cpp,
// functions_reduce.cpp.
#pragma once
#include <vector>

#include "autograd/var.h"
#include "tensor/kernels.h"

namespace saobp {

// ---- linear algebra ----
// a: (..., M, K) @ b: (K, N) or (..., K, N) with the same leading dims -> (..., M, N).
Var matmul(const Var& a, const Var& b);
// The operands of a layer's GEMMs (train.precision, docs/precision.md). f32: x, W and the output
// gradient as they are. bf16: each rounded to bf16 (nearest, ties to even) on the way into the
// GEMM, which accumulates in f32 and writes f32; the layer keeps its bf16 copies of x and W for
// the backward (half the memory of the f32 ones). Weights, their gradients and every other op
// stay f32.
enum class GemmInputs { f32, bf16 };
// x: (..., IN) W: (OUT, IN) b: (OUT) or undefined -> x Wᵀ + b: (..., OUT).
Var linear(const Var& x, const Var& w, const Var& b = Var(), GemmInputs in = GemmInputs::f32);
// x (..., IN) @ w (IN, OUT) + b (OUT): Hugging Face's Conv1D (GPT-2), with the bits of
// add(matmul(x, w), b) on the CPU in one fused forward and backward.
Var conv1d(const Var& x, const Var& w, const Var& b = Var(), GemmInputs in = GemmInputs::f32);
// cross_entropy(linear(x, w, b, in), targets, ignore_index) in one node, the LM heads' decoder and
// loss: the logits go through in chunks of rows and are never whole (their gradient and its
// products are computed in the forward, chunk by chunk), their rows padded on a GPU for aligned
// GEMMs, their gradient written once in the GEMMs' operand dtype. On the CPU: the two ops' bits.
// chunk: rows per chunk, a multiple of 512; 0 picks the most whose f32 logits fit 64 MiB.
Var linear_cross_entropy(const Var& x, const Var& w, const Var& b, const Tensor& targets,
                         int64_t ignore_index = -100, GemmInputs in = GemmInputs::f32, int64_t chunk = 0);

// ---- elementwise, broadcasting numpy-style ----
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var scale(const Var& x, double alpha);       // alpha * x
Var add_scalar(const Var& x, double alpha);  // x + alpha
Var exp(const Var& x);
Var log(const Var& x);
Var log1p(const Var& x);
Var softplus(const Var& x);  // log(1 + e^x), the map that keeps a learnable λ >= 0
Var gelu(const Var& x, bool tanh_approx = false);
// Inverted dropout: keeps each element with probability 1 - p (mask from Philox at `key`).
// Identity when p == 0 or !training.
Var dropout(const Var& x, double p, const RngKey& key, bool training = true);

// ---- shape (views where possible) ----
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int64_t d0, int64_t d1);
Var permute(const Var& x, const std::vector<int64_t>& order);
Var slice(const Var& x, int64_t dim, int64_t start, int64_t end);
std::vector<Var> split(const Var& x, int64_t dim, int64_t piece);
Var concat(const std::vector<Var>& xs, int64_t dim);
Var contiguous(const Var& x);
Var split_heads(const Var& x, int64_t nh);  // (B,T,C) -> (B,NH,T,HS)
Var merge_heads(const Var& x);              // (B,NH,T,HS) -> (B,T,C)

// ---- network layers ----
// weight: (V,C) ids: (...) i32 -> (..., C). Gradient rows are touched only for present ids.
Var embedding(const Var& weight, const Tensor& ids);
// Over the last dim: (x - mean) / sqrt(var + eps) * w + b.
Var layernorm(const Var& x, const Var& w, const Var& b, double eps);
// Over the last dim; mask: undefined or u8 broadcastable to x (1 = allowed). Masked entries and
// rows with no allowed entry give 0 and get no gradient.
Var softmax(const Var& x, const Tensor& mask = Tensor());
Var log_softmax(const Var& x, const Tensor& mask = Tensor());
// Mean over non-ignored rows of -log softmax(logits)[target]; logits: (..., V), targets: (...)
// i32. With no counted row the loss is 0 (and so is its gradient). Targets may be given on the
// host for logits on a GPU (a batch's labels): they are counted there and copied over, so
// neither the forward nor the backward waits for the GPU; targets already on the GPU are
// counted by a copy to the host (a wait).
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index = -100);
// Rotary position embedding (kernels.inc `rope`): x (..., T, HS), HS even; row t sits at position
// p = offset + t and its pair (2i, 2i+1) is rotated by p base^(-2i/HS). Backward: the inverse
// rotation.
Var rope(const Var& x, double base = 10000.0, int64_t offset = 0);

// ---- reductions ----
Var sum(const Var& x);                                     // all elements -> scalar
Var sum(const Var& x, int64_t dim, bool keepdim = false);  // along one dim
Var mean(const Var& x);
Var mean(const Var& x, int64_t dim, bool keepdim = false);

}  // namespace saobp
