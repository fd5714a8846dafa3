// CPU kernels against naive references computed in double: GEMM, reduce_sum_to, binary ops,
// fill/copy/cast/axpby on strided views, and the forwards of the network kernels.
#include <cmath>
#include <limits>

#include "support.h"
#include "tensor/cpu/sgemm.h"
#include "tensor/philox.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::bitwise_equal;
using saobp::test::randn;
using saobp::test::randu;
using saobp::test::values;
using saobp::test::with_threads;

namespace {

// Multi-index <-> flat index of a row-major shape.
std::vector<int64_t> unflatten(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
int64_t flatten(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + idx[d];
  return i;
}

// Value of `v` (logical values of shape `s`) at the broadcast index `idx` of a larger shape.
double bcast_at(const std::vector<double>& v, const Shape& s, const std::vector<int64_t>& idx) {
  const size_t lead = idx.size() - s.size();
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
  return v[static_cast<size_t>(i)];
}

// Relative-to-magnitude comparison: |got - want| <= tol * scale[i] (+ a tiny absolute floor).
void require_close(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& scale, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tol * scale[i] + 1e-300;
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      INFO("element " << i << ": got " << got[i] << " want " << want[i] << " bound " << bound);
      REQUIRE(std::abs(got[i] - want[i]) <= bound);
    }
  }
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double rel, double abs) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = rel * std::abs(want[i]) + abs;
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      INFO("element " << i << ": got " << got[i] << " want " << want[i]);
      REQUIRE(std::abs(got[i] - want[i]) <= bound);
    }
  }
}

// ------------------------------------------------------------------------------------ GEMM

struct GemmCase {
  int64_t Ba, Bb, Bc, M, K, N;
  bool ta, tb;
  double alpha, beta;
};

// c = alpha op(a) op(b) + beta c0 in double; also Σ|alpha op(a)||op(b)| + |beta c0| per element.
void gemm_reference(const GemmCase& g, const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>& c0, std::vector<double>& c, std::vector<double>& mag) {
  c.assign(static_cast<size_t>(g.Bc * g.M * g.N), 0.0);
  mag = c;
  for (int64_t bi = 0; bi < g.Bc; ++bi) {
    const double* A = a.data() + (g.Ba == 1 ? 0 : bi * g.M * g.K);
    const double* B = b.data() + (g.Bb == 1 ? 0 : bi * g.K * g.N);
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < g.K; ++k) {
          const double x = g.ta ? A[k * g.M + i] : A[i * g.K + k];
          const double y = g.tb ? B[j * g.K + k] : B[k * g.N + j];
          s += x * y;
          m += std::abs(x * y);
        }
        const size_t o = static_cast<size_t>((bi * g.M + i) * g.N + j);
        const double old = g.beta == 0 ? 0.0 : g.beta * c0[o];
        c[o] = g.alpha * s + old;
        mag[o] = std::abs(g.alpha) * m + std::abs(old) + 1e-30;
      }
  }
}

void run_gemm_case(const GemmCase& g, DType dt, bool nan_c = false) {
  INFO("Ba " << g.Ba << " Bb " << g.Bb << " Bc " << g.Bc << " M " << g.M << " K " << g.K << " N " << g.N
             << " ta " << g.ta << " tb " << g.tb << " alpha " << g.alpha << " beta " << g.beta << " "
             << dtype_name(dt));
  const Shape as = g.ta ? Shape{g.Ba, g.K, g.M} : Shape{g.Ba, g.M, g.K};
  const Shape bs = g.tb ? Shape{g.Bb, g.N, g.K} : Shape{g.Bb, g.K, g.N};
  const Tensor a = randn(as, 11, dt), b = randn(bs, 12, dt);
  Tensor c = nan_c ? Tensor::full({g.Bc, g.M, g.N}, std::nan(""), dt) : randn({g.Bc, g.M, g.N}, 13, dt);
  const std::vector<double> c0 = values(c);
  std::vector<double> want, mag;
  gemm_reference(g, values(a), values(b), c0, want, mag);
  kern::gemm(a, g.ta, b, g.tb, c, g.alpha, g.beta);
  const double eps = dt == DType::f32 ? 6e-8 : 1.2e-16;
  require_close(values(c), want, mag, 2.0 * eps * static_cast<double>(g.K + 2));
}

}  // namespace

TEST_CASE("gemm matches a double triple loop in all transpose combinations", "[kernels]") {
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {7, 13, 5}, {300, 257, 129}, {1, 64, 33}};
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& [M, K, N] : sizes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) run_gemm_case({1, 1, 1, M, K, N, ta, tb, 1.0, 0.0}, dt);
}

TEST_CASE("gemm with alpha and beta, and beta = 0 ignoring NaN in c", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64}) {
    run_gemm_case({1, 1, 1, 9, 11, 6, false, false, 0.5, -1.5}, dt);
    run_gemm_case({1, 1, 1, 9, 11, 6, true, true, -2.0, 1.0}, dt);
    run_gemm_case({1, 1, 1, 70, 30, 600, false, true, 1.0, 1.0}, dt);  // column tiles
    run_gemm_case({1, 1, 1, 9, 11, 6, false, false, 1.0, 0.0}, dt, /*nan_c=*/true);
    run_gemm_case({1, 1, 1, 300, 20, 40, true, false, 0.25, 0.0}, dt, /*nan_c=*/true);
  }
}

TEST_CASE("batched gemm, with batch-1 broadcast on either side", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        run_gemm_case({3, 3, 3, 5, 7, 4, ta, tb, 1.0, 0.0}, dt);
        run_gemm_case({1, 4, 4, 6, 3, 5, ta, tb, 1.0, 0.0}, dt);
        run_gemm_case({4, 1, 4, 6, 3, 5, ta, tb, 1.0, 1.0}, dt);
        run_gemm_case({5, 5, 5, 33, 17, 9, ta, tb, 0.5, -1.0}, dt);
      }
}

