// The emulator's bridge (bridge.h): compiled like a translated .cu file (emu.h in front), so the
// launchers it calls are the emulated ones: the test library's copy (saobp::cuda_emu, by
// -Dcuda=cuda_emu) or, in the emulated backend (SAOBP_CUDA=EMU), the library's own.
#include "bridge.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "attention/cuda/launch.h"
#include "tensor/bf16.h"
#include "tensor/formulas.h"
#include "tensor/rope_table.h"

namespace saobp::emu_bridge {

namespace cu = saobp::cuda;

namespace {

void check(cu::cudaError_t e, const char* what) {
  if (e != cu::cudaSuccess)
    throw LaunchError(std::string(what) + ": " + cu::cudaGetErrorString(e) + " (" + cu::emu::last_failure() +
                      ")");
}

template <class T>
std::vector<T> scratch(int64_t n) {
  return std::vector<T>(static_cast<size_t>(std::max<int64_t>(n, 1)));
}

// The Potts c of each head and dc/dλ, by the emulated launch_potts_params.
template <class T>
std::pair<std::vector<double>, std::vector<double>> potts(const T* lambda, int64_t NH, bool high) {
  std::vector<double> c(static_cast<size_t>(NH)), dc(static_cast<size_t>(NH));
  check(cu::launch_potts_params<T>(lambda, NH, high, c.data(), dc.data()), "launch_potts_params");
  return {c, dc};
}

}  // namespace

void set_reverse_order(bool reverse) {
  cu::emu::set_order(reverse ? cu::emu::Order::reverse : cu::emu::Order::forward);
}

// As src/attention/cuda/tiled.cpp's forward_t and backward_t.
template <class T>
void tiled(const TiledCall<T>& call) {
  cu::TiledArgs<T> a;
  a.q = call.q, a.k = call.k, a.v = call.v, a.key = call.key;
  a.NH = call.NH, a.n = call.n, a.hs = call.hs, a.tiles = call.B * call.NH, a.S = call.S;
  a.causal = call.causal, a.all = !call.causal || call.leak, a.staged = call.staged, a.scale = call.scale;
  a.nb = cu::tiled_blocks(call.n);
  std::vector<double> c, dc_dlambda;
  if (a.S > 0) {
    std::tie(c, dc_dlambda) = potts(call.lambda, call.NH, call.high);
    a.c = c.data();
    a.colsum = call.colsum;
  }
  a.lse = call.lse;
  std::vector<T> qs = scratch<T>(a.tiles * a.n * a.hs),
                 work = scratch<T>(a.tiles * a.nb * cu::tiled_block_elems(a.S));
  std::vector<double> cells = scratch<double>(a.tiles * cu::tiled_cells_per_head(a.n, a.S, a.all));
  a.qs = qs.data(), a.work = work.data(), a.cells = cells.data();
  check(cu::launch_attention_tiled_forward<T>(a, call.out), "launch_attention_tiled_forward");
  if (!call.gout) return;
  a.out = call.out, a.gout = call.gout, a.gq = call.gq, a.gk = call.gk, a.gv = call.gv;
  std::vector<double> rho = scratch<double>(a.tiles * (a.S + 1) * a.n),
                      E = scratch<double>(a.tiles * a.S * a.n),
                      R = scratch<double>(a.all ? 0 : a.tiles * a.nb * a.S * a.n),
                      dc = scratch<double>(a.tiles * a.nb);
  a.rho = rho.data(), a.E = E.data(), a.R = R.data(), a.dc = dc.data();
  check(cu::launch_attention_tiled_backward<T>(a), "launch_attention_tiled_backward");
  if (a.S > 0 && call.glambda)
    check(cu::launch_lambda_grad<T>(dc.data(), dc_dlambda.data(), call.B, call.NH, a.nb, call.glambda),
          "launch_lambda_grad");
}

namespace {

// The tiles' allowed(j, k), as attention.cpp's tile_mask: the key mask (B, T) broadcast over
// heads and rows (strides T, 0, 0), causal rows ending at k = j.
cu::MaskView tile_mask(const uint8_t* key, bool causal, int64_t B, int64_t NH, int64_t n) {
  cu::MaskView m;
  if (key) {
    m.base = key;
    m.rows.dims = 3;
    m.rows.size[0] = B, m.rows.size[1] = NH, m.rows.size[2] = n;
    m.rows.stride[0][0] = n;
    m.step = 1;
  }
  m.causal = causal ? n : 0;
  return m;
}

template <class T>
void cast_half(const T* x, uint16_t* h, int64_t count) {
  if constexpr (std::is_same_v<T, float>)
    if (h)
      for (int64_t i = 0; i < count; ++i) h[i] = bf16_bits(x[i]);
}

}  // namespace

// As src/attention/cuda/attention.cpp's forward_t and backward_t from s and to ds.
template <class T>
void maps(const MapsCall<T>& call) {
  const int64_t tiles = call.B * call.NH, n = call.n, rows = tiles * n, area = rows * n;
  const cu::MaskView mask = tile_mask(call.key, call.causal, call.B, call.NH, n);
  std::vector<T*> belief;
  for (int t = 0; t <= call.S; ++t) belief.push_back(call.beliefs + t * area);
  const size_t last = belief.size() - 1;
  const bool prefix = call.causal && !call.leak;
  uint16_t* Bh = call.fused ? call.B_half : nullptr;  // unfused: cast below
  std::vector<double> c, dc_dlambda;
  // Forward.
  if (call.S == 0) {
    check(cu::launch_softmax_half<T>(call.s, mask, belief[0], Bh, rows, n), "launch_softmax_half");
  } else {
    std::tie(c, dc_dlambda) = potts(call.lambda, call.NH, call.high);
    check(cu::launch_softmax_forward<T>(call.s, mask, belief[0], rows, n, false), "launch_softmax_forward");
    if (!prefix && call.fused) {
      std::vector<double> C = scratch<double>(rows);
      for (size_t t = 1; t <= last; ++t) {
        check(cu::launch_potts_colsum<T>(belief[t - 1], call.key, c.data(), call.B, call.NH, n, C.data()),
              "launch_potts_colsum");
        check(cu::launch_potts_refine<T>(belief[t - 1], call.s, C.data(), call.key, c.data(), mask, call.B,
                                         call.NH, n, belief[t], t == last ? Bh : nullptr),
              "launch_potts_refine");
      }
    } else {
      std::vector<T> L_map = scratch<T>(call.fused ? 0 : area);
      for (size_t t = 1; t <= last; ++t) {
        T* L = call.fused ? belief[t] : L_map.data();
        check(cu::launch_potts_messages<T>(belief[t - 1], call.s, call.key, c.data(), call.B, call.NH, n,
                                           prefix, L),
              "launch_potts_messages");
        check(cu::launch_softmax_half<T>(L, mask, belief[t], t == last ? Bh : nullptr, rows, n),
              "launch_softmax_half");
      }
    }
  }
  if (!call.fused) cast_half(belief[last], call.B_half, area);
  if (!call.dB) return;
  // Backward.
  T* ds = call.ds;
  uint16_t* dSh = call.fused ? call.ds_half : nullptr;
  if (!call.fused) std::fill(ds, ds + area, T(0));
  if (call.S == 0) {
    if (call.fused)
      check(cu::launch_softmax_grad<T>(belief[0], call.dB, ds, dSh, rows, n), "launch_softmax_grad");
    else
      check(cu::launch_softmax_backward<T>(belief[0], call.dB, mask, ds, rows, n, false),
            "launch_softmax_backward");
  } else {
    std::vector<double> dc(static_cast<size_t>(rows), 0.0);
    if (call.fused) {
      std::vector<T> dL = scratch<T>(area), dL_prev = scratch<T>(call.S > 1 ? area : 0),
                     dF = scratch<T>(prefix ? area : 0);
      std::vector<double> D = scratch<double>(prefix ? 0 : rows);
      T *cur = dL.data(), *prev = dL_prev.data();
      check(cu::launch_softmax_grad<T>(belief[last], call.dB, cur, nullptr, rows, n), "launch_softmax_grad");
      for (size_t t = last; t >= 1; --t) {
        check(cu::launch_potts_backward_step<T>(belief[t - 1], cur, call.key, c.data(), call.B, call.NH, n,
                                                prefix, t == last, t == 1, prefix ? nullptr : D.data(),
                                                prefix ? dF.data() : nullptr, ds, dSh,
                                                call.S > 1 ? prev : nullptr, dc.data()),
              "launch_potts_backward_step");
        std::swap(cur, prev);
      }
    } else {
      std::vector<T> db(call.dB, call.dB + area), dL = scratch<T>(area), dP = scratch<T>(area);
      for (size_t t = last; t >= 1; --t) {
        std::fill(dL.begin(), dL.end(), T(0));
        check(cu::launch_softmax_backward<T>(belief[t], db.data(), mask, dL.data(), rows, n, false),
              "launch_softmax_backward");
        for (int64_t i = 0; i < area; ++i) ds[i] += dL[static_cast<size_t>(i)];
        check(cu::launch_potts_chain<T>(belief[t - 1], dL.data(), call.key, c.data(), call.B, call.NH, n,
                                        prefix, dP.data(), dc.data()),
              "launch_potts_chain");
        std::swap(db, dP);
      }
      check(cu::launch_softmax_backward<T>(belief[0], db.data(), mask, ds, rows, n, false),
            "launch_softmax_backward");
    }
    if (call.glambda)
      check(cu::launch_lambda_grad<T>(dc.data(), dc_dlambda.data(), call.B, call.NH, n, call.glambda),
            "launch_lambda_grad");
  }
  if (!call.fused) cast_half(ds, call.ds_half, area);
}

// As src/tensor/cuda/nn.cpp's layernorm_forward and layernorm_backward.
template <class T>
void layernorm(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd, const T* gy, T* gx,
               T* gw, T* gb, int64_t N, int64_t C) {
  check(cu::launch_layernorm_forward<T>(x, w, b, eps, y, mean, rstd, N, C), "launch_layernorm_forward");
  if (gx)
    check(cu::launch_layernorm_backward_input<T>(x, w, mean, rstd, gy, gx, N, C),
          "launch_layernorm_backward_input");
  if (!gw && !gb) return;
  const cu::Chunks chunks = cu::split_rows(N, C);
  std::vector<double> pw = scratch<double>(chunks.count * C), pb = scratch<double>(chunks.count * C);
  check(cu::launch_layernorm_backward_params<T>(x, mean, rstd, gy, N, C, chunks, pw.data(), pb.data()),
        "launch_layernorm_backward_params");
  if (gw) check(cu::launch_finish_chunks<T>(pw.data(), chunks, C, 1.0, gw, true), "launch_finish_chunks");
  if (gb) check(cu::launch_finish_chunks<T>(pb.data(), chunks, C, 1.0, gb, true), "launch_finish_chunks");
}

template <class T>
void gelu(const T* x, T* y, const T* gy, T* gx, int64_t n, bool tanh_approx) {
  check(cu::launch_gelu_forward<T>(x, y, n, tanh_approx), "launch_gelu_forward");
  check(cu::launch_gelu_backward<T>(x, gy, gx, n, tanh_approx, true), "launch_gelu_backward");
}

template <class T>
void cross_entropy(const T* logits, const int32_t* targets, int64_t ignore, T* losses, T* lse, const T* gloss,
                   T* glogits, int64_t N, int64_t V) {
  check(cu::launch_cross_entropy_forward<T>(logits, V, targets, ignore, losses, lse, N, V),
        "launch_cross_entropy_forward");
  check(cu::launch_cross_entropy_backward<T>(logits, V, targets, lse, gloss, ignore, glogits, V, N, V, true),
        "launch_cross_entropy_backward");
}

// As src/tensor/cuda/embedding.cpp's embedding_forward and embedding_backward.
template <class T>
void embedding(const T* weight, const int32_t* ids, T* out, const T* gout, T* gweight, int64_t N, int64_t C,
               int64_t V) {
  check(cu::launch_embedding_forward<T>(weight, ids, out, N, C, V), "launch_embedding_forward");
  const size_t bytes = cu::embedding_backward_scratch_bytes(N, V);
  std::vector<double> area = scratch<double>(static_cast<int64_t>((bytes + 7) / 8));  // 8-byte aligned
  check(cu::launch_embedding_backward<T>(ids, gout, gweight, N, C, V, area.data(), bytes),
        "launch_embedding_backward");
}

template <class T>
void sink_gate(const T* probs, const uint8_t* key, double tau, double fraction, T* keep, int64_t B,
               int64_t NH, int64_t n) {
  check(cu::launch_sink_gate<T>(probs, key, tau, fraction, keep, B, NH, n), "launch_sink_gate");
}

// As src/tensor/cuda/rope.cpp: the table of the power of two at or above offset + n positions.
template <class T>
void rope(const T* x, double base, bool inverse, T* y, int64_t rows, int64_t n, int64_t hs, int64_t offset) {
  std::vector<double> cs, sn;
  rope_table(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(offset + n))), hs, base, cs, sn);
  const int64_t first = offset * (hs / 2);
  check(cu::launch_rope<T>(x, cs.data() + first, sn.data() + first, inverse, y, rows, n, hs), "launch_rope");
}

