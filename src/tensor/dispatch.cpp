// The one place where a tensor kernel call is checked and picks its backend (the attention
// kernels' is src/attention/dispatch.cpp): each saobp::kern function checks its arguments
// (shapes, dtypes, contiguity, one device for all) for both backends, then calls its saobp::cpu
// or saobp::cuda twin by the device of its output. The twins assume what is checked here.
#include "tensor/checks.h"

namespace saobp {

[[noreturn]] void no_cuda(const char* op) {
  fail(op, "built without CUDA (reconfigure with -DSAOBP_CUDA=ON)");
}

namespace {
// Contiguous, or a 2-D view whose rows are evenly apart (the first columns of a wider buffer).
void require_rows(const char* op, const Tensor& t, const char* name) {
  if (!t.is_contiguous() && !row_strided(t))
    fail(op, "{} must be contiguous or 2-D with rows evenly apart, got {}", name, t.str());
}
}  // namespace

namespace kern {

void fill(Tensor& out, double value) { SAOBP_ON_DEVICE(out, fill, out, value); }

void copy(const Tensor& src, Tensor& dst, bool accumulate) {
  require_same_device("copy", dst, {&src});
  check_shape(src, dst.shape(), "copy", "source");
  check_dtype(src, dst.dtype(), "copy", "source");
  if (accumulate && dst.dtype() == DType::bf16) fail("copy", "bf16 is copied, not added to: {}", dst.str());
  SAOBP_ON_DEVICE(dst, copy, src, dst, accumulate);
}

void cast(const Tensor& src, Tensor& dst) {
  require_same_device("cast", dst, {&src});
  if (src.numel() != dst.numel() || !src.is_contiguous() || !dst.is_contiguous())
    fail("cast", "cast from {} to {} needs contiguous tensors of equal size", src.str(), dst.str());
  if ((src.dtype() == DType::bf16) != (dst.dtype() == DType::bf16) &&
      (src.dtype() != DType::f32 && dst.dtype() != DType::f32))
    fail("cast", "bf16 converts to and from f32 only: cast from {} to {}", src.str(), dst.str());
  SAOBP_ON_DEVICE(dst, cast, src, dst);
}

void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  require_contiguous("fill_random", out, "output");
  SAOBP_ON_DEVICE(out, fill_random, out, kind, a, b, key);
}

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  require_same_device("gemm", c, {&a, &b});
  check_gemm(a, ta, b, tb, c, true);
  SAOBP_ON_DEVICE(c, gemm, a, ta, b, tb, c, alpha, beta);
}

void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  require_same_device("gemm_bias", c, {&a, &b, &bias});
  check_gemm_bias(a, ta, b, tb, bias, c);
  SAOBP_ON_DEVICE(c, gemm_bias, a, ta, b, tb, bias, c);
}

void gemm_then_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  require_same_device("gemm_then_bias", c, {&a, &b, &bias});
  check_gemm_bias(a, ta, b, tb, bias, c, "gemm_then_bias");
  SAOBP_ON_DEVICE(c, gemm_then_bias, a, ta, b, tb, bias, c);
}

void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  require_same_device("gemm_rowsum", c, {&a, &b, &sums});
  check_gemm_rowsum(a, ta, b, tb, c, sums);
  SAOBP_ON_DEVICE(c, gemm_rowsum, a, ta, b, tb, c, beta, sums, accumulate);
}

void gemm_colsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  require_same_device("gemm_colsum", c, {&a, &b, &sums});
  check_gemm_colsum(a, ta, b, tb, c, sums);
  SAOBP_ON_DEVICE(c, gemm_colsum, a, ta, b, tb, c, beta, sums, accumulate);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  require_same_device("binary", out, {&a, &b});
  check_dtype(a, out.dtype(), "binary", "a");
  check_dtype(b, out.dtype(), "binary", "b");
  SAOBP_ON_DEVICE(out, binary, op, a, b, out);
}

void reduce_sum_to(const Tensor& src, Tensor& dst, double alpha, bool accumulate) {
  const char* op = "reduce_sum_to";
  require_same_device(op, dst, {&src});
  if (src.dim() != dst.dim()) fail(op, "rank differs: {} to {}", src.str(), dst.str());
  for (int64_t d = 0; d < src.dim(); ++d)
    if (dst.size(d) != 1 && dst.size(d) != src.size(d))
      fail(op, "cannot reduce {} to {}", src.str(), dst.str());
  check_dtype(src, dst.dtype(), op, "src");
  require_contiguous(op, dst, "dst");
  SAOBP_ON_DEVICE(dst, reduce_sum_to, src, dst, alpha, accumulate);
}

