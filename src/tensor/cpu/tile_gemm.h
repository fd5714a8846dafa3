// One small product on the calling thread, for kernels that run whole tiles per thread (the
// attention tiles): c = alpha · op(a) · op(b) + beta · c with c (M, N) contiguous, a (M, K) or,
// if ta, (K, M), b (K, N) or, if tb, (N, K), all row-major. f32 runs our packed sgemm (sgemm.h),
// so tile products round exactly as the kernel API's GEMMs; f64 (gradient checks) runs Eigen.
#pragma once
#include <Eigen/Core>

#include "tensor/cpu/sgemm.h"

namespace saobp::cpu {

inline void tile_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, bool ta, const float* b,
                      bool tb, float beta, float* c) {
  const SView av = ta ? SView{a, 1, M} : SView{a, K, 1};
  const SView bv = tb ? SView{b, 1, K} : SView{b, N, 1};
  sgemm(M, N, K, alpha, av, bv, beta, c, N, /*team=*/false);
}

inline void tile_gemm(int64_t M, int64_t N, int64_t K, double alpha, const double* a, bool ta,
                      const double* b, bool tb, double beta, double* c) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  Eigen::Map<Mat> C(c, M, N);
  if (beta == 0)
    C.setZero();
  else if (beta != 1)
    C *= beta;
  const CMap A(a, ta ? K : M, ta ? M : K), B(b, tb ? N : K, tb ? K : N);
  if (!ta && !tb)
    C.noalias() += alpha * (A * B);
  else if (ta && !tb)
    C.noalias() += alpha * (A.transpose() * B);
  else if (!ta && tb)
    C.noalias() += alpha * (A * B.transpose());
  else
    C.noalias() += alpha * (A.transpose() * B.transpose());
}

}  // namespace saobp::cpu
