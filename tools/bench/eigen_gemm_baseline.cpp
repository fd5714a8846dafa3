// The named baseline of `saobp bench-kernels`: Eigen's own GEMM with Eigen's own OpenMP
// threading (built without EIGEN_DONT_PARALLELIZE, in a separate executable so that its Eigen
// instantiations cannot clash with saobp's). Prints "M N K batch GFLOP/s" per shape given on
// stdin as "M N K batch" lines; batch > 1 loops single products as a batched GEMM would.
#include <Eigen/Core>
#include <cstdio>
#include <vector>

#include "bench_util.h"

int main() {
  Eigen::initParallel();
  long M, N, K, B;
  while (std::scanf("%ld %ld %ld %ld", &M, &N, &K, &B) == 4) {
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    std::vector<Mat> a(B, Mat::Random(M, K)), b(B, Mat::Random(K, N)), c(B, Mat::Zero(M, N));
    const double s = saobp::bench::median_seconds([&] {
      for (long i = 0; i < B; ++i) c[i].noalias() = a[i] * b[i];
    });
    std::printf("%ld %ld %ld %ld %.3f\n", M, N, K, B, 2.0 * M * N * K * B / s / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
