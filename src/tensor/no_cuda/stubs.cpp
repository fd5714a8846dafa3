// CPU-only build: the CUDA backend's entry points, each throwing "[op] built without CUDA".
#include "tensor/backend.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace saobp::cuda {

[[noreturn]] void no_cuda(const char* op) {
  fail(op, "built without CUDA (reconfigure with -DSAOBP_CUDA=ON)");
}

void fill(Tensor& out, double value) { no_cuda("fill"); }
void copy(const Tensor& src, Tensor& dst, bool accumulate) { no_cuda("copy"); }
void cast(const Tensor& src, Tensor& dst) { no_cuda("cast"); }
void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  no_cuda("fill_random");
}
void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double alpha, double beta) {
  no_cuda("gemm");
}
void gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, Tensor& c) {
  no_cuda("gemm_bias");
}
void gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, double beta, Tensor& sums,
                 bool accumulate) {
  no_cuda("gemm_rowsum");
}
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) { no_cuda("binary"); }
void reduce_sum_to(const Tensor& src, Tensor& dst, double alpha, bool accumulate) {
  no_cuda("reduce_sum_to");
}
void axpby(const Tensor& x, double alpha, Tensor& y, double beta) { no_cuda("axpby"); }
void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) { no_cuda("gelu_forward"); }
void gelu_backward(const Tensor& x, const Tensor& gy, Tensor& gx, bool tanh_approx, bool accumulate) {
  no_cuda("gelu_backward");
}
void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  no_cuda("layernorm_forward");
}
void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& gy, Tensor& gx, Tensor& gw, Tensor& gb) {
  no_cuda("layernorm_backward");
}
void softmax_forward(const Tensor& x, const Tensor& mask, Tensor& y, bool log) { no_cuda("softmax_forward"); }
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, Tensor& gx, bool log) {
  no_cuda("softmax_backward");
}
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) { no_cuda("embedding_forward"); }
void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  no_cuda("embedding_backward");
}
void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  no_cuda("dropout_forward");
}
void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx, bool accumulate) {
  no_cuda("dropout_backward");
}
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& losses,
                           Tensor& lse) {
  no_cuda("cross_entropy_forward");
}
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& gloss, int64_t ignore_index, Tensor& glogits, bool accumulate) {
  no_cuda("cross_entropy_backward");
}
void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWParams& h) {
  no_cuda("adamw_step");
}
void unary(UnaryOp op, const Tensor& x, Tensor& y) { no_cuda("unary"); }
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  no_cuda("unary_backward");
}
void rope(const Tensor& x, double base, bool inverse, Tensor& y) { no_cuda("rope"); }

bool available() { return false; }
bool built() { return false; }
std::string device_name(int) { fail("cuda", "built without CUDA"); }
void* allocate(size_t, int) { fail("cuda.allocate", "built without CUDA"); }
void deallocate(void*, size_t, int) {}
void memcpy_to_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_to_host(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void synchronize(int) {}

}  // namespace saobp::cuda