// As src/tensor/cuda/random.cpp.
template <class T>
void random_and_dropout(T* fill, bool normal, double a, double b, const T* x, double p, T* y, uint8_t* mask,
                        const T* gy, T* gx, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset) {
  const cu::PhiloxKey key{seed, stream, offset};
  check(cu::launch_fill_random<T>(fill, n, normal, a, b, key), "launch_fill_random");
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  check(cu::launch_dropout_forward<T>(x, static_cast<float>(p), scale, key, y, mask, n),
        "launch_dropout_forward");
  check(cu::launch_dropout_backward<T>(gy, mask, scale, gx, n, true), "launch_dropout_backward");
}

template <class T>
void binary(int op, const T* a, const T* b, T* out, int dims, const int64_t* size, const int64_t* a_strides,
            const int64_t* b_strides, const int64_t* out_strides) {
  cu::Indexer<3> ix;
  ix.dims = dims;
  int64_t n = 1;
  for (int d = 0; d < dims; ++d) {
    ix.size[d] = size[d];
    ix.stride[0][d] = out_strides[d], ix.stride[1][d] = a_strides[d], ix.stride[2][d] = b_strides[d];
    n *= size[d];
  }
  check(cu::launch_binary<T>(static_cast<cu::Arith>(op), a, b, out, ix, n), "launch_binary");
}

