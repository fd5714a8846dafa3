// CPU kernel: reduce_sum_to (bias gradients, row sums, full sums).
// CUDA twin: src/tensor/cuda/reduce.cpp + reduce.cu.
#include <vector>

#include "tensor/cpu/common.h"
#include "tensor/cpu/vec_math.h"

namespace saobp::cpu {

// dst (+)= alpha * sum of src over the dims where dst has size 1.
// src: contiguous; dst: contiguous, dst.dim() == src.dim().
// Every dst element sums its inputs in increasing flat-index order, in double.
void reduce_sum_to(const Tensor& src, Tensor& dst, double alpha, bool accumulate) {
  dispatch_float(dst.dtype(), "reduce_sum_to", [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* d = dst.data<T>();
    auto store = [&](int64_t i, double v) {
      d[i] = accumulate ? static_cast<T>(d[i] + alpha * v) : static_cast<T>(alpha * v);
    };
    // Split dims into a reduced prefix R, kept middle K and reduced suffix S when possible:
    // src viewed as (R, K, S), dst as (K). This covers bias gradients (R,K,1) and row sums (1,K,S).
    int64_t first_kept = -1, last_kept = -1;
    for (int64_t i = 0; i < src.dim(); ++i)
      if (dst.size(i) != 1) {
        if (first_kept < 0) first_kept = i;
        last_kept = i;
      }
    bool simple = true;  // no reduced dim between the first and last kept one
    for (int64_t i = first_kept; first_kept >= 0 && i <= last_kept; ++i)
      if (dst.size(i) != src.size(i)) simple = false;
    if (first_kept < 0) {  // full reduction: fixed 64K chunks (16 lanes each), partials summed in order
      const int64_t n = src.numel(), grain = 65536, chunks = (n + grain - 1) / grain;
      std::vector<double> part(static_cast<size_t>(std::max<int64_t>(chunks, 1)), 0.0);
      parallel_for(n, grain, [&](int64_t b, int64_t e) {
        part[static_cast<size_t>(b / grain)] = lane_sum(e - b, [&](int64_t i) { return s[b + i]; });
      });
      double total = 0;
      for (double p : part) total += p;
      store(0, total);
      return;
    }
    if (simple) {
      int64_t R = 1, K = 1, S = 1;
      for (int64_t i = 0; i < first_kept; ++i) R *= src.size(i);
      for (int64_t i = first_kept; i <= last_kept; ++i) K *= src.size(i);
      for (int64_t i = last_kept + 1; i < src.dim(); ++i) S *= src.size(i);
      if (S == 1) {  // (R, K) -> (K): column blocks × row blocks of 512, partials in row order
        // (a bias gradient, 4096 x 256, is one column block: the row blocks give both threads
        // work; their boundaries depend on R alone).
        constexpr int64_t kRows = 512;
        const int64_t cb = (K + 255) / 256, rb = (R + kRows - 1) / kRows;
        std::vector<double> part(static_cast<size_t>(rb * K));
        parallel_for(cb * rb, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t b = t / rb * 256, e = std::min(K, b + 256), r0 = t % rb * kRows;
            double* acc = part.data() + (t % rb) * K;
            for (int64_t k = b; k < e; ++k) acc[k] = 0;
            for (int64_t r = r0; r < std::min(R, r0 + kRows); ++r) {
              const T* row = s + r * K;
              for (int64_t k = b; k < e; ++k) acc[k] += row[k];
            }
          }
        });
        for (int64_t k = 0; k < K; ++k) {
          double v = 0;
          for (int64_t q = 0; q < rb; ++q) v += part[static_cast<size_t>(q * K + k)];
          store(k, v);
        }
      } else {  // (R, K, S) -> (K)
        parallel_for(K, R * S > 0 ? std::max<int64_t>(1, 4096 / (R * S)) : K, [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            double acc = 0;
            for (int64_t r = 0; r < R; ++r) {
              const T* p = s + (r * K + k) * S;
              for (int64_t j = 0; j < S; ++j) acc += p[j];
            }
            store(k, acc);
          }
        });
      }
      return;
    }
    // General case: kept dims outer, reduced dims inner, through a permuted view of src.
    std::vector<int64_t> order, kept_shape;
    Shape red_shape;
    for (int64_t i = 0; i < src.dim(); ++i)
      if (dst.size(i) != 1) order.push_back(i);
    for (int64_t i = 0; i < src.dim(); ++i)
      if (dst.size(i) == 1) order.push_back(i), red_shape.push_back(src.size(i));
    const Tensor p = src.permute(order);
    const int64_t nk = dst.numel(), nr = shape_numel(red_shape);
    const size_t nkept = static_cast<size_t>(dst.dim()) - red_shape.size();
    parallel_for(nk, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        int64_t base = 0, rem = k;
        for (size_t i = nkept; i-- > 0;) {
          base += (rem % p.size(static_cast<int64_t>(i))) * p.stride(static_cast<int64_t>(i));
          rem /= p.size(static_cast<int64_t>(i));
        }
        double acc = 0;
        for (int64_t r = 0; r < nr; ++r) {
          int64_t off = base, rr = r;
          for (size_t i = red_shape.size(); i-- > 0;) {
            const int64_t dim = static_cast<int64_t>(nkept + i);
            off += (rr % p.size(dim)) * p.stride(dim);
            rr /= p.size(dim);
          }
          acc += s[off];
        }
        store(k, acc);
      }
    });
  });
}

}  // namespace saobp::cpu
