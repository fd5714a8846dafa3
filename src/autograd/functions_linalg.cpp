// matmul and linear. With C = A B:  ∂L/∂A = ∂L/∂C Bᵀ,  ∂L/∂B = Aᵀ ∂L/∂C — each one GEMM that
// accumulates (beta = 1) straight into the input's gradient.
#include <cstdlib>
#include <string>

#include "autograd/grad_util.h"
#include "autograd/ops.h"

namespace saobp {

Var matmul(const Var& a, const Var& b) {
  if (a.dim() < 2 || b.dim() < 2)
    fail("matmul", "operands must have rank >= 2: {} and {}", a.data().str(), b.data().str());
  check_same_device(a.data(), b.data(), "matmul");
  const int64_t K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K) fail("matmul", "inner dims differ: {} @ {}", a.data().str(), b.data().str());
  Shape out_shape = a.shape();
  out_shape.back() = N;
  if (b.dim() == 2) {
    // Shared right operand (a weight): one tall GEMM over all rows of a.
    const Tensor A = a.data().contiguous().view({-1, K});
    bool tb;
    const Tensor Bm = gemm_operand(b.data(), tb);
    Tensor out = a.data().new_empty(out_shape);
    Tensor out2 = out.view({-1, N});
    kern::gemm(A, false, Bm, tb, out2, 1.0, 0.0);
    return make_result(out, "matmul", {a, b}, [A, Bm, tb, K, N](const Tensor& g, GradSlots& gin) {
      const Tensor g2 = g.contiguous().view({-1, N});
      bool fresh = false;  // first gradient: written with beta 0 instead of zeroed and added to
      if (gin.needs(0)) {
        Tensor ga = gin.slot(0, fresh).view({-1, K});
        kern::gemm(g2, false, Bm, !tb, ga, 1.0, fresh ? 0.0 : 1.0);  // g Bᵀ
      }
      if (gin.needs(1)) {
        Tensor& gb = gin.slot(1, fresh);
        kern::gemm(A, true, g2, false, gb, 1.0, fresh ? 0.0 : 1.0);  // Aᵀ g (summed over all rows)
      }
    });
  }
  if (a.dim() != b.dim() || !std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin()))
    fail("matmul", "batched operands need equal leading dims: {} @ {}", a.data().str(), b.data().str());
  bool ta, tb;
  const Tensor A = gemm_operand(a.data(), ta), Bm = gemm_operand(b.data(), tb);
  Tensor out = a.data().new_empty(out_shape);
  kern::gemm(A, ta, Bm, tb, out, 1.0, 0.0);
  return make_result(out, "matmul", {a, b}, [A, ta, Bm, tb](const Tensor& g, GradSlots& gin) {
    const Tensor gc = g.contiguous();
    bool fresh = false;
    // ga = g Bᵀ, written in a's logical layout (its grad buffer is contiguous).
    if (gin.needs(0)) {
      Tensor& ga = gin.slot(0, fresh);
      kern::gemm(gc, false, Bm, !tb, ga, 1.0, fresh ? 0.0 : 1.0);
    }
    // gb = Aᵀ g
    if (gin.needs(1)) {
      Tensor& gb = gin.slot(1, fresh);
      kern::gemm(A, !ta, gc, false, gb, 1.0, fresh ? 0.0 : 1.0);
    }
  });
}