template <class T>
void unary(int op, const T* x, T* y, const T* gy, T* gx, int64_t n) {
  check(cu::launch_unary<T>(static_cast<cu::Unary>(op), x, y, n), "launch_unary");
  check(cu::launch_unary_backward<T>(static_cast<cu::Unary>(op), x, y, gy, gx, n), "launch_unary_backward");
}

void bf16_round_trip(const float* x, uint16_t* bits, float* back, int64_t n) {
  check(cu::launch_to_bf16(x, bits, n), "launch_to_bf16");
  check(cu::launch_from_bf16(bits, back, n), "launch_from_bf16");
}

template <class T>
void fill_copy(T* out, const int64_t* out_strides, T value, const T* src, const int64_t* src_strides, T* dst,
               const int64_t* dst_strides, bool accumulate, int dims, const int64_t* size) {
  cu::Indexer<1> fix;
  cu::Indexer<2> cix;
  fix.dims = cix.dims = dims;
  int64_t n = 1;
  for (int d = 0; d < dims; ++d) {
    fix.size[d] = cix.size[d] = size[d];
    fix.stride[0][d] = out_strides[d];
    cix.stride[0][d] = dst_strides[d], cix.stride[1][d] = src_strides[d];
    n *= size[d];
  }
  check(cu::launch_fill<T>(out, fix, n, value), "launch_fill");
  check(cu::launch_copy<T>(src, dst, cix, n, accumulate), "launch_copy");
}

