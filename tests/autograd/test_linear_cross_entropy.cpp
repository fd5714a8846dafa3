// linear_cross_entropy, the LM heads' decoder and loss in one node (src/autograd/functions_linalg.cpp),
// and the two kernel forms it rests on: a GEMM whose 2-D operands are the first columns of a wider
// buffer (rows further apart), and the cross-entropy over such rows, whose backward may write its
// gradient in bf16. On the CPU the node must give the bits of cross_entropy(linear(...)); on a GPU,
// where its logits' rows are padded to a multiple of 64, the CPU's values to f32 accuracy and its
// own bits twice.
#include <cstdlib>

#include "autograd/ops.h"
#include "support.h"
#include "tensor/device_info.h"

using namespace saobp;
using saobp::test::bitwise_equal;
using saobp::test::ids;
using saobp::test::randn;
using saobp::test::values;

namespace {

// The first `cols` columns of a fresh (rows, cols + pad) buffer holding t's values (pad columns NaN,
// so a kernel that reads them shows it).
Tensor padded_copy(const Tensor& t, int64_t pad) {
  const bool half = t.dtype() == DType::bf16;  // NaN-padded in f32, then all of it rounded (exact for t)
  const Tensor src = half ? t.to(DType::f32) : t;
  Tensor buf = Tensor::full({t.size(0), t.size(1) + pad}, std::nan(""), src.dtype(), t.device());
  Tensor view = buf.slice(1, 0, t.size(1));
  kern::copy(src, view, false);
  return half ? buf.to(DType::bf16).slice(1, 0, t.size(1)) : view;
}

struct Head {
  bool bias, weight_learns;
  GemmInputs in;
};

struct Out {
  Tensor loss, gx, gw, gb;
};

// The loss and gradients of one head call, fused (in chunks of `chunk` rows, 0: automatic) or as
// the two ops, the loss scaled by `seed` before the backward. The weight also feeds an embedding
// lookup first (the tied word embeddings), so its gradient accumulates.
Out run_head(const Head& h, bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0,
             const Tensor& tg, const Tensor& lookup, Device d, int64_t chunk = 0, double seed = 1.0) {
  Var x(x0.to(d), true), w(w0.to(d), h.weight_learns), b = h.bias ? Var(b0.to(d), true) : Var();
  Var emb = h.weight_learns ? embedding(w, lookup.to(d)) : Var();
  Var xin = h.weight_learns ? add(x, scale(mean(emb), 0.25)) : x;
  const Var loss = fused ? linear_cross_entropy(xin, w, b, tg, -100, h.in, chunk)
                         : cross_entropy(linear(xin, w, b, h.in), tg, -100);
  (seed == 1.0 ? loss : scale(loss, seed)).backward();
  const auto host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu()) : Tensor(); };
  return {host(loss.data()), host(x.grad()), h.weight_learns ? host(w.grad()) : Tensor(),
          h.bias ? host(b.grad()) : Tensor()};
}

const Head kHeads[] = {{false, true, GemmInputs::f32},  {true, true, GemmInputs::f32},
                       {false, true, GemmInputs::bf16}, {true, true, GemmInputs::bf16},
                       {true, false, GemmInputs::bf16}, {false, false, GemmInputs::f32}};

}  // namespace