void axpby(const Tensor& x, double alpha, Tensor& y, double beta) {
  require_same_device("axpby", y, {&x});
  if (x.numel() != y.numel()) fail("axpby", "sizes differ: {} and {}", x.str(), y.str());
  check_dtype(x, y.dtype(), "axpby", "x");
  require_contiguous("axpby", {{x, "x"}, {y, "y"}});
  SAOBP_ON_DEVICE(y, axpby, x, alpha, y, beta);
}

void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  require_same_device("gelu", y, {&x});
  check_shape(y, x.shape(), "gelu", "output");
  require_contiguous("gelu", {{x, "x"}, {y, "output"}});
  SAOBP_ON_DEVICE(y, gelu_forward, x, y, tanh_approx);
}

void gelu_backward(const Tensor& x, const Tensor& gy, Tensor& gx, bool tanh_approx, bool accumulate) {
  const char* op = "gelu_backward";
  require_same_device(op, gx, {&x, &gy});
  check_shape(gy, x.shape(), op, "gy");
  check_shape(gx, x.shape(), op, "gx");
  require_contiguous(op, {{x, "x"}, {gy, "gy"}, {gx, "gx"}});
  SAOBP_ON_DEVICE(gx, gelu_backward, x, gy, gx, tanh_approx, accumulate);
}

namespace {
// Rows of a (N,C) tensor: C = its last dim, N = the rest.
int64_t row_count(const Tensor& x) { return x.numel() / std::max<int64_t>(x.size(-1), 1); }
}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  const char* op = "layernorm";
  require_same_device(op, y, {&x, &w, &b, &mean, &rstd});
  const int64_t C = x.size(-1), N = row_count(x);
  check_shape(w, {C}, op, "weight");
  check_shape(b, {C}, op, "bias");
  check_shape(y, x.shape(), op, "output");
  if (mean.numel() != N || rstd.numel() != N) fail(op, "mean/rstd must hold {} rows", N);
  require_contiguous(op, {{x, "x"}, {y, "output"}, {mean, "mean"}, {rstd, "rstd"}});
  SAOBP_ON_DEVICE(y, layernorm_forward, x, w, b, eps, y, mean, rstd);
}

void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& gy, Tensor& gx, Tensor& gw, Tensor& gb) {
  const char* op = "layernorm_backward";
  require_same_device(op, gy, {&x, &w, &mean, &rstd, &gx, &gw, &gb});
  const int64_t C = x.size(-1), N = row_count(x);
  check_shape(gy, x.shape(), op, "gy");
  check_shape(w, {C}, op, "weight");
  if (mean.numel() != N || rstd.numel() != N) fail(op, "mean/rstd must hold {} rows", N);
  if (gx.defined()) check_shape(gx, x.shape(), op, "gx");
  if (gw.defined()) check_shape(gw, {C}, op, "gw");
  if (gb.defined()) check_shape(gb, {C}, op, "gb");
  require_contiguous(op, {{x, "x"}, {gy, "gy"}, {mean, "mean"}, {rstd, "rstd"}, {gx, "gx"}});
  SAOBP_ON_DEVICE(gy, layernorm_backward, x, w, mean, rstd, gy, gx, gw, gb);
}

void softmax_forward(const Tensor& x, const Tensor& mask, Tensor& y, bool log) {
  require_same_device("softmax", y, {&x, &mask});
  check_shape(y, x.shape(), "softmax", "output");
  require_contiguous("softmax", {{x, "x"}, {y, "output"}});
  if (mask.defined()) check_dtype(mask, DType::u8, "softmax", "mask");
  SAOBP_ON_DEVICE(y, softmax_forward, x, mask, y, log);
}

void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, Tensor& gx, bool log) {
  const char* op = "softmax_backward";
  require_same_device(op, gx, {&y, &gy, &mask});
  check_shape(gy, y.shape(), op, "gy");
  check_shape(gx, y.shape(), op, "gx");
  require_contiguous(op, {{y, "y"}, {gy, "gy"}, {gx, "gx"}});
  if (mask.defined()) check_dtype(mask, DType::u8, op, "mask");
  SAOBP_ON_DEVICE(gx, softmax_backward, y, gy, mask, gx, log);
}