void casts(const double* x, float* to_f32, const int32_t* ids, double* to_f64, int64_t n) {
  check(cu::launch_cast<double, float>(x, to_f32, n), "launch_cast");
  check(cu::launch_cast<int32_t, double>(ids, to_f64, n), "launch_cast");
}

template <class T>
void axpby(const T* x, T alpha, T* y, T beta, int64_t n) {
  check(cu::launch_axpby<T>(x, alpha, y, beta, beta == T(0), n), "launch_axpby");
}

// As src/tensor/cuda/reduce.cpp's reduce_sum_to for src (A, R, Bd) and dst (A, 1, Bd).
template <class T>
void reduce_middle(const T* src, T* dst, int64_t A, int64_t R, int64_t Bd, double alpha) {
  cu::Indexer<1> kept, reduced;
  kept.dims = 2, kept.size[0] = A, kept.size[1] = Bd, kept.stride[0][0] = R * Bd, kept.stride[0][1] = 1;
  reduced.dims = 1, reduced.size[0] = R, reduced.stride[0][0] = Bd;
  const int64_t O = A * Bd;
  const cu::Chunks chunks = cu::split_rows(R, O);
  std::vector<double> partial = scratch<double>(chunks.count * O);
  check(cu::launch_sum_chunks<T>(src, kept, reduced, O, R, chunks, partial.data()), "launch_sum_chunks");
  check(cu::launch_finish_chunks<T>(partial.data(), chunks, O, alpha, dst, true), "launch_finish_chunks");
}

