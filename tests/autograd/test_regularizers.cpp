// The baseline regularizer ops (src/autograd/functions_regularizers.cpp): f64 gradchecks, the
// fused op against a composite reference built from ops.h primitives (values and gradients),
// Eigen-Reg against the eigenvalues of the paper's C x C matrix W_Q W_Kᵀ, thread-count
// independence, and bad input.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <complex>

#include "autograd/regularizers.h"
#include "support.h"

using namespace saobp;
using saobp::test::randn;
using saobp::test::require_gradcheck;
using saobp::test::values;
using VV = std::vector<Var>;

namespace {

// (B,1,T,T) u8: key j allowed for query i (key mask and, when causal, j <= i).
Tensor allowed_mask(const Tensor& km, int64_t B, int64_t T, bool causal) {
  std::vector<uint8_t> m(static_cast<size_t>(B * T * T));
  const std::vector<uint8_t> k = km.defined() ? km.to_vector<uint8_t>() : std::vector<uint8_t>(B * T, 1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        m[static_cast<size_t>((b * T + i) * T + j)] =
            k[static_cast<size_t>(b * T + j)] && (!causal || j <= i);
  return Tensor::from_vector(m, {B, 1, T, T});
}

// E_h of entropy_reg_penalty composed from primitives: masked softmax and log_softmax, a row
// mask of the real query tokens, sums. Returns (NH).
Var composite_entropy(const Var& q, const Var& k, const Tensor& km, bool causal) {
  const int64_t B = q.size(0), T = q.size(2), HS = q.size(3);
  const Tensor allowed = allowed_mask(km, B, T, causal);
  const Var s = scale(matmul(q, transpose(k, -1, -2)), 1.0 / std::sqrt(static_cast<double>(HS)));
  const Var ent = scale(sum(mul(softmax(s, allowed), log_softmax(s, allowed)), -1), -1.0);  // (B,NH,T)
  std::vector<double> rows(static_cast<size_t>(B * T), 1.0);
  double n = static_cast<double>(B * T);
  if (km.defined()) {
    const std::vector<uint8_t> k8 = km.to_vector<uint8_t>();
    n = 0;
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = k8[i], n += k8[i];
  }
  const Var rm(Tensor::from_vector(rows, {B, 1, T}));
  return scale(sum(sum(mul(ent, rm), 2), 0), 1.0 / n);
}

// The penalty from E: δ = E - θ log T, the active set taken from the values (it is piecewise
// constant, so it carries no gradient).
Var composite_penalty(const Var& e, const Var& theta, int64_t T, double gamma) {
  const double logT = std::log(static_cast<double>(T));
  const Var dev = sub(e, scale(theta, logT));
  std::vector<double> act;
  for (double d : values(dev.data())) act.push_back(std::abs(d) > gamma * logT ? 1.0 : 0.0);
  return mean(mul(mul(dev, dev), Var(Tensor::from_vector(act, {static_cast<int64_t>(act.size())}))));
}

// Per-head variance composed from slice, matmul, transpose, mul, sum.
Var composite_eigen(const Var& wq, const Var& wk, int64_t heads) {
  const int64_t HS = wq.size(0) / heads;
  std::vector<Var> out;
  for (int64_t h = 0; h < heads; ++h) {
    const Var qh = slice(wq, 0, h * HS, (h + 1) * HS), kh = slice(wk, 0, h * HS, (h + 1) * HS);
    const Var m = matmul(kh, transpose(qh, 0, 1));
    const Var t1 = scale(sum(mul(kh, qh)), 1.0 / static_cast<double>(HS));
    const Var t2 = scale(sum(mul(m, transpose(m, 0, 1))), 1.0 / static_cast<double>(HS));
    out.push_back(reshape(sub(t2, mul(t1, t1)), {1}));
  }
  return concat(out, 0);
}

// θ per head: head 0 far below its entropy (active, δ > 0), head 1 far above (active, δ < 0),
// head 2 at its entropy (inactive: δ = 0 inside the margin).
Tensor thetas_around(const Var& q, const Var& k, const Tensor& km, bool causal) {
  const std::vector<double> e = values(composite_entropy(q, k, km, causal).data());
  const double logT = std::log(static_cast<double>(q.size(2)));
  return Tensor::from_vector(std::vector<double>{0.0, 2.0, e[2] / logT}, {3});
}

}  // namespace

TEST_CASE("entropy_reg_penalty: gradcheck and the composite reference", "[gradcheck][regularizer]") {
  const bool causal = GENERATE(false, true);
  const bool padded = GENERATE(false, true);
  const Tensor km =
      padded ? Tensor::from_vector(std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5}) : Tensor();
  INFO("causal " << causal << " padded " << padded);
  const Tensor q = randn({2, 3, 5, 4}, 1), k = randn({2, 3, 5, 4}, 2);
  const Tensor th = thetas_around(Var(q), Var(k), km, causal);
  const double gamma = 0.2;
  require_gradcheck([&](const VV& v) { return entropy_reg_penalty(v[0], v[1], km, causal, v[2], gamma); },
                    {q, k, th});