TEST_CASE("f32 gemm across the packing blocks (depth 256, rows 1536, columns 512)", "[kernels]") {
  // Depth blocks 256 + 256 + 88 (the second and third add into c), a row block past 1536 and a
  // column panel past 512, edge tiles on every side, both operand layouts of each side.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      run_gemm_case({1, 1, 1, 1541, 600, 37, ta, tb, 1.0, 0.0}, DType::f32);
      run_gemm_case({1, 1, 1, 29, 300, 1037, ta, tb, 0.5, -0.75}, DType::f32);
      run_gemm_case({1, 1, 1, 25, 513, 45, ta, tb, 1.0, 1.0}, DType::f32, /*nan_c=*/false);
    }
  run_gemm_case({1, 1, 1, 61, 700, 77, false, true, 1.0, 0.0}, DType::f32, /*nan_c=*/true);
}

TEST_CASE("f32 gemm: the bits depend on neither threads, team split, batching nor micro-kernel",
          "[kernels][determinism]") {
  // sgemm.cpp: each element is the same fma chain per depth block whoever computes it.
  struct Case {
    int64_t Bc, M, K, N;
    bool ta, tb;
  };
  const std::vector<Case> cases = {{1, 700, 600, 530, false, true},
                                   {1, 257, 1100, 70, true, false},
                                   {1, 1600, 40, 300, false, false},
                                   {6, 45, 70, 33, false, true},
                                   {5, 64, 300, 50, true, true}};
  for (const Case& k : cases) {
    INFO("Bc " << k.Bc << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << k.ta << " tb " << k.tb);
    const Tensor a = randn(k.ta ? Shape{k.Bc, k.K, k.M} : Shape{k.Bc, k.M, k.K}, 21, DType::f32);
    const Tensor b = randn(k.tb ? Shape{k.Bc, k.N, k.K} : Shape{k.Bc, k.K, k.N}, 22, DType::f32);
    const Tensor c0 = randn({k.Bc, k.M, k.N}, 23, DType::f32);
    auto run = [&](int threads, cpu::SgemmKernel kernel) {
      cpu::sgemm_use_kernel(kernel);
      Tensor c = c0.clone();
      with_threads(threads, [&] { kern::gemm(a, k.ta, b, k.tb, c, 0.75, 1.0); });
      cpu::sgemm_use_kernel(cpu::SgemmKernel::native);
      return c;
    };
    const Tensor ref = run(1, cpu::SgemmKernel::native);
    REQUIRE(saobp::test::all_finite(ref));
    CHECK(bitwise_equal(run(2, cpu::SgemmKernel::native), ref));
    CHECK(bitwise_equal(run(3, cpu::SgemmKernel::native), ref));
    CHECK(bitwise_equal(run(1, cpu::SgemmKernel::portable), ref));
    CHECK(bitwise_equal(run(2, cpu::SgemmKernel::portable), ref));
    // One item at a time on the calling thread (as the attention tiles call it).
    Tensor one = c0.clone();
    const int64_t as = k.M * k.K, bs = k.K * k.N;
    for (int64_t i = 0; i < k.Bc; ++i) {
      const float* ap = a.data<float>() + i * as;
      const float* bp = b.data<float>() + i * bs;
      const cpu::SView av = k.ta ? cpu::SView{ap, 1, k.M} : cpu::SView{ap, k.K, 1};
      const cpu::SView bv = k.tb ? cpu::SView{bp, 1, k.K} : cpu::SView{bp, k.N, 1};
      cpu::sgemm(k.M, k.N, k.K, 0.75f, av, bv, 1.0f, one.data<float>() + i * k.M * k.N, k.N, false);
    }
    CHECK(bitwise_equal(one, ref));
  }
  // One row (M = 1, generation's products) takes a path without packing: each row of a product
  // alone gives the bits of that row inside the product, for both layouts of b, with a bias (c0)
  // and over several depth blocks.
  for (bool tb : {false, true})
    for (const auto& [K, N] : {std::pair<int64_t, int64_t>{600, 530}, {70, 1037}, {257, 9}}) {
      INFO("one row: K " << K << " N " << N << " tb " << tb);
      const Tensor a = randn({5, K}, 24, DType::f32);
      const Tensor b = randn(tb ? Shape{N, K} : Shape{K, N}, 25, DType::f32),
                   bias = randn({N}, 26, DType::f32);
      Tensor all = Tensor::empty({5, N});
      kern::gemm_bias(a, false, b, tb, bias, all);
      for (int threads : {1, 2})
        for (int64_t r : {0, 3, 4}) {
          Tensor row = Tensor::empty({1, N});
          with_threads(threads,
                       [&] { kern::gemm_bias(a.slice(0, r, r + 1).contiguous(), false, b, tb, bias, row); });
          CHECK(bitwise_equal(row, all.slice(0, r, r + 1).contiguous()));
          Tensor scaled = randn({1, N}, 27, DType::f32), scaled_all = all.clone();
          scaled_all.slice(0, r, r + 1).copy_from(scaled);
          with_threads(threads, [&] {
            kern::gemm(a.slice(0, r, r + 1).contiguous(), false, b, tb, scaled, 0.5, -0.25);
          });
          kern::gemm(a, false, b, tb, scaled_all, 0.5, -0.25);  // rows other than r: not compared
          CHECK(bitwise_equal(scaled, scaled_all.slice(0, r, r + 1).contiguous()));
        }
    }
}

