// Our f32 GEMM: packed panels and a register-blocked micro-kernel (BLIS's structure), with a
// depth blocking that depends on K alone, so every output element is the same sum in the same
// order whatever the thread count, the tiling or the instruction set (sgemm.cpp says why).
// Internal to src/tensor/cpu/: gemm.cpp (the kernel API's f32 path) and the attention tiles.
#pragma once
#include <cstdint>

namespace saobp::cpu {

// A strided f32 matrix: element (i, j) at p[i * rs + j * cs]. A transposed operand is the same
// memory with rs and cs swapped.
struct SView {
  const float* p;
  int64_t rs, cs;
};

// c = alpha · a · b + beta · c, with a: M×K, b: K×N (views) and c: M×N, rows ldc apart, columns
// contiguous. beta = 0 overwrites c without reading it (NaN there does not propagate).
// team = true splits the product over the OpenMP threads (call it outside a parallel region;
// inside one it runs on the calling thread); team = false always runs on the calling thread.
// c0 (N values), when given, stands for every row of c in the beta term: c = alpha·a·b + beta·c0
// (a bias, without filling c with it first; the bits are those of that fill and beta·c).
// rowsums, when given, also receives the row sums of a, Σ_k a(i, k) (a linear layer's bias
// gradient, gathered while its output gradient is packed for the weight gradient): out[i] =
// the sum, or out[i] + the sum when accumulate, summed in double over chunks of 512 k in order,
// the chunks added in order (reduce_sum_to's order for (R, K) -> (K), so the same bits).
struct RowSums {
  float* out;
  bool accumulate;
};
void sgemm(int64_t M, int64_t N, int64_t K, float alpha, SView a, SView b, float beta, float* c, int64_t ldc,
           bool team, const float* c0 = nullptr, const RowSums* rowsums = nullptr);

// The micro-kernels. `native` is the widest this build was compiled for (AVX-512, else AVX2+FMA,
// else portable C++); all of them compute each element as the same chain of fused multiply-adds,
// so they agree bitwise. sgemm_use_kernel switches the process-wide choice (for tests and
// benchmarks; not thread-safe against concurrent sgemm calls).
enum class SgemmKernel { native, portable };
void sgemm_use_kernel(SgemmKernel k);
const char* sgemm_kernel_name();

}  // namespace saobp::cpu
