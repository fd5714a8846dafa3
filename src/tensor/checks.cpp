#include "tensor/checks.h"

namespace saobp {

namespace {
int64_t leading(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }
}  // namespace

void require_contiguous(const char* op, const Tensor& t, const char* what) {
  if (t.defined() && !t.is_contiguous()) fail(op, "{} must be contiguous, got {}", what, t.str());
}

GemmDims check_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c) {
  if (a.dim() < 2 || b.dim() < 2 || c.dim() < 2)
    fail("gemm", "operands must have rank >= 2: {} {} {}", a.str(), b.str(), c.str());
  if (!a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous())
    fail("gemm", "operands must be contiguous: {} {} {}", a.str(), b.str(), c.str());
  check_dtype(a, c.dtype(), "gemm", "a");
  check_dtype(b, c.dtype(), "gemm", "b");
  GemmDims d{c.size(-2), c.size(-1), ta ? a.size(-2) : a.size(-1), leading(a), leading(b), leading(c)};
  const int64_t am = ta ? a.size(-1) : a.size(-2);
  const int64_t bk = tb ? b.size(-1) : b.size(-2), bn = tb ? b.size(-2) : b.size(-1);
  if (am != d.M || bk != d.K || bn != d.N)
    fail("gemm", "shapes do not match: a {}{} b {}{} c {}", a.str(), ta ? "^T" : "", b.str(), tb ? "^T" : "",
         c.str());
  if ((d.Ba != d.Bc && d.Ba != 1) || (d.Bb != d.Bc && d.Bb != 1))
    fail("gemm", "batch sizes differ: a {} b {} c {}", a.str(), b.str(), c.str());
  return d;
}

namespace {
// One product (Bc = 1) and a contiguous vector `vec` of c's dtype with n(d) values.
template <class Len>
GemmDims check_gemm_vector(const char* op, const Tensor& a, bool ta, const Tensor& b, bool tb,
                           const Tensor& c, const Tensor& vec, const char* what, Len n) {
  const GemmDims d = check_gemm(a, ta, b, tb, c);
  if (d.Bc != 1) fail(op, "one product only, got c {}", c.str());
  check_shape(vec, {n(d)}, op, what);
  check_dtype(vec, c.dtype(), op, what);
  require_contiguous(op, vec, what);
  return d;
}
}  // namespace

GemmDims check_gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias,
                         const Tensor& c) {
  return check_gemm_vector("gemm_bias", a, ta, b, tb, c, bias, "bias", [](const GemmDims& d) { return d.N; });
}

GemmDims check_gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums) {
  return check_gemm_vector("gemm_rowsum", a, ta, b, tb, c, sums, "sums",
                           [](const GemmDims& d) { return d.M; });
}

void check_rope(const Tensor& x, double base, const Tensor& y) {
  if (x.dim() != 4 || x.size(3) % 2 != 0)
    fail("rope", "expected x (B,NH,T,HS) with HS even, got {}", x.str());
  if (!(base > 0)) fail("rope", "base must be positive, got {}", base);
  check_shape(y, x.shape(), "rope", "output");
  check_dtype(y, x.dtype(), "rope", "output");
  if (!x.is_contiguous() || !y.is_contiguous())
    fail("rope", "{} and {} must be contiguous", x.str(), y.str());
}

}  // namespace saobp
