#include "tensor/checks.h"

namespace saobp {

namespace {
int64_t leading(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }

void require_contiguous(const char* op, const Tensor& t, const char* what) {
  if (t.defined() && !t.is_contiguous()) fail(op, "{} must be contiguous, got {}", what, t.str());
}
}  // namespace

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

bool is_potts(AttnVariant v) { return v == AttnVariant::bp_high || v == AttnVariant::bp_low; }

AttnDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                         const Tensor& lambda, const AttnParams& p, const Tensor& probs, const Tensor& saved,
                         const Tensor& aux) {
  const char* op = "attention";
  if (q.dim() != 4) fail(op, "q must be (B,NH,T,HS), got {}", q.str());
  const AttnDims d{q.size(0), q.size(1), q.size(2), q.size(3)};
  for (const Tensor* t : {&q, &k, &v}) {
    check_shape(*t, q.shape(), op, "q, k and v");
    check_dtype(*t, q.dtype(), op, "q, k and v");
    require_contiguous(op, *t, "q, k and v");
  }
  check_shape(probs, {d.B, d.NH, d.T, d.T}, op, "probs");
  require_contiguous(op, probs, "probs");
  require_contiguous(op, saved, "saved");
  require_contiguous(op, aux, "aux");
  if (key_mask.defined()) {
    check_shape(key_mask, {d.B, d.T}, op, "key_mask");
    check_dtype(key_mask, DType::u8, op, "key_mask");
    require_contiguous(op, key_mask, "key_mask");
  }
  if (is_potts(p.variant)) {
    if (p.steps < 1) fail(op, "BP steps must be >= 1, got {}", p.steps);
    check_shape(lambda, {d.NH}, op, "lambda");
    check_shape(saved, {p.steps, d.B, d.NH, d.T, d.T}, op, "saved beliefs");
  }
  if (p.variant == AttnVariant::bp_elemmul) {
    check_shape(saved, {1, d.B, d.NH, d.T, d.T}, op, "saved attention");
    check_shape(aux, {d.B, d.NH, d.T}, op, "row sums");
  }
  return d;
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

void check_sink_gate(const Tensor& probs, const Tensor& key_mask, const Tensor& keep) {
  const char* op = "sink_gate";
  if (probs.dim() != 4 || probs.size(2) != probs.size(3))
    fail(op, "probs must be (B,NH,T,T), got {}", probs.str());
  if (probs.dtype() != DType::f32 && probs.dtype() != DType::f64)
    fail(op, "probs must be f32 or f64, got {}", probs.str());
  check_shape(keep, {probs.size(0), probs.size(1)}, op, "keep");
  check_dtype(keep, probs.dtype(), op, "keep");
  if (key_mask.defined()) {
    check_shape(key_mask, {probs.size(0), probs.size(2)}, op, "key_mask");
    check_dtype(key_mask, DType::u8, op, "key_mask");
  }
  require_contiguous(op, probs, "probs");
  require_contiguous(op, key_mask, "key_mask");
  require_contiguous(op, keep, "keep");
}

}  // namespace saobp
