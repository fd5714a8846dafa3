// The seam between the two halves of the CUDA backend:
//   *.cpp  saobp::cuda::<kernel> entry points: shape/dtype/device checks, errors, scratch memory;
//   *.cu   the kernels, behind the launchers declared here.
// nvcc never sees tensor.h: fmt 9 (through core/error.h) does not compile under nvcc in C++20
// mode. Launchers therefore take raw device pointers and the plain structs below, run on the
// current device's legacy default stream, and return the launch's cudaError_t for the caller
// to check. Each template is instantiated, in its .cu, for the element types named above it.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tensor/formulas.h"

namespace saobp::cuda {

constexpr int kMaxDims = 8;

// Strided geometry of N operands over one shape: linear index i (row-major over size[0, dims))
// sits at element offset sum_d digit_d(i) * stride[k][d] of operand k. Built by make_indexer
// (common.h), which drops size-1 dims and merges dims that are contiguous in every operand.
template <int N>
struct Indexer {
  int dims = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};
};

// Whether n elements of ix index in 32 bits: n and every operand's largest offset below 2^32,
// no negative stride (the kernels then divide in uint32_t: device.cuh offsets_as).
template <int N>
inline bool fits_u32(const Indexer<N>& ix, int64_t n) {
  constexpr int64_t kMax = int64_t{1} << 32;
  if (n >= kMax) return false;
  for (int k = 0; k < N; ++k) {
    int64_t most = 0;
    for (int d = 0; d < ix.dims; ++d) {
      if (ix.stride[k][d] < 0) return false;
      most += (ix.size[d] - 1) * ix.stride[k][d];
      if (most >= kMax) return false;
    }
  }
  return true;
}

// Deterministic column sums without atomics: `rows` are cut into `count` chunks of `per` rows,
// a function of the shape only. Pass 1 writes one partial sum (in double) per (chunk, column);
// pass 2 (launch_finish_chunks) adds a column's partials in chunk order.
struct Chunks {
  int64_t count = 1, per = 0;
};
inline Chunks split_rows(int64_t rows, int64_t cols) {
  if (rows <= 0) return {1, 0};
  const int64_t want = (65536 + cols - 1) / std::max<int64_t>(cols, 1);  // ~64K pass-1 threads
  const int64_t most = std::clamp<int64_t>(rows / 32, 1, 1024);          // >= 32 rows a chunk
  const int64_t target = std::min(want, most);
  const int64_t per = (rows + target - 1) / target;
  return {(rows + per - 1) / per, per};
}

// Philox key of a draw (RngKey of backend.h).
struct PhiloxKey {
  uint64_t seed = 0, stream = 0, offset = 0;
};

// The operations of BinaryOp and UnaryOp (kernels.h), which nvcc cannot include.
using formula::Arith;
enum class Unary : uint8_t { exp, log, log1p, softplus };

// Which entries of a (rows, C) tensor are allowed: those where a u8 mask broadcast to it is 1
// (row r starts at base + offset of r in `rows`, column c is c * step further; base == nullptr:
// no mask) and, when causal > 0, those with c <= r % causal (rows of causal (T,T) tiles).
struct MaskView {
  const uint8_t* base = nullptr;
  Indexer<1> rows;
  int64_t step = 0;
  int64_t causal = 0;
};

// ---- elementwise.cu (T: float, double, int32_t, uint8_t unless noted) ----
// out: strided (ix), n elements.
template <class T>
cudaError_t launch_fill(T* out, const Indexer<1>& ix, int64_t n, T value);
// dst, src: strided (ix.stride[0] = dst, [1] = src), n elements.
template <class T>
cudaError_t launch_copy(const T* src, T* dst, const Indexer<2>& ix, int64_t n, bool accumulate);
// src, dst: (n) contiguous; S, D: any of the four types.
template <class S, class D>
cudaError_t launch_cast(const S* src, D* dst, int64_t n);
// bf16 (as its 16 bits, tensor/bf16.h) to and from f32, and a copy of bf16 elements.  (n)
cudaError_t launch_to_bf16(const float* src, uint16_t* dst, int64_t n);
cudaError_t launch_from_bf16(const uint16_t* src, float* dst, int64_t n);
// x, y: (n). T: float, double. y = alpha x (when ignore_y) or alpha x + beta y.
template <class T>
cudaError_t launch_axpby(const T* x, T alpha, T* y, T beta, bool ignore_y, int64_t n);
// out, a, b: strided (ix.stride[0] = out, [1] = a, [2] = b). T: float, double.
template <class T>
cudaError_t launch_binary(Arith op, const T* a, const T* b, T* out, const Indexer<3>& ix, int64_t n);
// x, y, gy, gx: (n). T: float, double. y = f(x); gx += gy f'(x).
template <class T>
cudaError_t launch_unary(Unary op, const T* x, T* y, int64_t n);
template <class T>
cudaError_t launch_unary_backward(Unary op, const T* x, const T* y, const T* gy, T* gx, int64_t n);