TEST_CASE("gemm with operands whose rows are apart: the bits of the contiguous product", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(dtype_name(dt) << " ta " << ta << " tb " << tb);
        const int64_t M = 37, N = 29, K = 41;
        const Tensor a = randn(ta ? Shape{K, M} : Shape{M, K}, 501, dt),
                     b = randn(tb ? Shape{N, K} : Shape{K, N}, 502, dt);
        const Tensor c0 = randn({M, N}, 503, dt);
        Tensor want = c0.clone();
        kern::gemm(a, ta, b, tb, want, 0.5, 1.0);
        Tensor got = padded_copy(c0, 11);
        kern::gemm(padded_copy(a, 3), ta, padded_copy(b, 64), tb, got, 0.5, 1.0);
        CHECK(bitwise_equal(want, got.contiguous()));
        // beta = 0 does not read c (its NaN padding and all).
        Tensor fresh = padded_copy(Tensor::full({M, N}, std::nan(""), dt), 5);
        kern::gemm(padded_copy(a, 1), ta, b, tb, fresh, 1.0, 0.0);
        Tensor plain = Tensor::empty({M, N}, dt);
        kern::gemm(a, ta, b, tb, plain, 1.0, 0.0);
        CHECK(bitwise_equal(plain, fresh.contiguous()));
      }
  // bf16 operands with rows apart: the widened product's bits.
  const Tensor a = randn({9, 24}, 504, DType::f32).to(DType::bf16),
               b = randn({24, 10}, 505, DType::f32).to(DType::bf16);
  Tensor want = Tensor::empty({9, 10}, DType::f32), got = padded_copy(Tensor::zeros({9, 10}, DType::f32), 6);
  kern::gemm(a, false, b, false, want, 1.0, 0.0);
  kern::gemm(padded_copy(a, 8), false, padded_copy(b, 8), false, got, 1.0, 0.0);
  CHECK(bitwise_equal(want, got.contiguous()));
  // Only plain gemm takes them; a batched or fused-epilogue product needs contiguous operands.
  Tensor c = Tensor::empty({9, 10}, DType::f32);
  CHECK_ERROR(kern::gemm_bias(padded_copy(randn({9, 24}, 506, DType::f32), 2), false,
                              randn({10, 24}, 507, DType::f32), true, Tensor::zeros({10}, DType::f32), c),
              Catch::Contains("contiguous"));
  CHECK_ERROR(kern::gemm(randn({2, 9, 24}, 508, DType::f32).transpose(1, 2), false,
                         randn({2, 9, 10}, 509, DType::f32), false, c, 1.0, 0.0),
              Catch::Contains("contiguous"));
}

TEST_CASE("cross-entropy over rows apart, and its gradient written in bf16: the contiguous bits",
          "[kernels]") {
  const int64_t N = 7, V = 45;
  const Tensor logits = randn({N, V}, 511, DType::f32, 3.0), lpad = padded_copy(logits, 19);
  const Tensor tg = ids({3, -100, 0, 44, 7, -100, 12}, {N}), gloss = randn({N}, 512, DType::f32);
  Tensor loss = Tensor::empty({N}, DType::f32), lse = Tensor::empty({N}, DType::f32);
  Tensor loss_p = Tensor::empty({N}, DType::f32), lse_p = Tensor::empty({N}, DType::f32);
  kern::cross_entropy_forward(logits, tg, -100, loss, lse);
  kern::cross_entropy_forward(lpad, tg, -100, loss_p, lse_p);
  CHECK(bitwise_equal(loss, loss_p));
  CHECK(bitwise_equal(lse, lse_p));
  Tensor g = Tensor::empty({N, V}, DType::f32);
  kern::cross_entropy_backward(logits, tg, lse, gloss, -100, g, false);
  Tensor gp = padded_copy(Tensor::zeros({N, V}, DType::f32), 3);
  kern::cross_entropy_backward(lpad, tg, lse, gloss, -100, gp, false);
  CHECK(bitwise_equal(g, gp.contiguous()));
  // In bf16: each f32 value rounded once, ignored rows 0.
  Tensor gb = Tensor::empty({N, V + 5}, DType::bf16).slice(1, 0, V);
  kern::cross_entropy_backward(lpad, tg, lse, gloss, -100, gb, false);
  CHECK(bitwise_equal(g.to(DType::bf16), gb.contiguous()));
  CHECK_ERROR(kern::cross_entropy_backward(logits, tg, lse, gloss, -100, gb, true),
              Catch::Contains("written, not accumulated"));
  Tensor g64 = Tensor::empty({N, V}, DType::bf16);
  CHECK_ERROR(kern::cross_entropy_backward(logits.to(DType::f64), tg, lse.to(DType::f64),
                                           gloss.to(DType::f64), -100, g64, false),
              Catch::Contains("logits"));
  // Rows not evenly apart are refused by name.
  Tensor loss3 = Tensor::empty({V}, DType::f32), lse3 = Tensor::empty({V}, DType::f32);
  CHECK_ERROR(kern::cross_entropy_forward(logits.transpose(0, 1), ids(std::vector<int32_t>(V, 0), {V}), -100,
                                          loss3, lse3),
              Catch::Contains("logits must be contiguous or 2-D with rows evenly apart"));
}