TEST_CASE("gemm_bias: the bits of filling c with the bias, then gemm with beta = 1", "[kernels]") {
  // f32 reads the bias in the first depth block's update (sgemm's c0) instead of a filled c;
  // the sums must be those of the definition, whatever the threads and the micro-kernel.
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& k :
         {Case{1541, 600, 37, false, true}, Case{29, 300, 1037, true, false}, Case{25, 513, 45, false, false},
          Case{7, 0, 5, false, true}, Case{64, 1, 3, true, true}}) {
      INFO(dtype_name(dt) << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << k.ta << " tb "
                          << k.tb);
      const Tensor a = randn(k.ta ? Shape{k.K, k.M} : Shape{k.M, k.K}, 31, dt);
      const Tensor b = randn(k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N}, 32, dt);
      const Tensor bias = randn({k.N}, 33, dt);
      Tensor ref = Tensor::empty({k.M, k.N}, dt);
      ref.copy_from(bias.view({1, k.N}).expand({k.M, k.N}));
      kern::gemm(a, k.ta, b, k.tb, ref, 1.0, 1.0);
      for (int threads : {1, 2, 3})
        for (auto kernel : {cpu::SgemmKernel::native, cpu::SgemmKernel::portable}) {
          INFO("threads " << threads << " portable " << (kernel == cpu::SgemmKernel::portable));
          cpu::sgemm_use_kernel(kernel);
          Tensor c = Tensor::full({k.M, k.N}, std::nan(""), dt);  // c's contents are not read
          with_threads(threads, [&] { kern::gemm_bias(a, k.ta, b, k.tb, bias, c); });
          cpu::sgemm_use_kernel(cpu::SgemmKernel::native);
          CHECK(bitwise_equal(c, ref));
        }
    }
  const Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({4, 5});
  Tensor c = Tensor::zeros({3, 5}), c3 = Tensor::zeros({1, 3, 5});
  CHECK_ERROR(kern::gemm_bias(a, false, b, false, Tensor::zeros({4}), c),
              Contains("[gemm_bias]") && Contains("bias"));
  CHECK_ERROR(kern::gemm_bias(a, false, b, false, Tensor::zeros({5}, DType::f64), c),
              Contains("[gemm_bias]"));
  CHECK_ERROR(kern::gemm_bias(a, false, b, false, Tensor::zeros({5, 2}).slice(1, 0, 1), c),
              Contains("[gemm_bias]") && Contains("bias"));
  CHECK_NOTHROW(kern::gemm_bias(Tensor::zeros({1, 3, 4}), false, b, false, Tensor::zeros({5}), c3));
  Tensor c23 = Tensor::zeros({2, 3, 5});
  CHECK_ERROR(kern::gemm_bias(Tensor::zeros({2, 3, 4}), false, b, false, Tensor::zeros({5}), c23),
              Contains("one product"));
}

TEST_CASE("gemm_rowsum: gemm, and the row sums of op(a) bit for bit as reduce_sum_to", "[kernels]") {
  // f32 sums the a slivers as sgemm packs them; the order must be reduce_sum_to's (chunks of
  // 512 depth values), whatever the threads, the layout of a and the micro-kernel.
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& k :
         {Case{300, 1300, 70, true, false}, Case{1541, 600, 37, false, true}, Case{29, 2048, 513, true, true},
          Case{25, 1100, 45, false, false}, Case{7, 0, 5, true, false}, Case{9, 40, 0, true, false}})
      for (bool accumulate : {false, true}) {
        INFO(dtype_name(dt) << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << k.ta << " tb "
                            << k.tb << " accumulate " << accumulate);
        const Tensor a = randn(k.ta ? Shape{k.K, k.M} : Shape{k.M, k.K}, 51, dt);
        const Tensor b = randn(k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N}, 52, dt);
        const Tensor c0 = randn({k.M, k.N}, 53, dt), s0 = randn({k.M}, 54, dt);
        Tensor ref = c0.clone(), ref_s = s0.clone();
        kern::gemm(a, k.ta, b, k.tb, ref, 1.0, 0.5);
        Tensor rs = k.ta ? ref_s.view({1, k.M}) : ref_s.view({k.M, 1});
        kern::reduce_sum_to(a, rs, 1.0, accumulate);
        for (int threads : {1, 2, 3})
          for (auto kernel : {cpu::SgemmKernel::native, cpu::SgemmKernel::portable}) {
            INFO("threads " << threads << " portable " << (kernel == cpu::SgemmKernel::portable));
            cpu::sgemm_use_kernel(kernel);
            Tensor c = c0.clone(), s = accumulate ? s0.clone() : Tensor::full({k.M}, std::nan(""), dt);
            with_threads(threads, [&] { kern::gemm_rowsum(a, k.ta, b, k.tb, c, 0.5, s, accumulate); });
            cpu::sgemm_use_kernel(cpu::SgemmKernel::native);
            CHECK(bitwise_equal(c, ref));
            CHECK(bitwise_equal(s, ref_s));
          }
      }
  const Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({4, 5});
  Tensor c = Tensor::zeros({3, 5}), s4 = Tensor::zeros({4}), s3d = Tensor::zeros({3}, DType::f64);
  CHECK_ERROR(kern::gemm_rowsum(a, false, b, false, c, 0.0, s4, false),
              Contains("[gemm_rowsum]") && Contains("sums"));
  CHECK_ERROR(kern::gemm_rowsum(a, false, b, false, c, 0.0, s3d, false), Contains("[gemm_rowsum]"));
}

TEST_CASE("gemm_then_bias and gemm_colsum: the bits of their definitions", "[kernels]") {
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& k : {Case{300, 1300, 70, true, false}, Case{41, 600, 37, false, true},
                          Case{29, 100, 513, true, true}, Case{7, 0, 5, false, false}})
      for (bool accumulate : {false, true}) {
        INFO(dtype_name(dt) << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << k.ta << " tb "
                            << k.tb << " accumulate " << accumulate);
        const Tensor a = randn(k.ta ? Shape{k.K, k.M} : Shape{k.M, k.K}, 61, dt);
        const Tensor b = randn(k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N}, 62, dt);
        const Tensor bias = randn({k.N}, 63, dt), c0 = randn({k.M, k.N}, 64, dt), s0 = randn({k.N}, 65, dt);
        // gemm_then_bias: the product, then + bias in every row (binary add's addition).
        Tensor prod = Tensor::empty({k.M, k.N}, dt), ref = Tensor::empty({k.M, k.N}, dt);
        kern::gemm(a, k.ta, b, k.tb, prod, 1.0, 0.0);
        kern::binary(BinaryOp::add, prod, bias.view({1, k.N}), ref);
        // gemm_colsum: gemm with beta, and reduce_sum_to over op(b)'s rows.
        Tensor ref_c = c0.clone(), ref_s = s0.clone();
        kern::gemm(a, k.ta, b, k.tb, ref_c, 1.0, 0.5);
        Tensor rs = k.tb ? ref_s.view({k.N, 1}) : ref_s.view({1, k.N});
        kern::reduce_sum_to(b, rs, 1.0, accumulate);
        for (int threads : {1, 2}) {
          Tensor c = Tensor::empty({k.M, k.N}, dt);
          with_threads(threads, [&] { kern::gemm_then_bias(a, k.ta, b, k.tb, bias, c); });
          CHECK(bitwise_equal(c, ref));
          Tensor c2 = c0.clone(), s = accumulate ? s0.clone() : Tensor::full({k.N}, std::nan(""), dt);
          with_threads(threads, [&] { kern::gemm_colsum(a, k.ta, b, k.tb, c2, 0.5, s, accumulate); });
          CHECK(bitwise_equal(c2, ref_c));
          CHECK(bitwise_equal(s, ref_s));
        }
      }
  const Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({4, 5});
  Tensor c = Tensor::zeros({3, 5}), s3 = Tensor::zeros({3});
  CHECK_ERROR(kern::gemm_colsum(a, false, b, false, c, 0.0, s3, false),
              Contains("[gemm_colsum]") && Contains("sums"));
  CHECK_ERROR(kern::gemm_then_bias(a, false, b, false, Tensor::zeros({4}), c),
              Contains("[gemm_then_bias]") && Contains("bias"));
}