// ---- random.cu (T: float, double) ----
// out: (n). U[a, b) from word offset+i, or N(a, b^2) from normal number offset+i.
template <class T>
cudaError_t launch_fill_random(T* out, int64_t n, bool normal, double a, double b, PhiloxKey key);
// x, y, mask: (n). Keep element i when U_i >= p; y = x * scale where kept, else 0.
template <class T>
cudaError_t launch_dropout_forward(const T* x, float p, T scale, PhiloxKey key, T* y, uint8_t* mask,
                                   int64_t n);
// gy, mask, gx: (n). gx += gy * scale where mask.
template <class T>
cudaError_t launch_dropout_backward(const T* gy, const uint8_t* mask, T scale, T* gx, int64_t n,
                                    bool accumulate);

// ---- reduce.cu (T: float, double) ----
// src: strided, viewed as (O kept) x (R reduced) -> partial: (chunks.count, O) in double.
template <class T>
cudaError_t launch_sum_chunks(const T* src, const Indexer<1>& kept, const Indexer<1>& reduced, int64_t O,
                              int64_t R, Chunks chunks, double* partial);
// partial: (chunks.count, cols) -> out: (cols); out = alpha s (+ out, in double).
template <class T>
cudaError_t launch_finish_chunks(const double* partial, Chunks chunks, int64_t cols, double alpha, T* out,
                                 bool accumulate);

// ---- nn.cu (T: float, double) ----
// x, y, gy, gx: (n).
template <class T>
cudaError_t launch_gelu_forward(const T* x, T* y, int64_t n, bool tanh_approx);
template <class T>
cudaError_t launch_gelu_backward(const T* x, const T* gy, T* gx, int64_t n, bool tanh_approx,
                                 bool accumulate);
// x, y: (N,C)  w, b: (C)  mean, rstd: (N)
template <class T>
cudaError_t launch_layernorm_forward(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd,
                                     int64_t N, int64_t C);
// x, gy, gx: (N,C)  w: (C)  mean, rstd: (N). gx += input gradient.
template <class T>
cudaError_t launch_layernorm_backward_input(const T* x, const T* w, const T* mean, const T* rstd, const T* gy,
                                            T* gx, int64_t N, int64_t C);
// x, gy: (N,C)  mean, rstd: (N) -> pw, pb: (chunks.count, C) partial sums of gy n and gy.
template <class T>
cudaError_t launch_layernorm_backward_params(const T* x, const T* mean, const T* rstd, const T* gy, int64_t N,
                                             int64_t C, Chunks chunks, double* pw, double* pb);
// x, y, gy, gx: (R,C)  mask: broadcast to (R,C) or none.
template <class T>
cudaError_t launch_softmax_forward(const T* x, const MaskView& mask, T* y, int64_t R, int64_t C, bool log);
template <class T>
cudaError_t launch_softmax_backward(const T* y, const T* gy, const MaskView& mask, T* gx, int64_t R,
                                    int64_t C, bool log);

// ---- embedding.cu (T: float, double) ----
// idx: (n). Sets *flag to 1 when some idx[i] is outside [0, limit) and is not `ignore` (flag may
// be host memory mapped into the device's address space).
cudaError_t launch_flag_bad_indices(const int32_t* idx, int64_t n, int64_t limit, int64_t ignore,
                                    int32_t* flag);
// weight: (V,C)  ids: (N) in [0,V), a row of zeros for any other  out: (N,C)
template <class T>
cudaError_t launch_embedding_forward(const T* weight, const int32_t* ids, T* out, int64_t N, int64_t C,
                                     int64_t V);
// ids: (N) in [0,V) (others add nothing), N < 2^31  gout: (N,C)  gweight: (V,C) accumulated.
// scratch: device memory of embedding_backward_scratch_bytes(N, V) bytes, 256-byte aligned.
size_t embedding_backward_scratch_bytes(int64_t N, int64_t V);
template <class T>
cudaError_t launch_embedding_backward(const int32_t* ids, const T* gout, T* gweight, int64_t N, int64_t C,
                                      int64_t V, void* scratch, size_t scratch_bytes);

// ---- loss.cu (T: float, double) ----
// logits: (N,V), rows ld apart  targets: (N) in [0,V) or ignore  losses, lse: (N)
template <class T>
cudaError_t launch_cross_entropy_forward(const T* logits, int64_t ld, const int32_t* targets, int64_t ignore,
                                         T* losses, T* lse, int64_t N, int64_t V);
// logits, glogits: (N,V), rows ld and ldo apart  targets, lse, gloss: (N). glogits accumulated.
template <class T>
cudaError_t launch_cross_entropy_backward(const T* logits, int64_t ld, const int32_t* targets, const T* lse,
                                          const T* gloss, int64_t ignore, T* glogits, int64_t ldo, int64_t N,
                                          int64_t V, bool accumulate);
// The same into bf16 bits (written, not accumulated): each f32 value rounded once.
cudaError_t launch_cross_entropy_backward_bf16(const float* logits, int64_t ld, const int32_t* targets,
                                               const float* lse, const float* gloss, int64_t ignore,
                                               uint16_t* glogits, int64_t ldo, int64_t N, int64_t V);

