// saobp::cuda attention_tiled_forward / attention_tiled_backward: the host halves (the Potts c of
// each head, scratch from the caching allocator) of the passes of tiled.cu.
// CPU twin: src/attention/cpu/tiled.cpp (same algorithm, same saved lse and colsum layout).
// tiled.cu's header says how far it has been checked and what it is not (fast).
#include <algorithm>

#include "attention/backend.h"
#include "attention/cuda/launch.h"
#include "attention/cuda/potts.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {

// The launch's geometry and inputs; the scratch and the outputs are set by the caller.
template <class T>
TiledArgs<T> tiled_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                        const AttnParams& p, const AttnDims& d, int S) {
  TiledArgs<T> a;
  a.q = q.data<T>(), a.k = k.data<T>(), a.v = v.data<T>();
  a.key = key_mask.defined() ? key_mask.data<uint8_t>() : nullptr;
  a.NH = d.NH, a.n = d.T, a.hs = d.HS, a.tiles = d.B * d.NH;
  a.S = S;
  a.causal = p.causal;
  a.all = !p.causal || p.leak;
  a.scale = p.scale;
  a.nb = tiled_blocks(d.T);
  a.staged = env_switch_on("SAOBP_TILED_STAGED");
  return a;
}

// Scratch of `per_head` elements for each of `tiles` heads (at least one element).
Tensor scratch(int64_t tiles, int64_t per_head, DType dt, Device device) {
  return Tensor::empty({std::max<int64_t>(tiles * per_head, 1)}, dt, device);
}

// The scratch every pass shares (launch.h, TiledArgs): scale·Q, the thread blocks' tiles and the
// blocks' column parts; the caller keeps the tensors until the passes are queued (one stream:
// the caching allocator hands their memory only to work queued after them).
struct Scratch {
  Tensor qs, work, cells;
};
template <class T>
Scratch shared_scratch(TiledArgs<T>& a, DType dt, Device device) {
  Scratch s{scratch(a.tiles, a.n * a.hs, dt, device),
            scratch(a.tiles * a.nb, tiled_block_elems(a.S), dt, device),
            scratch(a.tiles, tiled_cells_per_head(a.n, a.S, a.all), DType::f64, device)};
  a.qs = s.qs.data<T>(), a.work = s.work.data<T>(), a.cells = s.cells.data<double>();
  return s;
}

template <class T>
void forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
               const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse, Tensor& colsum,
               const AttnDims& d) {
  const char* op = "attention_tiled";
  const int S = uses_lambda(p.variant) ? p.steps : 0;
  TiledArgs<T> a = tiled_args<T>(q, k, v, key_mask, p, d, S);
  Potts potts;
  if (S > 0) {  // colsum is (S,B,NH,T): check_attention_tiled asks for it
    potts = potts_params<T>(lambda, p.variant, q.device(), op);
    a.c = potts.c.data<double>();
    a.colsum = colsum.data<T>();
  }
  a.lse = lse.data<T>();
  const Scratch s = shared_scratch(a, q.dtype(), q.device());
  check(launch_attention_tiled_forward<T>(a, out.data<T>()), op);
}

template <class T>
void backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv, Tensor& glambda,
                const AttnDims& d) {
  const char* op = "attention_tiled_backward";
  const bool bp = uses_lambda(p.variant);
  const bool wants_lambda = bp && glambda.defined();
  if (!gq.defined() && !gk.defined() && !gv.defined() && !wants_lambda) return;
  const int S = bp ? p.steps : 0;
  TiledArgs<T> a = tiled_args<T>(q, k, v, key_mask, p, d, S);
  Potts potts;
  if (S > 0) {
    potts = potts_params<T>(lambda, p.variant, q.device(), op);
    a.c = potts.c.data<double>();
    a.colsum = colsum.data<T>();  // read only here
  }
  a.lse = lse.data<T>();  // read only here
  a.out = out.data<T>(), a.gout = gout.data<T>();
  a.gq = gq.defined() ? gq.data<T>() : nullptr;
  a.gk = gk.defined() ? gk.data<T>() : nullptr;
  a.gv = gv.defined() ? gv.data<T>() : nullptr;
  const Scratch s = shared_scratch(a, q.dtype(), q.device());
  const Tensor rho = scratch(a.tiles, (S + 1) * d.T, DType::f64, q.device());
  const Tensor E = scratch(a.tiles, S * d.T, DType::f64, q.device());
  const Tensor R = scratch(a.all ? 0 : a.tiles, a.nb * S * d.T, DType::f64, q.device());
  const Tensor dc = scratch(a.tiles, a.nb, DType::f64, q.device());
  a.rho = rho.data<double>(), a.E = E.data<double>(), a.R = R.data<double>(), a.dc = dc.data<double>();
  check(launch_attention_tiled_backward<T>(a), op);
  // dλ_h += Σ_b (∂L/∂c of head (b, h), its query blocks' parts in order) · dc/dλ_h, over b in order.
  if (wants_lambda)
    check(launch_lambda_grad<T>(dc.data<double>(), potts.dc_dlambda.data<double>(), d.B, d.NH, a.nb,
                                glambda.data<T>()),
          op);
}

}  // namespace

void attention_tiled_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                             const Tensor& lambda, const AttnParams& p, Tensor& out, Tensor& lse,
                             Tensor& colsum) {
  use_device_of(out, "attention_tiled");
  const AttnDims d = attn_dims(q);
  if (d.B * d.NH * d.T == 0) return;
  dispatch_float(q.dtype(), "attention_tiled", [&](auto tag) {
    forward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, lse, colsum, d);
  });
}

void attention_tiled_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                              const Tensor& lambda, const AttnParams& p, const Tensor& out, const Tensor& lse,
                              const Tensor& colsum, const Tensor& gout, Tensor& gq, Tensor& gk, Tensor& gv,
                              Tensor& glambda) {
  use_device_of(gout, "attention_tiled_backward");
  const AttnDims d = attn_dims(q);
  if (d.B * d.NH * d.T == 0) return;
  dispatch_float(q.dtype(), "attention_tiled_backward", [&](auto tag) {
    backward_t<decltype(tag)>(q, k, v, key_mask, lambda, p, out, lse, colsum, gout, gq, gk, gv, glambda, d);
  });
}

}  // namespace saobp::cuda
