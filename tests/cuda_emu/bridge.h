// What the tests call to run the project's CUDA kernels under the emulator (emu.h): host
// pointers in and out, the launchers' sequences as the backend's host halves make them
// (src/attention/cuda/attention.cpp, tiled.cpp), scratch on the host. Plain C++: a test includes
// this header only, never a translated .cu file or the emulator's runtime.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace saobp::emu_bridge {

// The order the threads of a block run in under the emulator (reverse: the last thread first).
// A kernel that gives other bits in the other order has a race.
void set_reverse_order(bool reverse);
// f() with each block's threads in reverse order, and back to forward order after (a throw too).
template <class F>
auto in_reverse(F f) {
  set_reverse_order(true);
  try {
    auto r = f();
    set_reverse_order(false);
    return r;
  } catch (...) {
    set_reverse_order(false);
    throw;
  }
}

// A launch that failed (bad configuration, deadlock, a shuffle with a returned lane), with the
// emulator's reason.
struct LaunchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The tiled kernels (tiled.cu): forward into out, lse (S+1, tiles, T) and colsum (S, tiles, T);
// then, where gout is not nullptr, the backward, adding into gq, gk, gv and glambda (each may be
// nullptr). q, k, v, gout, gq, gk, gv: (B, NH, T, HS); key: (B, T) or nullptr; lambda: (NH)
// where S > 0. T: float or double.
template <class T>
struct TiledCall {
  int64_t B = 0, NH = 0, n = 0, hs = 0;
  int S = 0;            // BP steps (0: original)
  bool high = true;     // BP-High (else BP-Low) when S > 0
  bool causal = false;  // decoder
  bool leak = false;    // a leaking decoder: every other token row sends
  bool staged = false;  // the tile products through shared memory
  double scale = 1;
  const T *q = nullptr, *k = nullptr, *v = nullptr, *lambda = nullptr;
  const uint8_t* key = nullptr;
  T *out = nullptr, *lse = nullptr, *colsum = nullptr;
  const T* gout = nullptr;
  T *gq = nullptr, *gk = nullptr, *gv = nullptr, *glambda = nullptr;
};
template <class T>
void tiled(const TiledCall<T>& call);

// The Potts maps of the materialized attention (attention.cu) from the scores s on: the beliefs
// A = b^0 .. b^S = B (beliefs: (S+1, tiles, T, T)), and given dB the gradient ds at s (written)
// and λ's (added into glambda), in the fused schedule (the SAOBP_FUSED_ATTENTION=1 one) or the
// unfused one. S = 0: original's softmax. f32 only: B's and ds's bf16 copies into B_half and
// ds_half where not nullptr (under the fused schedule the kernels write them, unfused they are
// cast from B and ds).
template <class T>
struct MapsCall {
  int64_t B = 0, NH = 0, n = 0;
  int S = 0;
  bool high = true, causal = false, leak = false, fused = false;
  const T *s = nullptr, *lambda = nullptr, *dB = nullptr;
  const uint8_t* key = nullptr;
  T *beliefs = nullptr, *ds = nullptr, *glambda = nullptr;
  uint16_t *B_half = nullptr, *ds_half = nullptr;
};
template <class T>
void maps(const MapsCall<T>& call);

// The row and elementwise kernels of the transformer around the attention, each as its host
// half in src/tensor/cuda/ calls it. T: float or double.
// nn.cu and reduce.cu: LayerNorm forward (y, mean, rstd) and backward (gx, gw, gb added into;
// each may be nullptr). x, y, gy, gx: (N, C); w, b, gw, gb: (C); mean, rstd: (N).
template <class T>
void layernorm(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd, const T* gy, T* gx,
               T* gw, T* gb, int64_t N, int64_t C);
// nn.cu: GELU (erf, or tanh_approx) forward and backward (gx added into). x, y, gy, gx: (n).
template <class T>
void gelu(const T* x, T* y, const T* gy, T* gx, int64_t n, bool tanh_approx);
// loss.cu: cross-entropy forward (losses, lse) and backward (glogits added into). logits,
// glogits: (N, V); targets, losses, lse, gloss: (N).
template <class T>
void cross_entropy(const T* logits, const int32_t* targets, int64_t ignore, T* losses, T* lse, const T* gloss,
                   T* glogits, int64_t N, int64_t V);
// embedding.cu: forward (out) and backward (gweight added into, by sorted runs of equal ids).
// weight, gweight: (V, C); ids: (N); out, gout: (N, C).
template <class T>
void embedding(const T* weight, const int32_t* ids, T* out, const T* gout, T* gweight, int64_t N, int64_t C,
               int64_t V);

// sink_gate.cu: keep (B, NH) of the head-skip gate for probs (B, NH, T, T), key (B, T) or nullptr.
template <class T>
void sink_gate(const T* probs, const uint8_t* key, double tau, double fraction, T* keep, int64_t B,
               int64_t NH, int64_t n);
