// The argument checks of the kernels, made once in the saobp::kern dispatchers
// (src/tensor/dispatch.cpp, src/attention/dispatch.cpp) for both backends, so the CPU and the
// GPU reject the same inputs with the same messages and the twins assume valid arguments.
#pragma once
#include <initializer_list>

#include "tensor/backend.h"

namespace saobp {

// A tensor argument and the name an error message gives it.
struct NamedTensor {
  const Tensor& t;
  const char* name;
};

// Throws "[op] <name> must be contiguous, got <tensor>" for the first defined tensor that is not.
void require_contiguous(const char* op, const Tensor& t, const char* name);
void require_contiguous(const char* op, std::initializer_list<NamedTensor> ts);

// Throws "[op] tensors on different devices: <out> and <t>" for the first defined `in` that does
// not live on out's device.
void require_same_device(const char* op, const Tensor& out, std::initializer_list<const Tensor*> in);

// `ignore` value of check_indices under which no index is exempt (no i32 equals it).
constexpr int64_t kNoIgnore = INT64_MIN;

// idx: contiguous i32, every entry in [0, limit) or equal to `ignore`. Throws "[op] <what> <value>
// at position <n> is outside [0, limit)" for the first that is not (reading the values on their
// device: the twins' check_index_range).
void check_indices(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what);
// The message of check_indices from the values on the host (the twins' check_index_range).
void check_index_values(const int32_t* idx, int64_t n, int64_t limit, int64_t ignore, const char* op,
                        const char* what);

// c = op(a) op(b): c (Bc,M,N), a (Ba,M,K) or (Ba,K,M) if ta, b (Bb,K,N) or (Bb,N,K) if tb, with
// Ba, Bb in {Bc, 1} (the products of the leading dims). lda, ldb, ldc: the elements from one
// stored row of a, b, c to the next (the last dim's size where contiguous; more for the rows of a
// padded buffer, which kern::gemm takes: a 2-D view whose columns are contiguous).
struct GemmDims {
  int64_t M, N, K, Ba, Bb, Bc;
  int64_t lda, ldb, ldc;
};
// The dims of valid operands (no checks: the twins' view of a checked call).
GemmDims gemm_dims(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c);
// gemm: the dims above, a and b of c's dtype, all contiguous, or (rows_apart) 2-D with
// contiguous columns and rows evenly apart (row_strided).
GemmDims check_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                    bool rows_apart = false);
// A 2-D view whose columns are contiguous and whose rows are at least a row apart: the first
// columns of a wider buffer (Tensor::slice along dim 1), as a GEMM or the cross-entropy reads it.
bool row_strided(const Tensor& t);
// Elements from one stored row of t to the next: a 2-D view's row stride, else the last dim's size.
int64_t row_pitch(const Tensor& t);

// gemm_bias: check_gemm with one batch item, and bias (N) contiguous of c's dtype.
GemmDims check_gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias,
                         const Tensor& c, const char* op = "gemm_bias");
// gemm_rowsum: check_gemm with one batch item, and sums (M) contiguous of c's dtype.
GemmDims check_gemm_rowsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums);
// gemm_colsum: check_gemm with one batch item, and sums (N) contiguous of c's dtype.
GemmDims check_gemm_colsum(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                           const Tensor& sums);

// rope: x, y (B,NH,T,HS) of one dtype, HS even, both contiguous; base > 0; offset in [0, 2^40).
void check_rope(const Tensor& x, double base, const Tensor& y, int64_t offset);

// The regularizers' inputs (both passes), all contiguous and on q's (wq's) device:
// entropy_reg_penalty: q, k (B,NH,T,HS) of one dtype, f32 or f64; key_mask undefined or (B,T) u8.
void check_entropy_reg(const char* op, const Tensor& q, const Tensor& k, const Tensor& key_mask);
// qk_eigen_variance: wq, wk (NH·HS, C) of one dtype, f32 or f64, whose rows split into `heads`.
void check_qk_eigen(const char* op, const Tensor& wq, const Tensor& wk, int64_t heads);

}  // namespace saobp