TEST_CASE("gemm with bf16 operands: the f32 product of the widened operands, bit for bit", "[kernels]") {
  // bf16 -> f32 is exact, so every variant with bf16 a and b must give the bits of the f32 kernel
  // on a.to(f32), b.to(f32): the CPU reference of the GPU's bf16 GEMMs (train.precision).
  struct Case {
    int64_t Ba, Bb, Bc, M, K, N;
    bool ta, tb;
  };
  for (const Case& k : {Case{1, 1, 1, 37, 300, 45, false, true}, Case{1, 1, 1, 300, 70, 29, true, false},
                        Case{3, 1, 3, 17, 40, 9, true, true}, Case{1, 2, 2, 8, 33, 65, false, false},
                        Case{1, 1, 1, 5, 0, 7, false, true}})
    for (int threads : {1, 2}) {
      INFO("Ba " << k.Ba << " Bb " << k.Bb << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << k.ta
                 << " tb " << k.tb << " threads " << threads);
      const Tensor a =
          randn(k.ta ? Shape{k.Ba, k.K, k.M} : Shape{k.Ba, k.M, k.K}, 71, DType::f32).to(DType::bf16);
      const Tensor b =
          randn(k.tb ? Shape{k.Bb, k.N, k.K} : Shape{k.Bb, k.K, k.N}, 72, DType::f32).to(DType::bf16);
      const Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
      const Tensor c0 = randn({k.Bc, k.M, k.N}, 73, DType::f32);
      Tensor want = c0.clone(), got = c0.clone();
      kern::gemm(a32, k.ta, b32, k.tb, want, 0.75, 0.5);
      with_threads(threads, [&] { kern::gemm(a, k.ta, b, k.tb, got, 0.75, 0.5); });
      CHECK(bitwise_equal(got, want));
      if (k.Bc != 1) continue;
      const Tensor a2 = a.view(k.ta ? Shape{k.K, k.M} : Shape{k.M, k.K});
      const Tensor b2 = b.view(k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N});
      const Tensor a2w = a2.to(DType::f32), b2w = b2.to(DType::f32);
      const Tensor bias = randn({k.N}, 74, DType::f32), s0 = randn({k.M}, 75, DType::f32),
                   t0 = randn({k.N}, 76, DType::f32);
      for (bool then_bias : {false, true}) {
        Tensor w = Tensor::empty({k.M, k.N}), g = Tensor::empty({k.M, k.N});
        const auto run = [&](const Tensor& x, const Tensor& y, Tensor& c) {
          if (then_bias)
            kern::gemm_then_bias(x, k.ta, y, k.tb, bias, c);
          else
            kern::gemm_bias(x, k.ta, y, k.tb, bias, c);
        };
        run(a2w, b2w, w);
        with_threads(threads, [&] { run(a2, b2, g); });
        CHECK(bitwise_equal(g, w));
      }
      for (bool accumulate : {false, true}) {
        Tensor wc = c0.view({k.M, k.N}).clone(), gc = wc.clone(), ws = s0.clone(), gs = s0.clone();
        kern::gemm_rowsum(a2w, k.ta, b2w, k.tb, wc, 0.5, ws, accumulate);
        with_threads(threads, [&] { kern::gemm_rowsum(a2, k.ta, b2, k.tb, gc, 0.5, gs, accumulate); });
        CHECK(bitwise_equal(gc, wc));
        CHECK(bitwise_equal(gs, ws));
        Tensor wc2 = c0.view({k.M, k.N}).clone(), gc2 = wc2.clone(), wt = t0.clone(), gt = t0.clone();
        kern::gemm_colsum(a2w, k.ta, b2w, k.tb, wc2, 0.5, wt, accumulate);
        with_threads(threads, [&] { kern::gemm_colsum(a2, k.ta, b2, k.tb, gc2, 0.5, gt, accumulate); });
        CHECK(bitwise_equal(gc2, wc2));
        CHECK(bitwise_equal(gt, wt));
      }
    }
  // bf16 goes in pairs, into f32 only.
  const Tensor ah = Tensor::zeros({3, 4}).to(DType::bf16), bh = Tensor::zeros({4, 5}).to(DType::bf16);
  const Tensor af = Tensor::zeros({3, 4}), bf = Tensor::zeros({4, 5});
  Tensor c = Tensor::zeros({3, 5}), ch = c.to(DType::bf16), cd = Tensor::zeros({3, 5}, DType::f64);
  CHECK_NOTHROW(kern::gemm(ah, false, bh, false, c, 1, 0));
  CHECK_ERROR(kern::gemm(ah, false, bf, false, c, 1, 0), Contains("[gemm]") && Contains("bf16[3, 4]"));
  CHECK_ERROR(kern::gemm(af, false, bh, false, c, 1, 0), Contains("[gemm]") && Contains("bf16[4, 5]"));
  CHECK_ERROR(kern::gemm(ah, false, bh, false, ch, 1, 0), Contains("[gemm]"));
  CHECK_ERROR(kern::gemm(ah, false, bh, false, cd, 1, 0), Contains("[gemm]"));
  CHECK_ERROR(kern::gemm_bias(ah, false, bh, false, Tensor::zeros({5}).to(DType::bf16), c),
              Contains("[gemm_bias]") && Contains("bias"));
}

