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
// dtype, contiguous: gx += g2 op(W)ᵀ, gW += g2ᵀ X or Xᵀ g2, gb += Σ_rows g2, into the slots
// {x, w, b}; the weight's and the bias's from one pass over g2 (gemm_rowsum / gemm_colsum).
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
    kern::reduce_sum_to(g2.dtype() == DType::bf16 ? g2.to(DType::f32) : g2, row, 1.0, acc);
  };
  // gW += gᵀ x (OUT, IN) or xᵀ g (IN, OUT); gb += Σ_rows g
  const auto weight_grad = [&](Tensor& gw, double beta, Tensor* gb, bool acc_b) {
    if (in_out && gb) {
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
// decoder and its loss, whose logits (N, V) would be the step's largest tensor (3.3 GB in f32 for
// GPT2-Medium's 16384 rows a step) and are never whole.
//   - The rows go through in chunks: for each, the logits, the losses and log-sum-exps, and, when
//     gradients are wanted, the logits' gradient for an incoming gradient of 1 (the mean's row
//     weights 1/count) and at once its products: rows of ∂x = G op(W)ᵀ, ∂W += Gᵀ X, ∂b += Σ G.
//     Only one chunk's logits and gradient are ever held; the node keeps ∂x, ∂W and ∂b, (N, IN)
//     + (V, IN) + (V) against (N, V), and its backward scales them by the incoming gradient
//     (exact when that is a power of two: the trainer's 1 / grad_accum) and hands them over as
//     its inputs' gradients. The GEMMs are those the backward would run, moved into the forward:
//     no product is added (the Liger kernel's fused linear cross-entropy does the same).
//   - A chunk is the most rows, a multiple of 512 (kChunkUnit), whose f32 logits fit kChunkBytes,
//     at least 512, or all of them: 512 for GPT-2's and BERT's vocabularies (103 and 63 MB of
//     logits, with GEMMs of 512 × 50304 × C still large enough to fill a GPU). The CPU's
//     products sum their depth in blocks of 256 rows into the output (sgemm.cpp), so ∂W
//     accumulated chunk by chunk has the bits of one product over all the rows.
//   - On a GPU the logits' rows are padded to a multiple of kLogitsPad values: the logits are the
//     first V columns of an (n, Vp) buffer, and every GEMM reads or writes them with the leading
//     dimension Vp. A vocabulary of 50257 (GPT-2) or 30522 (BERT) puts all but every 8th row off
//     the 16-byte alignment cuBLAS's tensor-core kernels want (llm.c pads GPT-2's to 50304 for
//     it). The weight and the checkpoint keep V rows. SAOBP_PAD_LOGITS=0 turns the padding off.
//   - The logits' gradient is written once, in the GEMMs' operand dtype: under bf16 inputs each
//     value is rounded once from its f32 value, which is what linear's backward rounds.
// On the CPU the rows are not padded and every kernel is the one the two ops call, so with an
// incoming gradient of 1 the node gives their bits; the bias gradient over several chunks (a
// BERT batch of more than 512 masked tokens) adds each chunk's rounded sum, a rounding apart.
namespace {
constexpr int64_t kLogitsPad = 64;
constexpr int64_t kChunkUnit = 512;
constexpr double kChunkBytes = 64.0 * (1 << 20);
bool pad_logits(const Device& d) {
  static const bool off = [] {
    const char* v = std::getenv("SAOBP_PAD_LOGITS");
    return v && std::string(v) == "0";
  }();
  return !d.is_cpu() && !off;
}

// The rows of one chunk of N rows whose logits are ld wide.
int64_t chunk_rows(int64_t N, int64_t ld, int64_t asked) {
  const int64_t fit = static_cast<int64_t>(kChunkBytes / (4.0 * static_cast<double>(ld))) / kChunkUnit;
  return std::min(N, asked > 0 ? asked : std::max<int64_t>(1, fit) * kChunkUnit);
}

// t · g for the node's gradients: t itself when g is 1 on the CPU; on a GPU the product with
// the device scalar g (reading g on the host would wait for the GPU).
Tensor scaled_by(const Tensor& t, const Tensor& g) {
  if (g.device().is_cpu() && g.item() == 1.0) return t;
  Tensor out = t.new_empty(t.shape());
  Shape ones(static_cast<size_t>(t.dim()), 1);
  kern::binary(BinaryOp::mul, t, g.contiguous().view(ones).expand(t.shape()), out);
  return out;
}
}  // namespace

Var linear_cross_entropy(const Var& x, const Var& w, const Var& b, const Tensor& targets,
                         int64_t ignore_index, GemmInputs in, int64_t chunk) {
  const char* op = "linear_cross_entropy";
  if (chunk < 0 || chunk % kChunkUnit != 0)
    fail(op, "chunk rows must be 0 (automatic) or a multiple of {}, got {}", kChunkUnit, chunk);
  const AffineOperands ops = affine_operands(x, w, b, false, in, op);
  const Tensor X = ops.X, W = ops.W;
  const int64_t IN = ops.IN, OUT = ops.OUT, N = X.size(0);
  int64_t count = 0;
  const Tensor T = loss_targets(targets, N, ignore_index, X.device(), count, op);
  // The logits of a chunk: the first OUT columns of (rows, ld).
  const int64_t ld = pad_logits(X.device()) ? (OUT + kLogitsPad - 1) / kLogitsPad * kLogitsPad : OUT;
  const int64_t R = chunk_rows(N, ld, chunk);
  const auto rows_of = [ld, OUT](const Tensor& buf) { return ld == OUT ? buf : buf.slice(1, 0, OUT); };
  const bool grads = grad_enabled() && count > 0;
  const bool gx_on = grads && x.requires_grad(), gw_on = grads && w.requires_grad(),
             gb_on = grads && b.defined() && b.requires_grad();
  const bool any = gx_on || gw_on || gb_on;
  Tensor losses = x.data().new_empty({N}), lse = x.data().new_empty({N}), total = x.data().new_empty({1});
  Tensor gx = gx_on ? x.data().new_empty({N, IN}) : Tensor(),
         gw = gw_on ? w.data().new_empty({OUT, IN}) : Tensor(),
         gb = gb_on ? b.data().new_empty({1, OUT}) : Tensor();
  Tensor lbuf = x.data().new_empty({std::max<int64_t>(R, 1), ld}), gbuf, wr;
  if (any) {
    gbuf = Tensor::empty({std::max<int64_t>(R, 1), ld}, W.dtype(), X.device());
    wr = Tensor::full({N}, 1.0 / static_cast<double>(count), lbuf.dtype(),
                      X.device());  // Σ over counted rows / count
  }
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int64_t r1 = std::min(N, r0 + R);
    const Tensor Xc = X.slice(0, r0, r1), Tc = T.slice(0, r0, r1);
    Tensor L = rows_of(lbuf.slice(0, 0, r1 - r0));
    if (!b.defined()) {
      kern::gemm(Xc, false, W, true, L, 1.0, 0.0);  // x Wᵀ
    } else if (L.is_contiguous()) {
      kern::gemm_bias(Xc, false, W, true, b.data().contiguous(), L);  // b + x Wᵀ
    } else {  // gemm_bias's definition: the bias in every row, then c += x Wᵀ
      kern::copy(b.data().contiguous().view({1, OUT}).expand({r1 - r0, OUT}), L, false);
      kern::gemm(Xc, false, W, true, L, 1.0, 1.0);
    }
    Tensor lc = losses.slice(0, r0, r1), sc = lse.slice(0, r0, r1);
    kern::cross_entropy_forward(L, Tc, ignore_index, lc, sc);
    if (!any) continue;
    Tensor G = rows_of(gbuf.slice(0, 0, r1 - r0));
    kern::cross_entropy_backward(L, Tc, sc, wr.slice(0, r0, r1), ignore_index, G, false);
    if (gx_on) {
      Tensor gxc = gx.slice(0, r0, r1);
      kern::gemm(G, false, W, false, gxc, 1.0, 0.0);  // ∂x = G W
    }
    if (gw_on) kern::gemm(G, true, Xc, false, gw, 1.0, r0 == 0 ? 0.0 : 1.0);  // ∂W += Gᵀ x
    if (gb_on)  // ∂b += Σ_rows G (under bf16 inputs the rounded G, widened exactly)
      kern::reduce_sum_to(G.dtype() == DType::bf16 ? G.to(DType::f32) : G.contiguous(), gb, 1.0, r0 > 0);
  }
  kern::reduce_sum_to(losses.view({N}), total, count ? 1.0 / count : 0.0, false);
  const Shape x_shape = x.shape();
  return make_result(total.view(Shape{}), op, {x, w, b},
                     [gx, gw, gb, x_shape, OUT](const Tensor& g, GradSlots& gin) {
                       if (gx.defined() && gin.needs(0)) gin.take(0, scaled_by(gx, g).view(x_shape));
                       if (gw.defined() && gin.needs(1)) gin.take(1, scaled_by(gw, g));
                       if (gb.defined() && gin.needs(2)) gin.take(2, scaled_by(gb, g).view({OUT}));
                     });
}

}  // namespace saobp