// ---- optim.cu (T: float, double) ----
// p, g, m, v: (n). formula::adamw_update of every element, with the step's coefficients.
template <class T>
cudaError_t launch_adamw(T* p, const T* g, T* m, T* v, const formula::AdamWCoeffs& h, int64_t n);

// Tensors of one multi-tensor launch, passed by value in the kernel's parameters (up to 32 KB
// on sm_70 and later with CUDA 12.1+): each tensor's elements are cut into chunks of
// kMultiChunk, one block a chunk; tensor t has blocks [first_block[t], first_block[t+1]).
constexpr int kMultiTensors = 320, kMultiCoeffs = 4;
constexpr int64_t kMultiChunk = 8192;
template <class T>
struct MultiSquares {
  int count = 0;
  const T* x[kMultiTensors];
  int64_t n[kMultiTensors];
  int32_t first_block[kMultiTensors + 1];
};
template <class T>
struct MultiAdamW {
  int count = 0;
  T* p[kMultiTensors];
  T* g[kMultiTensors];
  T* m[kMultiTensors];
  T* v[kMultiTensors];
  int64_t n[kMultiTensors];
  int32_t first_block[kMultiTensors + 1];
  uint8_t coeff[kMultiTensors];  // which of `coeffs` tensor t uses
  formula::AdamWCoeffs coeffs[kMultiCoeffs];
  double grad_scale = 1;  // g = grad_scale g first (in T, as axpby), when not 1
};
// sums[t] (f64) = the sum of x[t]² (squares in T, added in double, rounded to T); partial:
// first_block[count] doubles of scratch.
template <class T>
cudaError_t launch_multi_sum_squares(const MultiSquares<T>& list, double* partial, double* sums);
template <class T>
cudaError_t launch_multi_adamw(const MultiAdamW<T>& list);

// ---- rope.cu (T: float, double) ----
// x, y: (rows, HS) with rows = B NH Tp, row r at position r % Tp;  cs, sn: (Tp, HS/2) cos and sin
// of the angles (double, from the host).  y[2i] = x[2i] c - x[2i+1] s,  y[2i+1] = x[2i] s +
// x[2i+1] c, with s negated when inverse. y may alias x.
template <class T>
cudaError_t launch_rope(const T* x, const double* cs, const double* sn, bool inverse, T* y, int64_t rows,
                        int64_t Tp, int64_t HS);

// ---- regularizers.cu (T: float, double) ----
// Entropy-Reg of q, k (B,NH,T,HS); key: (B,T) u8, 1 = token, or nullptr. scale = 1/sqrt(HS) and
// logT = log T come from the host (the CPU twin's std::sqrt and std::log).
struct EntropyRegDims {
  int64_t B = 0, NH = 0, T = 0, HS = 0;
  double scale = 1.0, logT = 0.0;
  bool causal = false;
};
// stats: (B·NH·T, 3) per query row: the max allowed score, log Z and the entropy H_r of its softmax
// (zeros for the rows of pad tokens, which are not counted).
template <class T>
cudaError_t launch_entropy_row_stats(const T* q, const T* k, const uint8_t* key, const EntropyRegDims& d,
                                     double* stats);
// stats, theta: (NH) -> part: (B·NH) scratch, the counted rows' entropy sum of each (b, h); then
// penalty: () and delta, active: (NH) as entropy_reg_penalty_forward (kernels.inc).
template <class T>
cudaError_t launch_entropy_penalty(const double* stats, const T* theta, const uint8_t* key,
                                   const EntropyRegDims& d, double gamma, double* part, T* penalty,
                                   double* delta, double* active);
// gpenalty: ()  delta, active: (NH) -> coef: (NH) ∂P/∂E_h / N (0 when no row is counted) and
// gtheta: (NH) = -log T ∂P/∂E_h, unless nullptr.
template <class T>
cudaError_t launch_entropy_coefs(const T* gpenalty, const double* delta, const double* active,
                                 const uint8_t* key, const EntropyRegDims& d, double* coef, T* gtheta);
// gq, gk: (B,NH,T,HS) written whole from stats and coef (zeros in the slices of heads with coef 0).
template <class T>
cudaError_t launch_entropy_backward(const T* q, const T* k, const uint8_t* key, const EntropyRegDims& d,
                                    const double* stats, const double* coef, T* gq, T* gk);
// Eigen-Reg of wq, wk (NH·HS, C). m: (NH,HS,HS) M_h = K_h Q_hᵀ in double.
template <class T>
cudaError_t launch_qk_products(const T* wq, const T* wk, int64_t NH, int64_t HS, int64_t C, double* m);
// m -> var: (NH) the eigenvalue variance, trace: (NH) tr M_h.
template <class T>
cudaError_t launch_qk_eigen_variance(const double* m, int64_t NH, int64_t HS, T* var, double* trace);
// gvar, trace: (NH)  m: the products -> gwq, gwk: (NH·HS, C) written whole.
template <class T>
cudaError_t launch_qk_eigen_backward(const T* wq, const T* wk, const double* m, const double* trace,
                                     const T* gvar, int64_t NH, int64_t HS, int64_t C, T* gwq, T* gwk);

}  // namespace saobp::cuda