TEST_CASE("gemm with K = 0 scales c by beta", "[kernels]") {
  Tensor a = Tensor::zeros({3, 0}, DType::f64), b = Tensor::zeros({0, 2}, DType::f64);
  Tensor c = Tensor::full({3, 2}, 4.0, DType::f64);
  kern::gemm(a, false, b, false, c, 1.0, 0.5);
  CHECK(values(c) == std::vector<double>(6, 2.0));
  Tensor d = Tensor::full({3, 2}, std::nan(""), DType::f64);
  kern::gemm(a, false, b, false, d, 1.0, 0.0);
  CHECK(values(d) == std::vector<double>(6, 0.0));
}

TEST_CASE("gemm rejects mismatched shapes, batches, dtypes and strided operands", "[kernels]") {
  Tensor a = Tensor::zeros({2, 3, 4}), b = Tensor::zeros({2, 4, 5}), c = Tensor::zeros({2, 3, 5});
  CHECK_NOTHROW(kern::gemm(a, false, b, false, c, 1, 0));
  Tensor bad = Tensor::zeros({2, 5, 5});
  CHECK_ERROR(kern::gemm(a, false, bad, false, c, 1, 0), Contains("[gemm]") && Contains("[2, 5, 5]"));
  Tensor c3 = Tensor::zeros({3, 3, 5});
  Tensor b3 = Tensor::zeros({3, 4, 5});
  CHECK_ERROR(kern::gemm(a, false, b3, false, c3, 1, 0), Contains("[gemm]") && Contains("batch"));
  Tensor bt = Tensor::zeros({2, 5, 4}).transpose(1, 2);
  CHECK_ERROR(kern::gemm(a, false, bt, false, c, 1, 0), Contains("[gemm]") && Contains("contiguous"));
  Tensor b64 = Tensor::zeros({2, 4, 5}, DType::f64);
  CHECK_ERROR(kern::gemm(a, false, b64, false, c, 1, 0), Contains("[gemm]"));
  Tensor ci = Tensor::zeros({2, 3, 5}, DType::i32);
  Tensor ai = Tensor::zeros({2, 3, 4}, DType::i32), bi = Tensor::zeros({2, 4, 5}, DType::i32);
  CHECK_ERROR(kern::gemm(ai, false, bi, false, ci, 1, 0), Contains("[gemm]"));
}

// ------------------------------------------------------------------------------ reductions

namespace {

std::vector<double> reduce_reference(const std::vector<double>& src, const Shape& ss, const Shape& ds) {
  std::vector<double> out(static_cast<size_t>(shape_numel(ds)), 0.0);
  for (int64_t i = 0; i < shape_numel(ss); ++i) {
    auto idx = unflatten(i, ss);
    for (size_t d = 0; d < ds.size(); ++d)
      if (ds[d] == 1) idx[d] = 0;
    out[static_cast<size_t>(flatten(idx, ds))] += src[static_cast<size_t>(i)];
  }
  return out;
}

void run_reduce_case(const Shape& ss, const Shape& ds, DType dt, double alpha, bool accumulate) {
  INFO(shape_str(ss) << " -> " << shape_str(ds) << " " << dtype_name(dt) << " alpha " << alpha
                     << " accumulate " << accumulate);
  const Tensor src = randn(ss, 21, dt);
  Tensor dst = randn(ds, 22, dt);
  const std::vector<double> old = values(dst);
  std::vector<double> want = reduce_reference(values(src), ss, ds),
                      mag = reduce_reference(values(src), ss, ds);
  {
    std::vector<double> a = values(src);
    for (double& v : a) v = std::abs(v);
    mag = reduce_reference(a, ss, ds);
  }
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = alpha * want[i] + (accumulate ? old[i] : 0.0);
    mag[i] = std::abs(alpha) * mag[i] + (accumulate ? std::abs(old[i]) : 0.0) + std::abs(want[i]);
  }
  kern::reduce_sum_to(src, dst, alpha, accumulate);
  // Sums run in double: f64 results are near exact, f32 ones are the double result rounded once.
  require_close(values(dst), want, mag, dt == DType::f32 ? 1.2e-7 : 1e-14);
}

}  // namespace

TEST_CASE("reduce_sum_to over leading, trailing, middle, mixed and all dims", "[kernels]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{6, 5}, {1, 5}},              // leading (bias gradient)
      {{2000, 300}, {1, 300}},       // leading, several column blocks
      {{6, 5}, {6, 1}},              // trailing (row sums)
      {{3, 4, 5}, {1, 4, 1}},        // leading + trailing around a kept middle
      {{3, 4, 5}, {3, 1, 5}},        // middle
      {{2, 3, 4, 5}, {1, 3, 1, 5}},  // mixed
      {{2, 3, 4, 5}, {2, 1, 1, 5}},  // mixed, adjacent
      {{2, 1, 4, 5}, {1, 1, 4, 1}},  // with a size-1 source dim
      {{3, 4}, {3, 4}},              // nothing reduced
      {{7, 300, 50}, {1, 1, 1}},     // full, more than one 64K chunk
      {{5}, {1}},                    // full, tiny
      {{7, 0}, {7, 1}},              // empty rows: zeros (gemm_colsum's bias gradient at K = 0)
      {{0, 4}, {1, 4}},              // no rows
      {{2, 3, 0}, {1, 3, 1}},        // empty around a kept middle
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& [ss, ds] : cases) {
      run_reduce_case(ss, ds, dt, 1.0, false);
      run_reduce_case(ss, ds, dt, -0.25, true);
    }
}