namespace {
// An embedding table (V,C) and its rows (N,C), N = ids.numel(): one device, contiguous, every id
// in [0,V).
void check_embedding(const char* op, const Tensor& table, const char* table_name, const Tensor& ids,
                     const Tensor& rows, const char* rows_name) {
  require_same_device(op, table, {&ids, &rows});
  if (table.dim() != 2) fail(op, "{} must be (V,C), got {}", table_name, table.str());
  check_shape(rows, {ids.numel(), table.size(1)}, op, rows_name);
  require_contiguous(op, {{table, table_name}, {rows, rows_name}});
  check_indices(ids, table.size(0), kNoIgnore, op, "id");
}
}  // namespace

void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  check_embedding("embedding", weight, "weight", ids, out, "output");
  SAOBP_ON_DEVICE(out, embedding_forward, weight, ids, out);
}

void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  check_embedding("embedding_backward", gweight, "gweight", ids, gout, "gout");
  SAOBP_ON_DEVICE(gweight, embedding_backward, ids, gout, gweight);
}

void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  const char* op = "dropout";
  require_same_device(op, y, {&x, &mask});
  if (!(p >= 0.0 && p < 1.0)) fail(op, "probability {} must be in [0, 1)", p);
  check_shape(y, x.shape(), op, "output");
  check_shape(mask, x.shape(), op, "mask");
  check_dtype(mask, DType::u8, op, "mask");
  require_contiguous(op, {{x, "x"}, {y, "output"}, {mask, "mask"}});
  SAOBP_ON_DEVICE(y, dropout_forward, x, p, key, y, mask);
}

void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx, bool accumulate) {
  const char* op = "dropout_backward";
  require_same_device(op, gx, {&gy, &mask});
  check_shape(mask, gy.shape(), op, "mask");
  check_shape(gx, gy.shape(), op, "gx");
  require_contiguous(op, {{gy, "gy"}, {mask, "mask"}, {gx, "gx"}});
  SAOBP_ON_DEVICE(gx, dropout_backward, gy, mask, p, gx, accumulate);
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  const char* op = "cross_entropy";
  require_same_device(op, losses, {&logits, &targets, &lse});
  const int64_t V = logits.size(-1), N = row_count(logits);
  if (targets.numel() != N) fail(op, "{} targets for {} rows of logits {}", targets.numel(), N, logits.str());
  if (losses.numel() != N || lse.numel() != N) fail(op, "losses/lse must hold {} rows", N);
  require_rows(op, logits, "logits");
  require_contiguous(op, {{losses, "losses"}, {lse, "lse"}});
  check_indices(targets, V, ignore_index, op, "target");
  SAOBP_ON_DEVICE(losses, cross_entropy_forward, logits, targets, ignore_index, losses, lse);
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  const char* op = "cross_entropy_backward";
  require_same_device(op, glogits, {&logits, &targets, &lse, &gloss});
  const int64_t N = row_count(logits);
  check_shape(glogits, logits.shape(), op, "glogits");
  if (targets.numel() != N || lse.numel() != N || gloss.numel() != N)
    fail(op, "targets/lse/gloss must hold {} rows", N);
  check_dtype(targets, DType::i32, op, "target");
  // glogits of the logits' dtype, or bf16 (written, rounded) from f32 logits: the next GEMM's operand.
  if (glogits.dtype() == DType::bf16) {
    check_dtype(logits, DType::f32, op, "logits (bf16 glogits)");
    if (accumulate) fail(op, "bf16 glogits are written, not accumulated: {}", glogits.str());
  } else {
    check_dtype(glogits, logits.dtype(), op, "glogits");
  }
  require_rows(op, logits, "logits");
  require_rows(op, glogits, "glogits");
  require_contiguous(op, {{targets, "targets"}, {lse, "lse"}, {gloss, "gloss"}});
  SAOBP_ON_DEVICE(glogits, cross_entropy_backward, logits, targets, lse, gloss, ignore_index, glogits,
                  accumulate);
}