// As src/tensor/cuda/optim.cpp's multi_sum_squares and multi_adamw_step for one launch each.
template <class T>
void multi_optim(int count, T* const* p, T* const* g, T* const* m, T* const* v, const int64_t* n,
                 const AdamWHyper* coeffs, const int* coeff_of, double grad_scale, double* sums) {
  auto blocks = [](int64_t k) {
    return static_cast<int32_t>(std::max<int64_t>(1, (k + cu::kMultiChunk - 1) / cu::kMultiChunk));
  };
  cu::MultiSquares<T> squares;
  cu::MultiAdamW<T> list;
  squares.first_block[0] = list.first_block[0] = 0;
  int used = 0;
  for (int i = 0; i < count; ++i) {
    squares.x[i] = p[i], squares.n[i] = n[i];
    squares.first_block[i + 1] = squares.first_block[i] + blocks(n[i]);
    list.p[i] = p[i], list.g[i] = g[i], list.m[i] = m[i], list.v[i] = v[i], list.n[i] = n[i];
    list.first_block[i + 1] = list.first_block[i] + blocks(n[i]);
    list.coeff[i] = static_cast<uint8_t>(coeff_of[i]);
    used = std::max(used, coeff_of[i] + 1);
  }
  squares.count = list.count = count;
  for (int c = 0; c < used; ++c) {
    const AdamWHyper& h = coeffs[c];
    list.coeffs[c] = formula::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  }
  list.grad_scale = grad_scale;
  std::vector<double> partial = scratch<double>(squares.first_block[count]);
  check(cu::launch_multi_sum_squares<T>(squares, partial.data(), sums), "launch_multi_sum_squares");
  check(cu::launch_multi_adamw<T>(list), "launch_multi_adamw");
}

