// The one place where a tensor kernel call picks its backend (the attention kernels' is
// src/attention/dispatch.cpp): each saobp::kern function calls its saobp::cpu or saobp::cuda
// twin by the device of its output.
#include "tensor/backend.h"

namespace saobp::kern {

void fill(Tensor& out, double value) { SAOBP_ON_DEVICE(out, fill(out, value)); }
void copy(const Tensor& src, Tensor& dst, bool accumulate) {
  SAOBP_ON_DEVICE(dst, copy(src, dst, accumulate));
}
void cast(const Tensor& src, Tensor& dst) { SAOBP_ON_DEVICE(dst, cast(src, dst)); }
void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  SAOBP_ON_DEVICE(out, fill_random(out, kind, a, b, key));
}
void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  SAOBP_ON_DEVICE(c, gemm(a, ta, b, tb, c, alpha, beta));
}
void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  SAOBP_ON_DEVICE(c, gemm_bias(a, ta, b, tb, bias, c));
}
void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  SAOBP_ON_DEVICE(c, gemm_rowsum(a, ta, b, tb, c, beta, sums, accumulate));
}
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  SAOBP_ON_DEVICE(out, binary(op, a, b, out));
}
void reduce_sum_to(const Tensor& src, Tensor& dst, double alpha, bool accumulate) {
  SAOBP_ON_DEVICE(dst, reduce_sum_to(src, dst, alpha, accumulate));
}
void axpby(const Tensor& x, double alpha, Tensor& y, double beta) {
  SAOBP_ON_DEVICE(y, axpby(x, alpha, y, beta));
}
void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  SAOBP_ON_DEVICE(y, gelu_forward(x, y, tanh_approx));
}
void gelu_backward(const Tensor& x, const Tensor& gy, Tensor& gx, bool tanh_approx, bool accumulate) {
  SAOBP_ON_DEVICE(gx, gelu_backward(x, gy, gx, tanh_approx, accumulate));
}
void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  SAOBP_ON_DEVICE(y, layernorm_forward(x, w, b, eps, y, mean, rstd));
}
void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& gy, Tensor& gx, Tensor& gw, Tensor& gb) {
  SAOBP_ON_DEVICE(gy, layernorm_backward(x, w, mean, rstd, gy, gx, gw, gb));
}
void softmax_forward(const Tensor& x, const Tensor& mask, Tensor& y, bool log) {
  SAOBP_ON_DEVICE(y, softmax_forward(x, mask, y, log));
}
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, Tensor& gx, bool log) {
  SAOBP_ON_DEVICE(gx, softmax_backward(y, gy, mask, gx, log));
}
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  SAOBP_ON_DEVICE(out, embedding_forward(weight, ids, out));
}
void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  SAOBP_ON_DEVICE(gweight, embedding_backward(ids, gout, gweight));
}
void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  SAOBP_ON_DEVICE(y, dropout_forward(x, p, key, y, mask));
}
void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx, bool accumulate) {
  SAOBP_ON_DEVICE(gx, dropout_backward(gy, mask, p, gx, accumulate));
}
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  SAOBP_ON_DEVICE(losses, cross_entropy_forward(logits, targets, ignore_index, losses, lse));
}
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  SAOBP_ON_DEVICE(glogits,
                  cross_entropy_backward(logits, targets, lse, gloss, ignore_index, glogits, accumulate));
}
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  SAOBP_ON_DEVICE(p, adamw_step(p, g, m, v, h));
}
void unary(UnaryOp op, const Tensor& x, Tensor& y) { SAOBP_ON_DEVICE(y, unary(op, x, y)); }
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  SAOBP_ON_DEVICE(gx, unary_backward(op, x, y, gy, gx));
}
void rope(const Tensor& x, double base, bool inverse, Tensor& y) {
  SAOBP_ON_DEVICE(y, rope(x, base, inverse, y));
}

}  // namespace saobp::kern