void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  require_same_device("adamw", p, {&g, &m, &v});
  for (const Tensor* t : {&g, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)}) {
    check_shape(*t, p.shape(), "adamw", "gradient and moments");
    check_dtype(*t, p.dtype(), "adamw", "gradient and moments");
  }
  require_contiguous("adamw", {{p, "parameter"}, {g, "gradient"}, {m, "m"}, {v, "v"}});
  SAOBP_ON_DEVICE(p, adamw_step, p, g, m, v, h);
}

void multi_sum_squares(const std::vector<Tensor>& xs, Tensor& sums) {
  const char* op = "multi_sum_squares";
  if (xs.empty()) fail(op, "no tensors");
  check_dtype(sums, DType::f64, op, "sums");
  check_shape(sums, {static_cast<int64_t>(xs.size())}, op, "sums");
  require_contiguous(op, sums, "sums");
  for (const Tensor& x : xs) {
    require_same_device(op, sums, {&x});
    check_dtype(x, xs.front().dtype(), op, "tensor");
    require_contiguous(op, x, "tensor");
  }
  if (xs.front().dtype() != DType::f32 && xs.front().dtype() != DType::f64)
    fail(op, "tensors must be f32 or f64, got {}", dtype_name(xs.front().dtype()));
  SAOBP_ON_DEVICE(sums, multi_sum_squares, xs, sums);
}

void multi_adamw_step(std::vector<Tensor>& p, std::vector<Tensor>& g, std::vector<Tensor>& m,
                      std::vector<Tensor>& v, const std::vector<AdamWParams>& h, double grad_scale) {
  const char* op = "multi_adamw";
  if (p.empty()) return;
  if (g.size() != p.size() || m.size() != p.size() || v.size() != p.size() || h.size() != p.size())
    fail(op, "{} parameters, {} gradients, {} and {} moments, {} hyperparameter sets", p.size(), g.size(),
         m.size(), v.size(), h.size());
  for (size_t i = 0; i < p.size(); ++i) {
    require_same_device(op, p.front(), {&p[i], &g[i], &m[i], &v[i]});
    for (const Tensor* t : {static_cast<const Tensor*>(&g[i]), static_cast<const Tensor*>(&m[i]),
                            static_cast<const Tensor*>(&v[i])}) {
      check_shape(*t, p[i].shape(), op, "gradient and moments");
      check_dtype(*t, p[i].dtype(), op, "gradient and moments");
    }
    check_dtype(p[i], p.front().dtype(), op, "parameter");
    require_contiguous(op, {{p[i], "parameter"}, {g[i], "gradient"}, {m[i], "m"}, {v[i], "v"}});
  }
  SAOBP_ON_DEVICE(p.front(), multi_adamw_step, p, g, m, v, h, grad_scale);
}

void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  require_same_device("unary", y, {&x});
  check_shape(y, x.shape(), "unary", "output");
  require_contiguous("unary", {{x, "x"}, {y, "output"}});
  SAOBP_ON_DEVICE(y, unary, op, x, y);
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  const char* name = "unary_backward";
  require_same_device(name, gx, {&x, &y, &gy});
  check_shape(gy, x.shape(), name, "gy");
  check_shape(gx, x.shape(), name, "gx");
  check_shape(y, x.shape(), name, "y");
  require_contiguous(name, {{x, "x"}, {y, "y"}, {gy, "gy"}, {gx, "gx"}});
  SAOBP_ON_DEVICE(gx, unary_backward, op, x, y, gy, gx);
}

void rope(const Tensor& x, double base, bool inverse, Tensor& y, int64_t offset) {
  require_same_device("rope", y, {&x});
  check_rope(x, base, y, offset);
  SAOBP_ON_DEVICE(y, rope, x, base, inverse, y, offset);
}