// rope.cu: y = x rotated (inverse: back) at positions offset.. of rows (B NH T, HS), with
// rope_table.h's angles for `base`, as src/tensor/cuda/rope.cpp.
template <class T>
void rope(const T* x, double base, bool inverse, T* y, int64_t rows, int64_t n, int64_t hs, int64_t offset);
// random.cu: fill_random (uniform [a, b) or normal (a, b²)) of n values, then dropout forward
// (y, mask) and backward (gx added into) of x, all from the Philox stream (seed, stream, offset).
template <class T>
void random_and_dropout(T* fill, bool normal, double a, double b, const T* x, double p, T* y, uint8_t* mask,
                        const T* gy, T* gx, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset);

// elementwise.cu: out = a op b (op 0 add, 1 sub, 2 mul, 3 div) over `dims` dims of sizes
// `size`, each operand at its own strides (0: broadcast); y = f(x) and gx += gy f'(x) for f
// (0 exp, 1 log, 2 log1p, 3 softplus) over n contiguous values; f32 to bf16 bits and back.
template <class T>
void binary(int op, const T* a, const T* b, T* out, int dims, const int64_t* size, const int64_t* a_strides,
            const int64_t* b_strides, const int64_t* out_strides);
template <class T>
void unary(int op, const T* x, T* y, const T* gy, T* gx, int64_t n);
void bf16_round_trip(const float* x, uint16_t* bits, float* back, int64_t n);
// elementwise.cu's strided fill (out at out_strides over `dims` dims of `size`) and copy (dst
// (+)= src, src at its own strides, 0 where broadcast); f64 to f32 and i32 to f64 casts of n
// values; y = alpha x + beta y (beta 0: y's contents ignored).
template <class T>
void fill_copy(T* out, const int64_t* out_strides, T value, const T* src, const int64_t* src_strides, T* dst,
               const int64_t* dst_strides, bool accumulate, int dims, const int64_t* size);
void casts(const double* x, float* to_f32, const int32_t* ids, double* to_f64, int64_t n);
template <class T>
void axpby(const T* x, T alpha, T* y, T beta, int64_t n);
// reduce.cu: dst (A, 1, Bd) += alpha · the sums of src (A, R, Bd) over its middle dim, as
// src/tensor/cuda/reduce.cpp's reduce_sum_to (chunks of rows, then their sums in order).
template <class T>
void reduce_middle(const T* src, T* dst, int64_t A, int64_t R, int64_t Bd, double alpha);
// optim.cu: sums[i] = Σ xs[i]² of `count` tensors, then AdamW on all of them at once (the
// gradients scaled by grad_scale first), tensor i with coefficients coeff_of[i] of `coeffs`, as
// src/tensor/cuda/optim.cpp's multi_sum_squares and multi_adamw_step (count <= 320, coeffs <= 4).
struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
};
template <class T>
void multi_optim(int count, T* const* p, T* const* g, T* const* m, T* const* v, const int64_t* n,
                 const AdamWHyper* coeffs, const int* coeff_of, double grad_scale, double* sums);

// regularizers.cu, as src/tensor/cuda/regularizers.cpp: Entropy-Reg of q, k (B, NH, T, HS) with
// key (B, T) or nullptr and theta (NH): penalty (1), delta and active (NH, f64), then given
// gpenalty the gradients gq, gk (written) and gtheta (NH, written); Eigen-Reg of wq, wk
// (NH·HS, C): var (NH) and trace (NH, f64), then given gvar (NH) gwq and gwk (written).
template <class T>
void entropy_reg(const T* q, const T* k, const uint8_t* key, bool causal, const T* theta, double gamma,
                 T* penalty, double* delta, double* active, const T* gpenalty, T* gq, T* gk, T* gtheta,
                 int64_t B, int64_t NH, int64_t n, int64_t hs);
template <class T>
void eigen_reg(const T* wq, const T* wk, T* var, double* trace, const T* gvar, T* gwq, T* gwk, int64_t NH,
               int64_t hs, int64_t C);

// The emulator's own checks (selftest.cu). selftest_reduce: out[b] = the sum of in's block b
// (256 values) by block_reduce, any_negative[b] = whether one was negative (__any_sync); "" or
// the failure. selftest_neighbours: out[t] = what thread t reads of thread t+1's write (with or
// without a barrier between), out: 256 ints. selftest_deadlock and selftest_bad_configuration:
// the emulator's report of a kernel that deadlocks and of a block of 2048 threads ("" when the
// launch did not fail as it should).
std::string selftest_reduce(const double* in, int blocks, double* out, int* any_negative);
std::string selftest_neighbours(bool barrier, int* out);
std::string selftest_deadlock(int* out);
std::string selftest_bad_configuration();

}  // namespace saobp::emu_bridge