TEST_CASE("linear_cross_entropy gives the bits of cross_entropy(linear(...)) on the CPU",
          "[autograd][bf16]") {
  const int64_t IN = 24, V = 53;
  const Tensor x = randn({2, 5, IN}, 521, DType::f32), w = randn({V, IN}, 522, DType::f32, 0.3);
  const Tensor b = randn({V}, 523, DType::f32), lookup = ids({1, 52, 7, 7}, {4});
  const Tensor tg = ids({3, -100, 0, 52, 7, -100, 12, 12, 40, 1}, {2, 5});
  for (const Head& h : kHeads) {
    INFO("bias " << h.bias << " weight learns " << h.weight_learns << " bf16 " << (h.in == GemmInputs::bf16));
    const Out f = run_head(h, true, x, w, b, tg, lookup, Device::cpu());
    const Out c = run_head(h, false, x, w, b, tg, lookup, Device::cpu());
    CHECK(bitwise_equal(f.loss, c.loss));
    CHECK(bitwise_equal(f.gx, c.gx));
    if (h.weight_learns) CHECK(bitwise_equal(f.gw, c.gw));
    if (h.bias) CHECK(bitwise_equal(f.gb, c.gb));
  }
  // In chunks of 512 rows (three here, the last of 276), and under an incoming gradient of 1/4:
  // the bits again, the loss summed over all rows at once and ∂W over the chunks in the depth
  // blocks of one product. The bias gradient adds each chunk's rounded sum: within a rounding.
  // An incoming gradient of 1/3 scales the gradients after their products: within roundings.
  const int64_t N = 1300;
  const Tensor xl = randn({N, IN}, 526, DType::f32), lookup2 = ids({5, 5, 30}, {3});
  std::vector<int32_t> tl(static_cast<size_t>(N));
  for (size_t i = 0; i < tl.size(); ++i) tl[i] = i % 9 == 4 ? -100 : static_cast<int32_t>((i * 31) % V);
  const Tensor tgl = ids(tl, {N});
  for (const Head& h : kHeads) {
    if (h.in == GemmInputs::bf16) continue;  // the CPU trains in f32
    for (double seed : {1.0, 0.25, 1.0 / 3.0}) {
      INFO("bias " << h.bias << " weight learns " << h.weight_learns << " seed " << seed);
      const Out f = run_head(h, true, xl, w, b, tgl, lookup2, Device::cpu(), 512, seed);
      const Out c = run_head(h, false, xl, w, b, tgl, lookup2, Device::cpu(), 0, seed);
      CHECK(bitwise_equal(f.loss, c.loss));
      const bool exact = seed != 1.0 / 3.0;
      CHECK(
          (exact ? bitwise_equal(f.gx, c.gx) : saobp::test::max_abs_diff(values(f.gx), values(c.gx)) < 1e-7));
      if (h.weight_learns)
        CHECK((exact ? bitwise_equal(f.gw, c.gw)
                     : saobp::test::max_abs_diff(values(f.gw), values(c.gw)) < 1e-7));
      if (h.bias) CHECK(saobp::test::max_abs_diff(values(f.gb), values(c.gb)) < 1e-7);
    }
  }
  CHECK_ERROR(linear_cross_entropy(Var(xl, true), Var(w), Var(), tgl, -100, GemmInputs::f32, 500),
              Catch::Contains("chunk rows must be 0 (automatic) or a multiple of 512, got 500"));
  // Every row ignored: a loss of 0 and no gradient, as the two ops give.
  Var x0(x.clone(), true), w0(w.clone(), true);
  const Var none = linear_cross_entropy(x0, w0, Var(), ids(std::vector<int32_t>(10, -100), {2, 5}));
  CHECK(none.data().item() == 0.0);
  none.backward();
  CHECK_FALSE(x0.grad().defined());
  // Refusals, by name.
  const Var xv(x), wv(w);
  CHECK_ERROR(linear_cross_entropy(xv, wv, Var(), ids({1, 2}, {2})),
              Catch::Contains("[linear_cross_entropy]") && Catch::Contains("2 targets for 10 rows"));
  CHECK_ERROR(
      linear_cross_entropy(Var(x.to(DType::f64)), Var(w.to(DType::f64)), Var(), tg, -100, GemmInputs::bf16),
      Catch::Contains("bf16 GEMM inputs need f32"));
  CHECK_ERROR(linear_cross_entropy(xv, Var(randn({V, IN + 1}, 524, DType::f32)), Var(), tg),
              Catch::Contains("does not match weight"));
  CHECK_ERROR(linear_cross_entropy(xv, wv, Var(randn({V + 1}, 525, DType::f32)), tg),
              Catch::Contains("bias"));
}