TEST_CASE("reduce_sum_to rejects incompatible shapes", "[kernels]") {
  const Tensor src = Tensor::zeros({3, 4});
  Tensor d1 = Tensor::zeros({4});
  CHECK_ERROR(kern::reduce_sum_to(src, d1, 1, false), Contains("[reduce_sum_to]"));
  Tensor d2 = Tensor::zeros({2, 4});
  CHECK_ERROR(kern::reduce_sum_to(src, d2, 1, false), Contains("[reduce_sum_to]") && Contains("[2, 4]"));
}

// ------------------------------------------------------------------------------ binary ops

TEST_CASE("binary ops on strided and broadcast inputs", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor base = randn({6, 4}, 31, dt), other = randu({5, 6}, 32, 0.5, 2.0, dt);
    struct Case {
      const char* what;
      Tensor a, b;
    };
    const std::vector<Case> cases = {
        {"transposed + sliced", base.transpose(0, 1), other.slice(0, 1, 5)},  // (4,6)
        {"row broadcast", base, other.slice(0, 2, 3).slice(1, 0, 4)},         // (6,4)+(1,4)
        {"column broadcast", base, other.transpose(0, 1).slice(1, 0, 1)},     // (6,4)+(6,1)
        {"outer", base.slice(1, 0, 1), other.slice(0, 0, 1)},                 // (6,1)+(1,6)
        {"scalar", base, Tensor::full({}, 1.75, dt)},                         // (6,4)+()
        {"scalar first", Tensor::full({1}, -0.5, dt), base.transpose(0, 1)},
        {"expanded stride-0 inner", base.slice(1, 2, 3).expand({6, 5}), other.transpose(0, 1)},
        {"3d broadcast", base.view({2, 3, 4}), other.slice(0, 0, 3).slice(1, 0, 1).unsqueeze(0)},
    };
    for (const auto& c : cases) {
      const Shape os = broadcast_shapes(c.a.shape(), c.b.shape(), "test");
      const auto av = values(c.a), bv = values(c.b);
      for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
        INFO(c.what << " op " << int(op) << " " << dtype_name(dt));
        Tensor out = Tensor::empty(os, dt);
        kern::binary(op, c.a, c.b, out);
        std::vector<double> want(static_cast<size_t>(shape_numel(os)));
        for (int64_t i = 0; i < shape_numel(os); ++i) {
          const auto idx = unflatten(i, os);
          const double x = bcast_at(av, c.a.shape(), idx), y = bcast_at(bv, c.b.shape(), idx);
          double r = 0;
          switch (op) {
            case BinaryOp::add:
              r = x + y;
              break;
            case BinaryOp::sub:
              r = x - y;
              break;
            case BinaryOp::mul:
              r = x * y;
              break;
            case BinaryOp::div:
              r = x / y;
              break;
          }
          want[static_cast<size_t>(i)] = dt == DType::f32 ? static_cast<double>(static_cast<float>(r)) : r;
        }
        // One rounding in either dtype: the result is exact up to the final rounding.
        require_close(values(out), want, dt == DType::f32 ? 2.4e-7 : 1e-16, 0.0);
      }
    }
  }
  Tensor out = Tensor::empty({2, 3});
  CHECK_ERROR(kern::binary(BinaryOp::add, Tensor::zeros({2, 3}, DType::f64), Tensor::zeros({3}), out),
              Contains("[binary]"));
}

// ------------------------------------------------------------------- fill / copy / cast / axpby

TEST_CASE("fill writes only the elements of a strided view", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::u8}) {
    Tensor x = Tensor::zeros({4, 6}, dt);
    Tensor v = x.transpose(0, 1).slice(0, 1, 3).slice(1, 1, 4);  // x[1:4, 1:3]
    kern::fill(v, 7.0);
    const auto got = values(x);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        INFO(dtype_name(dt) << " [" << i << "," << j << "]");
        CHECK(got[static_cast<size_t>(i * 6 + j)] == ((i >= 1 && j >= 1 && j < 3) ? 7.0 : 0.0));
      }
  }
  Tensor s = Tensor::zeros({}, DType::f64);
  kern::fill(s, -2.5);
  CHECK(s.item() == -2.5);
}

TEST_CASE("copy and accumulate between strided and broadcast views", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    INFO(dtype_name(dt));
    Tensor base = Tensor::full({3, 5}, 100.0, dt);
    Tensor dst = base.transpose(0, 1).slice(0, 1, 4);  // (3,3): base[:, 1:4]^T
    const Tensor src = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3, 1}).to(dt).expand({3, 3});
    kern::copy(src, dst, false);
    // dst[i][j] = base[j][1+i] = src[i][j] = i+1
    std::vector<double> want = {100, 1, 2, 3, 100, 100, 1, 2, 3, 100, 100, 1, 2, 3, 100};
    CHECK(values(base) == want);
    kern::copy(src, dst, true);
    want = {100, 2, 4, 6, 100, 100, 2, 4, 6, 100, 100, 2, 4, 6, 100};
    CHECK(values(base) == want);
    // Contiguous runs (the memcpy path) with an offset.
    Tensor rows = base.slice(0, 1, 3);
    kern::copy(Tensor::full({2, 5}, 9.0, dt), rows, false);
    CHECK(values(base.slice(0, 1, 3)) == std::vector<double>(10, 9.0));
    CHECK(values(base.slice(0, 0, 1)) == std::vector<double>{100, 2, 4, 6, 100});
  }
  Tensor d = Tensor::zeros({2, 3});
  CHECK_ERROR(kern::copy(Tensor::zeros({3, 2}), d, false), Contains("[copy]"));
  CHECK_ERROR(kern::copy(Tensor::zeros({2, 3}, DType::f64), d, false), Contains("[copy]"));
}