template <class T>
void entropy_reg(const T* q, const T* k, const uint8_t* key, bool causal, const T* theta, double gamma,
                 T* penalty, double* delta, double* active, const T* gpenalty, T* gq, T* gk, T* gtheta,
                 int64_t B, int64_t NH, int64_t n, int64_t hs) {
  cu::EntropyRegDims d;
  d.B = B, d.NH = NH, d.T = n, d.HS = hs, d.causal = causal;
  d.scale = 1.0 / std::sqrt(static_cast<double>(hs));
  d.logT = std::log(static_cast<double>(n));
  std::vector<double> stats = scratch<double>(3 * B * NH * n), part = scratch<double>(B * NH),
                      coef = scratch<double>(NH);
  check(cu::launch_entropy_row_stats<T>(q, k, key, d, stats.data()), "launch_entropy_row_stats");
  check(
      cu::launch_entropy_penalty<T>(stats.data(), theta, key, d, gamma, part.data(), penalty, delta, active),
      "launch_entropy_penalty");
  check(cu::launch_entropy_coefs<T>(gpenalty, delta, active, key, d, coef.data(), gtheta),
        "launch_entropy_coefs");
  check(cu::launch_entropy_backward<T>(q, k, key, d, stats.data(), coef.data(), gq, gk),
        "launch_entropy_backward");
}

template <class T>
void eigen_reg(const T* wq, const T* wk, T* var, double* trace, const T* gvar, T* gwq, T* gwk, int64_t NH,
               int64_t hs, int64_t C) {
  std::vector<double> m = scratch<double>(NH * hs * hs);
  check(cu::launch_qk_products<T>(wq, wk, NH, hs, C, m.data()), "launch_qk_products");
  check(cu::launch_qk_eigen_variance<T>(m.data(), NH, hs, var, trace), "launch_qk_eigen_variance");
  check(cu::launch_qk_eigen_backward<T>(wq, wk, m.data(), trace, gvar, NH, hs, C, gwq, gwk),
        "launch_qk_eigen_backward");
}

#define SAOBP_EMU_ROWS(T)                                                                                    \
  template void layernorm<T>(const T*, const T*, const T*, double, T*, T*, T*, const T*, T*, T*, T*,         \
                             int64_t, int64_t);                                                              \
  template void gelu<T>(const T*, T*, const T*, T*, int64_t, bool);                                          \
  template void cross_entropy<T>(const T*, const int32_t*, int64_t, T*, T*, const T*, T*, int64_t, int64_t); \
  template void embedding<T>(const T*, const int32_t*, T*, const T*, T*, int64_t, int64_t, int64_t);         \
  template void sink_gate<T>(const T*, const uint8_t*, double, double, T*, int64_t, int64_t, int64_t);       \
  template void rope<T>(const T*, double, bool, T*, int64_t, int64_t, int64_t, int64_t);                     \
  template void random_and_dropout<T>(T*, bool, double, double, const T*, double, T*, uint8_t*, const T*,    \
                                      T*, int64_t, uint64_t, uint64_t, uint64_t);                            \
  template void binary<T>(int, const T*, const T*, T*, int, const int64_t*, const int64_t*, const int64_t*,  \
                          const int64_t*);                                                                   \
  template void unary<T>(int, const T*, T*, const T*, T*, int64_t);                                          \
  template void fill_copy<T>(T*, const int64_t*, T, const T*, const int64_t*, T*, const int64_t*, bool, int, \
                             const int64_t*);                                                                \
  template void axpby<T>(const T*, T, T*, T, int64_t);                                                       \
  template void reduce_middle<T>(const T*, T*, int64_t, int64_t, int64_t, double);                           \
  template void multi_optim<T>(int, T* const*, T* const*, T* const*, T* const*, const int64_t*,              \
                               const AdamWHyper*, const int*, double, double*);                              \
  template void entropy_reg<T>(const T*, const T*, const uint8_t*, bool, const T*, double, T*, double*,      \
                               double*, const T*, T*, T*, T*, int64_t, int64_t, int64_t, int64_t);           \
  template void eigen_reg<T>(const T*, const T*, T*, double*, const T*, T*, T*, int64_t, int64_t, int64_t);
SAOBP_EMU_ROWS(float)
SAOBP_EMU_ROWS(double)

template void tiled<float>(const TiledCall<float>&);
template void tiled<double>(const TiledCall<double>&);
template void maps<float>(const MapsCall<float>&);
template void maps<double>(const MapsCall<double>&);

}  // namespace saobp::emu_bridge