namespace {

// y = x op(w) + b over the last dim of x: linear's w is (OUT, IN) (op = transpose, PyTorch's
// nn.Linear, the bias first in the sum: gemm_bias), conv1d's is (IN, OUT) (op = identity,
// Hugging Face's Conv1D, the bias added to the finished product: gemm_then_bias). The backward
// takes the weight's and the bias's gradients from one pass over the output gradient
// (gemm_rowsum / gemm_colsum).
//
// With bf16 GEMM inputs the forward rounds x and W to bf16 once and keeps those copies for the
// backward; the backward rounds the output gradient once for both of its products (the bias
// gradient is then the column sums of the rounded gradient, as the epilogue sums it).
Tensor gemm_operand_in(const Tensor& t, GemmInputs in) {
  return in == GemmInputs::bf16 ? t.to(DType::bf16) : t;
}

// The gradients of y = x op(W) + b from g2, the output gradient (N, OUT) in the GEMMs' operand
// dtype: gx += g2 op(W)ᵀ, gW += g2ᵀ X or Xᵀ g2, gb += Σ_rows g2, into the slots {x, w, b}. g2
// may be the first OUT columns of a wider buffer (linear_cross_entropy's padded rows); then the
// weight and bias gradients are a plain GEMM and a sum of their own, which the contiguous g2's
// one pass (gemm_rowsum / gemm_colsum) needs contiguous operands for.
void affine_backward(const Tensor& g2, const Tensor& X, const Tensor& W, bool in_out, GradSlots& gin) {
  const int64_t IN = X.size(1), OUT = g2.size(1);
  const bool tw = !in_out;  // W as gemm's b operand: op(W) = Wᵀ (linear) or W (conv1d)
  bool fresh = false;       // a gradient seen for the first time is written (beta 0), not zeroed and added to
  if (gin.needs(0)) {
    Tensor gx = gin.slot(0, fresh).view({-1, IN});
    kern::gemm(g2, false, W, !tw, gx, 1.0, fresh ? 0.0 : 1.0);  // gx += g op(W)ᵀ
  }
  // gb += Σ_rows g (with bf16 inputs: the rounded g, widened exactly, as the epilogue sums it)
  const auto bias_grad = [&](const Tensor& gb, bool acc) {
    Tensor row = gb.view({1, OUT});
    kern::reduce_sum_to(g2.dtype() == DType::bf16 ? g2.to(DType::f32) : g2.contiguous(), row, 1.0, acc);
  };
  // gW += gᵀ x (OUT, IN) or xᵀ g (IN, OUT); gb += Σ_rows g
  const auto weight_grad = [&](Tensor& gw, double beta, Tensor* gb, bool acc_b) {
    if (!g2.is_contiguous()) {
      if (in_out)
        kern::gemm(X, true, g2, false, gw, 1.0, beta);
      else
        kern::gemm(g2, true, X, false, gw, 1.0, beta);
      if (gb) bias_grad(*gb, acc_b);
    } else if (in_out && gb) {
      kern::gemm_colsum(X, true, g2, false, gw, beta, *gb, acc_b);
    } else if (in_out) {
      kern::gemm(X, true, g2, false, gw, 1.0, beta);
    } else if (gb) {
      kern::gemm_rowsum(g2, true, X, false, gw, beta, *gb, acc_b);
    } else {
      kern::gemm(g2, true, X, false, gw, 1.0, beta);
    }
  };
  if (gin.needs(1) && gin.needs(2)) {  // both from one pass over g
    Tensor gw = gin.slot(1, fresh);
    const bool fresh_w = fresh;
    Tensor gb = gin.slot(2, fresh);
    weight_grad(gw, fresh_w ? 0.0 : 1.0, &gb, !fresh);
    return;
  }
  if (gin.needs(1)) {
    Tensor& gw = gin.slot(1, fresh);
    weight_grad(gw, fresh ? 0.0 : 1.0, nullptr, false);
  }
  if (gin.needs(2)) {
    Tensor gb = gin.slot(2, fresh);
    bias_grad(gb, !fresh);
  }
}

// The checked operands of y = x op(w) + b: x as (N, IN) and w, each rounded to bf16 when `in` says.
struct AffineOperands {
  Tensor X, W;
  int64_t IN, OUT;
};
AffineOperands affine_operands(const Var& x, const Var& w, const Var& b, bool in_out, GemmInputs in,
                               const char* op) {
  if (w.dim() != 2) fail(op, "weight must be {}, got {}", in_out ? "(IN, OUT)" : "(OUT, IN)", w.data().str());
  const int64_t OUT = w.size(in_out ? 1 : 0), IN = w.size(in_out ? 0 : 1);
  if (x.size(-1) != IN)
    fail(op, "input {} does not match weight {} {}", x.data().str(), w.data().str(),
         in_out ? "(IN, OUT)" : "(OUT, IN)");
  if (b.defined()) check_shape(b.data(), {OUT}, op, "bias");
  check_same_device(x.data(), w.data(), op);
  if (in == GemmInputs::bf16 && x.data().dtype() != DType::f32)
    fail(op, "bf16 GEMM inputs need f32 tensors, got {}", x.data().str());
  return {gemm_operand_in(x.data().contiguous().view({-1, IN}), in),
          gemm_operand_in(w.data().contiguous(), in), IN, OUT};
}

Var affine(const Var& x, const Var& w, const Var& b, bool in_out, GemmInputs in, const char* op) {
  const AffineOperands ops = affine_operands(x, w, b, in_out, in, op);
  const Tensor X = ops.X, W = ops.W;
  const int64_t OUT = ops.OUT;
  const bool tw = !in_out;  // W as gemm's b operand: op(W) = Wᵀ (linear) or W (conv1d)
  Shape out_shape = x.shape();
  out_shape.back() = OUT;
  Tensor out = x.data().new_empty(out_shape);
  Tensor o2 = out.view({-1, OUT});
  if (!b.defined())
    kern::gemm(X, false, W, tw, o2, 1.0, 0.0);  // x op(W)
  else if (in_out)
    kern::gemm_then_bias(X, false, W, false, b.data().contiguous(), o2);  // (x W) + b
  else
    kern::gemm_bias(X, false, W, true, b.data().contiguous(), o2);  // b + x Wᵀ
  return make_result(out, op, {x, w, b}, [X, W, OUT, in_out, in](const Tensor& g, GradSlots& gin) {
    affine_backward(gemm_operand_in(g.contiguous().view({-1, OUT}), in), X, W, in_out, gin);
  });
}

}  // namespace