TEST_CASE("cast converts between every storable dtype", "[kernels]") {
  const std::vector<double> v = {0.0, 1.0, 2.75, 100.25, 7.5, 255.0};
  const Tensor f64 = Tensor::from_vector(v, {2, 3});
  const Tensor f32 = f64.to(DType::f32);
  CHECK(f32.dtype() == DType::f32);
  CHECK(values(f32) == v);  // all exactly representable
  CHECK(f32.to(DType::i32).to_vector<int32_t>() == std::vector<int32_t>{0, 1, 2, 100, 7, 255});
  CHECK(f64.to(DType::u8).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 2, 100, 7, 255});
  CHECK(values(f64.to(DType::u8).to(DType::f64)) == std::vector<double>{0, 1, 2, 100, 7, 255});
  CHECK(values(f64.to(DType::i32).to(DType::f32)) == std::vector<double>{0, 1, 2, 100, 7, 255});
  // f64 -> f32 rounds to nearest.
  const Tensor third = Tensor::from_vector(std::vector<double>{1.0 / 3.0}).to(DType::f32);
  CHECK(third.item<float>() == 1.0f / 3.0f);
  // Large and strided: the parallel path, through to(dtype) of a non-contiguous view.
  const Tensor big = randn({300, 400}, 41, DType::f64);
  const Tensor bt = big.transpose(0, 1).to(DType::f32);
  const auto bv = values(big.transpose(0, 1));
  const auto got = bt.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == static_cast<float>(bv[i]));
  Tensor out = Tensor::empty({3, 2});
  CHECK_ERROR(kern::cast(f64.transpose(0, 1), out), Contains("[cast]"));
}

TEST_CASE("axpby: y = alpha x + beta y, beta = 0 ignores NaN", "[kernels]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3});
  Tensor y = Tensor::from_vector(std::vector<double>{10, 20, 30});
  kern::axpby(x, 2.0, y, -1.0);
  CHECK(values(y) == std::vector<double>{-8, -16, -24});
  kern::axpby(x, 1.0, y, 1.0);
  CHECK(values(y) == std::vector<double>{-7, -14, -21});
  Tensor n = Tensor::full({3}, std::nan(""), DType::f64);
  kern::axpby(x, -3.0, n, 0.0);
  CHECK(values(n) == std::vector<double>{-3, -6, -9});
  Tensor small = Tensor::zeros({2}, DType::f64);
  CHECK_ERROR(kern::axpby(x, 1, small, 1), Contains("[axpby]"));
}

// ------------------------------------------------------------- network kernels: forward values