void entropy_reg_penalty_forward(const Tensor& q, const Tensor& k, const Tensor& key_mask, bool causal,
                                 const Tensor& theta, double gamma, Tensor& penalty, Tensor& delta,
                                 Tensor& active) {
  const char* op = "entropy_reg_penalty";
  check_entropy_reg(op, q, k, key_mask);
  require_same_device(op, q, {&theta, &penalty, &delta, &active});
  if (theta.dtype() != q.dtype())
    fail(op, "q, k and theta must share a dtype, got {}, {}, {}", q.str(), k.str(), theta.str());
  check_shape(theta, {q.size(1)}, op, "theta");
  if (!(gamma >= 0)) fail(op, "gamma must be >= 0, got {}", gamma);
  check_shape(penalty, {}, op, "penalty");
  check_dtype(penalty, q.dtype(), op, "penalty");
  for (const Tensor* t : {&delta, &active}) {
    check_shape(*t, {q.size(1)}, op, "delta and active");
    check_dtype(*t, DType::f64, op, "delta and active");
  }
  require_contiguous(op, {{theta, "theta"}, {delta, "delta"}, {active, "active"}});
  SAOBP_ON_DEVICE(q, entropy_reg_penalty_forward, q, k, key_mask, causal, theta, gamma, penalty, delta,
                  active);
}

void entropy_reg_penalty_backward(const Tensor& q, const Tensor& k, const Tensor& key_mask, bool causal,
                                  const Tensor& delta, const Tensor& active, const Tensor& gpenalty,
                                  Tensor& gq, Tensor& gk, Tensor& gtheta) {
  const char* op = "entropy_reg_penalty_backward";
  check_entropy_reg(op, q, k, key_mask);
  require_same_device(op, q, {&delta, &active, &gpenalty, &gq, &gk, &gtheta});
  for (const Tensor* t : {&delta, &active}) {
    check_shape(*t, {q.size(1)}, op, "delta and active");
    check_dtype(*t, DType::f64, op, "delta and active");
  }
  check_shape(gpenalty, {}, op, "gpenalty");
  check_dtype(gpenalty, q.dtype(), op, "gpenalty");
  if (gq.defined() != gk.defined()) fail(op, "gq and gk must both be given or both be skipped");
  for (const Tensor* g : {&gq, &gk})
    if (g->defined()) {
      check_shape(*g, q.shape(), op, "gq and gk");
      check_dtype(*g, q.dtype(), op, "gq and gk");
    }
  if (gtheta.defined()) {
    check_shape(gtheta, {q.size(1)}, op, "gtheta");
    check_dtype(gtheta, q.dtype(), op, "gtheta");
  }
  require_contiguous(op, {{delta, "delta"}, {active, "active"}, {gq, "gq"}, {gk, "gk"}, {gtheta, "gtheta"}});
  SAOBP_ON_DEVICE(q, entropy_reg_penalty_backward, q, k, key_mask, causal, delta, active, gpenalty, gq, gk,
                  gtheta);
}

void qk_eigen_variance_forward(const Tensor& wq, const Tensor& wk, int64_t heads, Tensor& var,
                               Tensor& trace) {
  const char* op = "qk_eigen_variance";
  check_qk_eigen(op, wq, wk, heads);
  require_same_device(op, wq, {&var, &trace});
  check_shape(var, {heads}, op, "var");
  check_dtype(var, wq.dtype(), op, "var");
  check_shape(trace, {heads}, op, "trace");
  check_dtype(trace, DType::f64, op, "trace");
  require_contiguous(op, {{var, "var"}, {trace, "trace"}});
  SAOBP_ON_DEVICE(wq, qk_eigen_variance_forward, wq, wk, heads, var, trace);
}

void qk_eigen_variance_backward(const Tensor& wq, const Tensor& wk, const Tensor& trace, const Tensor& gvar,
                                Tensor& gwq, Tensor& gwk) {
  const char* op = "qk_eigen_variance_backward";
  require_same_device(op, wq, {&trace, &gvar, &gwq, &gwk});
  check_qk_eigen(op, wq, wk, trace.numel());
  check_shape(trace, {trace.numel()}, op, "trace");
  check_dtype(trace, DType::f64, op, "trace");
  check_shape(gvar, trace.shape(), op, "gvar");
  check_dtype(gvar, wq.dtype(), op, "gvar");
  for (const Tensor* g : {&gwq, &gwk}) {
    check_shape(*g, wq.shape(), op, "gwq and gwk");
    check_dtype(*g, wq.dtype(), op, "gwq and gwk");
  }
  require_contiguous(op, {{trace, "trace"}, {gvar, "gvar"}, {gwq, "gwq"}, {gwk, "gwk"}});
  SAOBP_ON_DEVICE(wq, qk_eigen_variance_backward, wq, wk, trace, gvar, gwq, gwk);
}

}  // namespace kern

}  // namespace saobp
