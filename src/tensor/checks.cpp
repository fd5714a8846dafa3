// The kernels' argument checks (checks.h).
#include "tensor/checks.h"

namespace saobp {

namespace {
int64_t leading(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }
}  // namespace

void require_contiguous(const char* op, const Tensor& t, const char* name) {
  if (t.defined() && !t.is_contiguous()) fail(op, "{} must be contiguous, got {}", name, t.str());
}

void require_contiguous(const char* op, std::initializer_list<NamedTensor> ts) {
  for (const NamedTensor& n : ts) require_contiguous(op, n.t, n.name);
}

void require_same_device(const char* op, const Tensor& out, std::initializer_list<const Tensor*> in) {
  for (const Tensor* t : in)
    if (t->defined() && t->device() != out.device())
      fail(op, "tensors on different devices: {} and {}", out.str(), t->str());
}

void check_indices(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what) {
  check_dtype(idx, DType::i32, op, what);
  require_contiguous(op, idx, what);
  if (idx.numel() == 0) return;
  SAOBP_ON_DEVICE(idx, check_index_range, idx, limit, ignore, op, what);
}

void check_index_values(const int32_t* idx, int64_t n, int64_t limit, int64_t ignore, const char* op,
                        const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if ((idx[i] < 0 || idx[i] >= limit) && idx[i] != ignore)
      fail(op, "{} {} at position {} is outside [0, {})", what, idx[i], i, limit);
}

namespace {
// A 2-D view with contiguous columns whose rows are at least a row apart.
bool rows_apart(const Tensor& t) { return t.dim() == 2 && t.stride(1) == 1 && t.stride(0) >= t.size(1); }
}  // namespace

// A contiguous tensor's rows are its last dim's size apart (a row of length 0 or 1 may carry any
// stride there, so the stride is taken only from a view whose rows are apart).
int64_t row_pitch(const Tensor& t) { return rows_apart(t) ? t.stride(0) : t.size(-1); }

bool row_strided(const Tensor& t) { return t.dim() == 2 && (t.is_contiguous() || rows_apart(t)); }

GemmDims gemm_dims(const Tensor& a, bool ta, const Tensor& b, bool /*tb*/, const Tensor& c) {
  return {c.size(-2),   c.size(-1),   ta ? a.size(-2) : a.size(-1),
          leading(a),   leading(b),   leading(c),
          row_pitch(a), row_pitch(b), row_pitch(c)};
}

GemmDims check_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c, bool rows_apart) {
  if (a.dim() < 2 || b.dim() < 2 || c.dim() < 2)
    fail("gemm", "operands must have rank >= 2: {} {} {}", a.str(), b.str(), c.str());
  const auto laid_out = [&](const Tensor& t) { return t.is_contiguous() || (rows_apart && row_strided(t)); };
  if (!laid_out(a) || !laid_out(b) || !laid_out(c))
    fail("gemm", "operands must be contiguous{}: {} {} {}",
         rows_apart ? " or 2-D with rows evenly apart" : "", a.str(), b.str(), c.str());
  // Operands of c's dtype, or bf16 operands into f32 (mixed precision: f32 accumulation).
  const bool mixed = a.dtype() == DType::bf16 && b.dtype() == DType::bf16 && c.dtype() == DType::f32;
  if (!mixed && (a.dtype() != c.dtype() || b.dtype() != c.dtype()))
    fail("gemm", "operands must be of c's dtype, or bf16 both with c f32: a {} b {} c {}", a.str(), b.str(),
         c.str());
  const GemmDims d = gemm_dims(a, ta, b, tb, c);
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
                         const Tensor& c, const char* op) {
  return check_gemm_vector(op, a, ta, b, tb, c, bias, "bias", [](const GemmDims& d) { return d.N; });
}

GemmDims check_gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums) {
  return check_gemm_vector("gemm_rowsum", a, ta, b, tb, c, sums, "sums",
                           [](const GemmDims& d) { return d.M; });
}

GemmDims check_gemm_colsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums) {
  return check_gemm_vector("gemm_colsum", a, ta, b, tb, c, sums, "sums",
                           [](const GemmDims& d) { return d.N; });
}

void check_rope(const Tensor& x, double base, const Tensor& y, int64_t offset) {
  if (x.dim() != 4 || x.size(3) % 2 != 0)
    fail("rope", "expected x (B,NH,T,HS) with HS even, got {}", x.str());
  if (!(base > 0)) fail("rope", "base must be positive, got {}", base);
  if (offset < 0 || offset >= (int64_t{1} << 40))
    fail("rope", "the position offset must be in [0, 2^40), got {}", offset);
  check_shape(y, x.shape(), "rope", "output");
  check_dtype(y, x.dtype(), "rope", "output");
  if (!x.is_contiguous() || !y.is_contiguous())
    fail("rope", "{} and {} must be contiguous", x.str(), y.str());
}

namespace {
void check_floating(const char* op, const Tensor& t, const char* name) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
    fail(op, "{} must be f32 or f64, got {}", name, t.str());
}
}  // namespace

void check_entropy_reg(const char* op, const Tensor& q, const Tensor& k, const Tensor& key_mask) {
  require_same_device(op, q, {&k, &key_mask});
  check_floating(op, q, "q");
  if (q.dim() != 4 || k.shape() != q.shape())
    fail(op, "q and k must be the same (B,NH,T,HS), got {} and {}", q.str(), k.str());
  check_dtype(k, q.dtype(), op, "k");
  if (key_mask.defined()) {
    check_dtype(key_mask, DType::u8, op, "key_mask");
    check_shape(key_mask, {q.size(0), q.size(2)}, op, "key_mask");
  }
  require_contiguous(op, {{q, "q"}, {k, "k"}, {key_mask, "key_mask"}});
}

void check_qk_eigen(const char* op, const Tensor& wq, const Tensor& wk, int64_t heads) {
  require_same_device(op, wq, {&wk});
  check_floating(op, wq, "wq");
  if (wq.dim() != 2 || wk.shape() != wq.shape() || wk.dtype() != wq.dtype())
    fail(op, "wq and wk must be the same (NH·HS, C) matrix shape and dtype, got {} and {}", wq.str(),
         wk.str());
  if (heads <= 0 || wq.size(0) % heads != 0)
    fail(op, "{} rows do not split into {} heads", wq.size(0), heads);
  require_contiguous(op, {{wq, "wq"}, {wk, "wk"}});
}

}  // namespace saobp