Var linear(const Var& x, const Var& w, const Var& b, GemmInputs in) {
  return affine(x, w, b, false, in, "linear");
}

Var conv1d(const Var& x, const Var& w, const Var& b, GemmInputs in) {
  return affine(x, w, b, true, in, "conv1d");
}

// cross_entropy(linear(x, w, b, in), targets, ignore_index) as one node: a language model's
// decoder and its loss, whose logits (N, V) are the step's largest tensor and never leave it.
//   - On a GPU their rows are padded to a multiple of kLogitsPad values: the logits are the first
//     V columns of an (N, Vp) buffer, and every GEMM reads or writes them with the leading
//     dimension Vp. A vocabulary of 50257 (GPT-2) or 30522 (BERT) puts all but every 8th row off
//     the 16-byte alignment cuBLAS's tensor-core kernels want (llm.c pads GPT-2's to 50304 for
//     it). The weight and the checkpoint keep V rows. SAOBP_PAD_LOGITS=0 turns the padding off.
//   - The backward writes the logits' gradient once, straight in the GEMMs' operand dtype: under
//     bf16 inputs each value is rounded once from its f32 value, which is what linear's backward
//     rounds (the f32 gradient and the cast pass between them are gone).
// On the CPU the rows are not padded and every kernel is the one the two ops call, so the node
// gives their bits.
namespace {
constexpr int64_t kLogitsPad = 64;
bool pad_logits(const Device& d) {
  static const bool off = [] {
    const char* v = std::getenv("SAOBP_PAD_LOGITS");
    return v && std::string(v) == "0";
  }();
  return !d.is_cpu() && !off;
}
}  // namespace

Var linear_cross_entropy(const Var& x, const Var& w, const Var& b, const Tensor& targets,
                         int64_t ignore_index, GemmInputs in) {
  const char* op = "linear_cross_entropy";
  const AffineOperands ops = affine_operands(x, w, b, false, in, op);
  const Tensor X = ops.X, W = ops.W;
  const int64_t OUT = ops.OUT, N = X.size(0);
  int64_t count = 0;
  const Tensor T = loss_targets(targets, N, ignore_index, X.device(), count, op);
  // The logits: the first OUT columns of (N, ld).
  const int64_t ld = pad_logits(X.device()) ? (OUT + kLogitsPad - 1) / kLogitsPad * kLogitsPad : OUT;
  const auto rows_of = [ld, OUT](const Tensor& buf) { return ld == OUT ? buf : buf.slice(1, 0, OUT); };
  Tensor L = rows_of(x.data().new_empty({N, ld}));
  if (!b.defined()) {
    kern::gemm(X, false, W, true, L, 1.0, 0.0);  // x Wᵀ
  } else if (L.is_contiguous()) {
    kern::gemm_bias(X, false, W, true, b.data().contiguous(), L);  // b + x Wᵀ
  } else {  // gemm_bias's definition: the bias in every row, then c += x Wᵀ
    kern::copy(b.data().contiguous().view({1, OUT}).expand({N, OUT}), L, false);
    kern::gemm(X, false, W, true, L, 1.0, 1.0);
  }
  Tensor losses = L.new_empty({N}), lse = L.new_empty({N}), total = L.new_empty({1});
  kern::cross_entropy_forward(L, T, ignore_index, losses, lse);
  kern::reduce_sum_to(losses.view({N}), total, count ? 1.0 / count : 0.0, false);
  return make_result(total.view(Shape{}), op, {x, w, b},
                     [X, W, L, T, lse, count, ignore_index, N, ld, rows_of](const Tensor& g, GradSlots& gin) {
                       if (count == 0) return;
                       const Tensor wr = mean_row_weights(g, count, N, L);  // every counted row: g / count
                       // The logits' gradient in W's dtype (f32, or bf16 rounded once), rows ld apart.
                       Tensor G = rows_of(Tensor::empty({N, ld}, W.dtype(), L.device()));
                       kern::cross_entropy_backward(L, T, lse, wr, ignore_index, G, false);
                       affine_backward(G, X, W, false, gin);
                     });
}

}  // namespace saobp