  // Values and every gradient against the composite, f64.
  auto run = [&](bool fused) {
    Var vq(q.clone(), true), vk(k.clone(), true), vt(th.clone(), true);
    const Var p = fused ? entropy_reg_penalty(vq, vk, km, causal, vt, gamma)
                        : composite_penalty(composite_entropy(vq, vk, km, causal), vt, 5, gamma);
    p.backward();
    return std::vector<std::vector<double>>{values(p.data()), values(vq.grad()), values(vk.grad()),
                                            values(vt.grad())};
  };
  const auto fused = run(true), ref = run(false);
  REQUIRE(fused[0][0] > 0.1);
  for (size_t i = 0; i < fused.size(); ++i) REQUIRE(test::max_abs_diff(fused[i], ref[i]) < 1e-12);
  CHECK(fused[3][2] == 0.0);  // the inactive head's θ gets no gradient
  CHECK(fused[3][0] != 0.0);
}

TEST_CASE("entropy_reg_penalty: zero inside the margin, f32 matches f64, thread-count independent",
          "[regularizer]") {
  const Tensor q = randn({2, 2, 6, 4}, 3), k = randn({2, 2, 6, 4}, 4);
  const Var big(Tensor::from_vector(std::vector<double>{0.0, 0.0}, {2}));
  const Var p = entropy_reg_penalty(Var(q), Var(k), Tensor(), false, big, 0.2);
  // θ = E_h / log T for both heads: δ = 0, no penalty.
  const std::vector<double> e = values(composite_entropy(Var(q), Var(k), Tensor(), false).data());
  const Var at(Tensor::from_vector(std::vector<double>{e[0] / std::log(6.0), e[1] / std::log(6.0)}, {2}));
  CHECK(entropy_reg_penalty(Var(q), Var(k), Tensor(), false, at, 0.2).data().item() == 0.0);
  const double p32 = entropy_reg_penalty(Var(q.to(DType::f32)), Var(k.to(DType::f32)), Tensor(), false,
                                         Var(big.data().to(DType::f32)), 0.2)
                         .data()
                         .item();
  CHECK(std::abs(p32 - p.data().item()) < 1e-5);
  auto grads = [&](int threads) {
    return test::with_threads(threads, [&] {
      Var vq(q.to(DType::f32), true), vk(k.to(DType::f32), true), vt(big.data().to(DType::f32), true);
      entropy_reg_penalty(vq, vk, Tensor(), true, vt, 0.2).backward();
      return test::bytes_of(vq.grad());
    });
  };
  CHECK(grads(1) == grads(2));
}

TEST_CASE("entropy_reg_penalty: bad input is named", "[regularizer]") {
  const Var q(randn({1, 2, 3, 4}, 1)), th(randn({2}, 2));
  CHECK_ERROR(entropy_reg_penalty(q, Var(randn({1, 2, 3, 2}, 3)), Tensor(), false, th, 0.2),
              Catch::Contains("entropy_reg_penalty") && Catch::Contains("same (B,NH,T,HS)"));
  CHECK_ERROR(entropy_reg_penalty(q, q, Tensor(), false, Var(randn({3}, 2)), 0.2), Catch::Contains("theta"));
  CHECK_ERROR(entropy_reg_penalty(q, q, Tensor::zeros({1, 4}, DType::u8), false, th, 0.2),
              Catch::Contains("key_mask"));
}