TEST_CASE("gradcheck linear_cross_entropy with ignored rows", "[gradcheck]") {
  const Tensor tg = ids({1, -100, 4, 0, -100, 2}, {2, 3});
  saobp::test::require_gradcheck(
      [&](const std::vector<Var>& v) { return linear_cross_entropy(v[0], v[1], v[2], tg); },
      {randn({2, 3, 4}, 531, DType::f64), randn({6, 4}, 532, DType::f64, 0.5), randn({6}, 533, DType::f64)});
  saobp::test::require_gradcheck(
      [&](const std::vector<Var>& v) { return linear_cross_entropy(v[0], v[1], Var(), tg); },
      {randn({6, 4}, 534, DType::f64), randn({5, 4}, 535, DType::f64, 0.5)});
}

TEST_CASE("cuda linear_cross_entropy: padded logits rows give the CPU's values, the same bits twice",
          "[cuda][bf16]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const Device gpu = Device::cuda();
  for (int64_t V : {1000, 1001, 1024})  // padded to 1024, 1024 (from an odd width) and not at all
    for (int64_t chunk : {0, 512}) {    // one chunk of 1320 rows; three
      const int64_t IN = 64;
      const Tensor x = randn({3, 440, IN}, 541, DType::f32), w = randn({V, IN}, 542, DType::f32, 0.2);
      const Tensor b = randn({V}, 543, DType::f32), lookup = ids({1, 999, 7, 7}, {4});
      std::vector<int32_t> t(1320);
      for (size_t i = 0; i < t.size(); ++i) t[i] = i % 7 == 3 ? -100 : static_cast<int32_t>((i * 37) % V);
      const Tensor tg = ids(t, {3, 440});
      for (const Head& h : kHeads) {
        INFO("V " << V << " chunk " << chunk << " bias " << h.bias << " weight learns " << h.weight_learns
                  << " bf16 " << (h.in == GemmInputs::bf16));
        const Out cpu = run_head(h, false, x, w, b, tg, lookup, Device::cpu());
        const Out g1 = run_head(h, true, x, w, b, tg, lookup, gpu, chunk),
                  g2 = run_head(h, true, x, w, b, tg, lookup, gpu, chunk);
        // bf16 rounds the logits' gradient: an entry near a rounding boundary may go either way
        // under the GPU's other order of sums (docs/precision.md), so its tolerance is bf16's.
        const double tol = h.in == GemmInputs::bf16 ? 2e-3 : 2e-5;
        const auto close = [tol](const Tensor& a, const Tensor& c) {
          double num = 0, den = 0;
          const auto av = saobp::test::values(a), cv = saobp::test::values(c);
          for (size_t i = 0; i < av.size(); ++i)
            num += (av[i] - cv[i]) * (av[i] - cv[i]), den += cv[i] * cv[i];
          return std::sqrt(num) <= tol * std::sqrt(den) + 1e-30;
        };
        CHECK(close(g1.loss, cpu.loss));
        CHECK(close(g1.gx, cpu.gx));
        if (h.weight_learns) CHECK(close(g1.gw, cpu.gw));
        if (h.bias) CHECK(close(g1.gb, cpu.gb));
        CHECK(bitwise_equal(g1.loss, g2.loss));
        CHECK(bitwise_equal(g1.gx, g2.gx));
        if (h.weight_learns) CHECK(bitwise_equal(g1.gw, g2.gw));
        if (h.bias) CHECK(bitwise_equal(g1.gb, g2.gb));
      }
    }
}
