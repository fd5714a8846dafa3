// The GEMM micro-kernel of another instruction set, checked on this machine. saobp's bits must not
// depend on the instruction set (an AVX2 build and an AVX-512 build train to the same bits,
// src/tensor/cpu/sgemm.cpp says why), but a build compiles only the widest kernel its -march
// allows: on an AVX-512 machine the AVX2 kernel is not in saobp_tests at all. CMake therefore
// compiles sgemm.cpp a second time with -march=x86-64-v3 (AVX2 + FMA, no AVX-512) into this
// small program, which checks that its native kernel ("avx2 6x16") gives every product bitwise
// the same as the portable kernel. saobp_tests checks the AVX-512 (or this machine's) kernel
// against the portable one, and the portable kernel is the same IEEE operations under every
// -march (std::fma, -ffp-contract=off), so together they tie AVX2 to AVX-512 bit for bit.
//
// The products cover what the kernel API sends: tiles cut at both edges (M, N not multiples of
// 6 or 16), several depth blocks (K > 256), a row-major a read in place and a transposed one
// packed, a transposed b, beta 0, 1 and other, a bias row (c0), row sums, and teams of 1-3 threads.
// Exit 0: all equal; 1: a difference (printed); 77: this CPU has no AVX2/FMA (CTest: skipped).
#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/cpu/sgemm.h"

using saobp::cpu::SgemmKernel;
using saobp::cpu::SView;

namespace {

struct Case {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  bool bias, rowsums;
};

std::vector<float> randn(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// c (and the row sums) of one product with the given kernel and thread count.
std::vector<float> run(const Case& k, SgemmKernel kernel, int threads, std::vector<float>& sums) {
  const std::vector<float> a = randn(static_cast<size_t>(k.M * k.K), 1),
                           b = randn(static_cast<size_t>(k.K * k.N), 2);
  const std::vector<float> c0 = randn(static_cast<size_t>(k.N), 3);
  std::vector<float> c = randn(static_cast<size_t>(k.M * k.N), 4);
  sums = randn(static_cast<size_t>(k.M), 5);
  const SView av = k.ta ? SView{a.data(), 1, k.M} : SView{a.data(), k.K, 1};
  const SView bv = k.tb ? SView{b.data(), 1, k.K} : SView{b.data(), k.N, 1};
  const saobp::cpu::RowSums rs{sums.data(), true};
  saobp::cpu::sgemm_use_kernel(kernel);
  omp_set_num_threads(threads);
  saobp::cpu::sgemm(k.M, k.N, k.K, k.alpha, av, bv, k.beta, c.data(), k.N, /*team=*/true,
                    k.bias ? c0.data() : nullptr, k.rowsums ? &rs : nullptr);
  return c;
}

}  // namespace

int main() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("sgemm_isa_check: this CPU has no AVX2/FMA; skipped\n");
    return 77;
  }
  const std::vector<Case> cases = {
      {6, 16, 8, false, false, 1.0f, 0.0f, false, false},       // one full tile
      {5, 15, 7, false, false, 1.0f, 0.0f, false, false},       // one edge tile
      {131, 77, 300, false, true, 0.75f, 1.0f, false, false},   // x·Wᵀ shape, two depth blocks
      {257, 70, 1100, true, false, 1.0f, 1.0f, false, false},   // aᵀ packed, five depth blocks
      {64, 530, 600, false, false, 1.0f, 0.0f, true, false},    // bias row, wide panel (> NC)
      {90, 33, 513, true, true, -0.5f, 0.25f, false, false},    // both transposed, beta other
      {1600, 40, 40, false, false, 1.0f, 1.0f, false, true},    // many row slivers, row sums
      {300, 128, 4096, false, false, 1.0f, 0.0f, false, true},  // row stride of 16 KB (packed)
  };
  int bad = 0, products = 0;
  for (const Case& k : cases) {
    std::vector<float> ref_sums;
    const std::vector<float> ref = run(k, SgemmKernel::portable, 1, ref_sums);
    for (int threads : {1, 2, 3}) {
      std::vector<float> sums;
      const std::vector<float> c = run(k, SgemmKernel::native, threads, sums);
      ++products;
      const bool same_c = std::memcmp(c.data(), ref.data(), c.size() * sizeof(float)) == 0;
      const bool same_s =
          !k.rowsums || std::memcmp(sums.data(), ref_sums.data(), sums.size() * sizeof(float)) == 0;
      if (!same_c || !same_s) {
        ++bad;
        std::printf(
            "DIFFERENT: M %lld N %lld K %lld ta %d tb %d alpha %g beta %g bias %d rowsums %d, %d threads "
            "(%s)\n",
            static_cast<long long>(k.M), static_cast<long long>(k.N), static_cast<long long>(k.K), k.ta, k.tb,
            static_cast<double>(k.alpha), static_cast<double>(k.beta), k.bias, k.rowsums, threads,
            same_c ? "row sums" : "c");
      }
    }
  }
  saobp::cpu::sgemm_use_kernel(SgemmKernel::native);
  std::printf("sgemm_isa_check: %s kernel vs portable, %d products: %s\n", saobp::cpu::sgemm_kernel_name(),
              products, bad ? "DIFFERENT" : "bitwise equal");
  return bad ? 1 : 0;
}