TEST_CASE("qk_eigen_variance: gradcheck and the composite reference", "[gradcheck][regularizer]") {
  const Tensor wq = randn({6, 5}, 5), wk = randn({6, 5}, 6);
  require_gradcheck([](const VV& v) { return qk_eigen_variance(v[0], v[1], 3); }, {wq, wk});
  require_gradcheck([](const VV& v) { return qk_eigen_variance(v[0], v[1], 2); }, {wq, wk});
  // Weights given as a view (GPT-2's c_attn columns, transposed).
  require_gradcheck(
      [](const VV& v) {
        return qk_eigen_variance(transpose(slice(v[0], 1, 0, 4), 0, 1), transpose(slice(v[0], 1, 4, 8), 0, 1),
                                 2);
      },
      {randn({5, 12}, 7)});
  auto run = [&](bool fused) {
    Var q(wq.clone(), true), k(wk.clone(), true);
    const Var v = fused ? qk_eigen_variance(q, k, 3) : composite_eigen(q, k, 3);
    mean(v).backward();
    return std::vector<std::vector<double>>{values(v.data()), values(q.grad()), values(k.grad())};
  };
  const auto fused = run(true), ref = run(false);
  for (size_t i = 0; i < fused.size(); ++i) REQUIRE(test::max_abs_diff(fused[i], ref[i]) < 1e-12);
}

TEST_CASE(
    "qk_eigen_variance equals the variance of the eigenvalues of K_h Q_hᵀ and of W_Q W_Kᵀ's nonzero ones",
    "[regularizer]") {
  const int64_t NH = 2, HS = 3, C = 5;
  const Tensor wq = randn({NH * HS, C}, 8), wk = randn({NH * HS, C}, 9);
  const std::vector<double> got = values(qk_eigen_variance(Var(wq), Var(wk), NH).data());
  const std::vector<double> q = values(wq), k = values(wk);
  for (int64_t h = 0; h < NH; ++h) {
    // The paper's form: W_Q,h W_K,hᵀ (C x C) with W_Q,h = Q_hᵀ (C x HS); its C - HS extra
    // eigenvalues are zero, the HS others are those of K_h Q_hᵀ.
    Eigen::MatrixXd Qh(HS, C), Kh(HS, C);
    for (int64_t a = 0; a < HS; ++a)
      for (int64_t c = 0; c < C; ++c)
        Qh(a, c) = q[static_cast<size_t>((h * HS + a) * C + c)],
              Kh(a, c) = k[static_cast<size_t>((h * HS + a) * C + c)];
    const Eigen::MatrixXd big = Qh.transpose() * Kh;  // (C,C)
    Eigen::EigenSolver<Eigen::MatrixXd> es(big);
    std::vector<std::complex<double>> ev(es.eigenvalues().data(), es.eigenvalues().data() + C);
    std::sort(ev.begin(), ev.end(), [](auto a, auto b) { return std::abs(a) > std::abs(b); });
    std::complex<double> m1 = 0, m2 = 0;
    for (int64_t i = 0; i < HS; ++i)
      m1 += ev[static_cast<size_t>(i)], m2 += ev[static_cast<size_t>(i)] * ev[static_cast<size_t>(i)];
    for (int64_t i = HS; i < C; ++i) CHECK(std::abs(ev[static_cast<size_t>(i)]) < 1e-9);
    m1 /= static_cast<double>(HS), m2 /= static_cast<double>(HS);
    const std::complex<double> var = m2 - m1 * m1;
    CHECK(std::abs(var.imag()) < 1e-9);  // real even when eigenvalues come in conjugate pairs
    CHECK(std::abs(var.real() - got[static_cast<size_t>(h)]) < 1e-9);
  }
  CHECK_ERROR(qk_eigen_variance(Var(wq), Var(wk), 4), Catch::Contains("do not split into 4 heads"));
}