TEST_CASE("gelu forward matches the erf and tanh formulas", "[kernels]") {
  const Tensor x = randn({1000}, 51, DType::f64, 3.0);
  const auto xv = values(x);
  for (bool tanh_approx : {false, true}) {
    Tensor y = x.empty_like();
    kern::gelu_forward(x, y, tanh_approx);
    std::vector<double> want;
    for (double v : xv)
      want.push_back(tanh_approx ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                                 : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    require_close(values(y), want, 1e-14, 1e-15);
    Tensor y32 = Tensor::empty({1000});
    kern::gelu_forward(x.to(DType::f32), y32, tanh_approx);
    require_close(values(y32), want, 1e-6, 1e-7);
  }
  // Known points: GELU(0) = 0, GELU(1) = Φ(1) = 0.8413447460685429.
  Tensor p = Tensor::from_vector(std::vector<double>{0.0, 1.0, -30.0});
  Tensor q = p.empty_like();
  kern::gelu_forward(p, q, false);
  CHECK(values(q)[0] == 0.0);
  CHECK(values(q)[1] == Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(values(q)[2] == Approx(0.0).margin(1e-100));
}

TEST_CASE("layernorm forward matches the definition", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t N = 37, C = 19;
    const Tensor x = randn({N, C}, 61, dt, 2.0, 0.5), w = randn({C}, 62, dt), b = randn({C}, 63, dt);
    Tensor y = x.empty_like(), mean = x.new_empty({N}), rstd = x.new_empty({N});
    kern::layernorm_forward(x, w, b, 1e-5, y, mean, rstd);
    const auto xv = values(x), wv = values(w), bv = values(b);
    std::vector<double> want, wm, wr;
    for (int64_t n = 0; n < N; ++n) {
      double mu = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mu += xv[static_cast<size_t>(n * C + c)];
      mu /= C;
      for (int64_t c = 0; c < C; ++c) var += std::pow(xv[static_cast<size_t>(n * C + c)] - mu, 2);
      const double r = 1 / std::sqrt(var / C + 1e-5);
      wm.push_back(mu), wr.push_back(r);
      for (int64_t c = 0; c < C; ++c)
        want.push_back((xv[static_cast<size_t>(n * C + c)] - mu) * r * wv[static_cast<size_t>(c)] +
                       bv[static_cast<size_t>(c)]);
    }
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    require_close(values(y), want, tol, tol);
    require_close(values(mean), wm, tol, tol);
    require_close(values(rstd), wr, tol, tol);
  }
}

TEST_CASE("softmax and log-softmax forward match the definition, with a broadcast mask", "[kernels]") {
  const int64_t B = 2, H = 3, T = 5;
  const Tensor x = randn({B, H, T, T}, 71, DType::f64, 3.0);
  const Tensor mask = saobp::test::causal_mask(T);
  const auto xv = values(x), mv = values(mask);
  for (bool log : {false, true})
    for (bool masked : {false, true}) {
      INFO("log " << log << " masked " << masked);
      Tensor y = x.empty_like();
      kern::softmax_forward(x, masked ? mask : Tensor(), y, log);
      std::vector<double> want(xv.size());
      for (int64_t r = 0; r < B * H * T; ++r) {
        const int64_t q = r % T;
        auto ok = [&](int64_t c) { return !masked || mv[static_cast<size_t>(q * T + c)] != 0; };
        double mx = -INFINITY, s = 0;
        for (int64_t c = 0; c < T; ++c)
          if (ok(c)) mx = std::max(mx, xv[static_cast<size_t>(r * T + c)]);
        for (int64_t c = 0; c < T; ++c)
          if (ok(c)) s += std::exp(xv[static_cast<size_t>(r * T + c)] - mx);
        for (int64_t c = 0; c < T; ++c) {
          const double v = xv[static_cast<size_t>(r * T + c)];
          want[static_cast<size_t>(r * T + c)] = !ok(c) ? 0.0
                                                 : log  ? v - mx - std::log(s)
                                                        : std::exp(v - mx) / s;
        }
      }
      require_close(values(y), want, 1e-14, 1e-15);
    }
}

TEST_CASE("softmax keeps NaN scores visible: an all-NaN row is NaN, an empty row zeros", "[kernels]") {
  for (DType dt : {DType::f32, DType::f64})
    for (bool log : {false, true}) {
      INFO("log " << log);
      // Row 0: all NaN; row 1: NaN where allowed, -inf elsewhere; row 2: nothing allowed.
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const Tensor x =
          Tensor::from_vector(std::vector<double>{nan, nan, nan, nan, -INFINITY, nan, 1.0, 2.0, 3.0}, {3, 3})
              .to(dt);
      const Tensor mask = saobp::test::mask_of({1, 1, 1, 0, 1, 1, 0, 0, 0}, {3, 3});
      Tensor y = x.empty_like();
      kern::softmax_forward(x, mask, y, log);
      const auto v = values(y);
      for (int c = 0; c < 6; ++c) CHECK(std::isnan(v[static_cast<size_t>(c)]));
      for (int c = 6; c < 9; ++c) CHECK(v[static_cast<size_t>(c)] == 0.0);
      const Tensor row = x.slice(0, 0, 1).contiguous();
      Tensor y1 = row.empty_like();
      kern::softmax_forward(row, Tensor(), y1, log);
      CHECK(std::isnan(values(y1)[0]));
    }
}

TEST_CASE("embedding forward gathers rows, cross-entropy forward matches the definition", "[kernels]") {
  const Tensor w = randn({6, 4}, 81, DType::f64);
  const Tensor id = saobp::test::ids({5, 0, 5, 2}, {4});
  Tensor out = Tensor::empty({4, 4}, DType::f64);
  kern::embedding_forward(w, id, out);
  const auto wv = values(w);
  std::vector<double> want;
  for (int32_t i : {5, 0, 5, 2})
    for (int c = 0; c < 4; ++c) want.push_back(wv[static_cast<size_t>(i * 4 + c)]);
  CHECK(values(out) == want);

  const Tensor logits = randn({4, 7}, 82, DType::f64, 4.0);
  const Tensor tg = saobp::test::ids({3, -100, 6, 0}, {4});
  Tensor losses = Tensor::empty({4}, DType::f64), lse = Tensor::empty({4}, DType::f64);
  kern::cross_entropy_forward(logits, tg, -100, losses, lse);
  const auto lv = values(logits);
  std::vector<double> wl, ws;
  const int32_t t[4] = {3, -100, 6, 0};
  for (int n = 0; n < 4; ++n) {
    double s = 0;
    for (int v = 0; v < 7; ++v) s += std::exp(lv[static_cast<size_t>(n * 7 + v)]);
    ws.push_back(std::log(s));
    wl.push_back(t[n] < 0 ? 0.0 : std::log(s) - lv[static_cast<size_t>(n * 7 + t[n])]);
  }
  require_close(values(lse), ws, 1e-14, 1e-14);
  require_close(values(losses), wl, 1e-13, 1e-14);
  CHECK(values(losses)[1] == 0.0);
}

TEST_CASE("dropout forward keeps element i exactly when Philox U_i >= p", "[kernels]") {
  const double p = 0.3;
  const RngKey key{5, 9, 123};
  const Tensor x = randn({50000}, 91, DType::f32);
  Tensor y = x.empty_like(), mask = Tensor::empty({50000}, DType::u8);
  kern::dropout_forward(x, p, key, y, mask);
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const auto mv = mask.to_vector<uint8_t>();
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool keep = philox::to_unit_float(philox::word(5, 9, 123 + i)) >= 0.3f;
    REQUIRE(mv[i] == keep);
    REQUIRE(yv[i] == (keep ? xv[i] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f));
    kept += keep;
  }
  CHECK(static_cast<double>(kept) / 50000 == Approx(0.7).margin(0.01));
  Tensor gx = x.zeros_like();
  kern::dropout_backward(x, mask, p, gx, true);
  const auto gv = gx.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) REQUIRE(gv[i] == yv[i]);
  CHECK_ERROR(kern::dropout_forward(x, 1.0, key, y, mask), Contains("[dropout]"));
  CHECK_ERROR(kern::dropout_forward(x, -0.1, key, y, mask), Contains("[dropout]"));
}

TEST_CASE("backward kernels with accumulate = false overwrite (NaN ignored), equal to adding to zeros",
          "[kernels]") {
  // The first writer of a gradient skips the zero fill (GradSlots::slot); the bits must be those
  // of accumulating into zeros.
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    const Tensor x = randn({37, 53}, 61, dt), gy = randn({37, 53}, 62, dt);
    auto both = [&](auto&& run) {
      Tensor zero = x.zeros_like(), nan = Tensor::full(x.shape(), std::nan(""), dt);
      run(zero, true);
      run(nan, false);
      CHECK(bitwise_equal(zero, nan));
    };
    for (bool tanh_approx : {false, true})
      both([&](Tensor& g, bool acc) { kern::gelu_backward(x, gy, g, tanh_approx, acc); });
    Tensor y = x.empty_like(), mask = Tensor::empty(x.shape(), DType::u8);
    kern::dropout_forward(x, 0.25, RngKey{3, 4, 5}, y, mask);
    both([&](Tensor& g, bool acc) { kern::dropout_backward(gy, mask, 0.25, g, acc); });
    std::vector<int32_t> t(37);
    for (size_t i = 0; i < t.size(); ++i) t[i] = i % 5 == 0 ? -100 : static_cast<int32_t>(i * 7 % 53);
    const Tensor targets = saobp::test::ids(t, {37});
    Tensor losses = Tensor::empty({37}, dt), lse = Tensor::empty({37}, dt);
    kern::cross_entropy_forward(x, targets, -100, losses, lse);
    const Tensor w = randu({37}, 63, 0.5, 1.5, dt);
    both([&](Tensor& g, bool acc) { kern::cross_entropy_backward(x, targets, lse, w, -100, g, acc); });
  }
}
