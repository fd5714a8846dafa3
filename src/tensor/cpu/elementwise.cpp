// CPU kernels: fill, copy, cast, axpby, binary (broadcast), reduce_sum_to.
// CUDA twins: src/tensor/cuda/elementwise.cu, src/tensor/cuda/reduce.cu.
#include <malloc.h>

#include <cmath>
#include <cstring>

#include "tensor/cpu/common.h"
#include "tensor/cpu/vec_math.h"

namespace saobp::cpu {

namespace {
// Host buffers are recycled inside the process. By default glibc serves every block above its
// mmap threshold (128 KB, rising with use to at most 32 MB) with its own mmap and unmaps it on
// free, and trims the heap top above 128 KB: each training step then page-faulted and the
// kernel zero-filled its large temporaries again (BERT-Mini at B=32, T=128: the MLM logits and
// their gradient are 74 MB each, the word-embedding gradient 31 MB), about 5% of the step in
// the kernel. With mmap off and a 1 GB trim threshold freed blocks stay in the heap for the next
// step. Set once, when this file's objects are initialized (it holds the fill kernel, so it is
// in every binary that makes a tensor).
[[maybe_unused]] const bool kHostHeapTuned = [] {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();
}  // namespace

// out: any strides.
void fill(Tensor& out, double value) {
  dispatch_any(out.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    T* p = out.data<T>();
    strided_for<1>(out.shape(), {&out.strides()}, [&](auto off, int64_t n, auto step) {
      T* q = p + off[0];
      for (int64_t i = 0; i < n; ++i) q[i * step[0]] = v;
    });
  });
}

// dst (+)= src; src and dst: same shape, any strides (src may broadcast with stride 0).
void copy(const Tensor& src, Tensor& dst, bool accumulate) {
  check_shape(src, dst.shape(), "copy", "source");
  check_dtype(src, dst.dtype(), "copy", "source");
  dispatch_any(dst.dtype(), "copy", [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* d = dst.data<T>();
    strided_for<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](auto off, int64_t n, auto step) {
      T* dq = d + off[0];
      const T* sq = s + off[1];
      if (!accumulate && step[0] == 1 && step[1] == 1) {
        std::memcpy(dq, sq, static_cast<size_t>(n) * sizeof(T));
      } else if (accumulate) {
        for (int64_t i = 0; i < n; ++i) dq[i * step[0]] += sq[i * step[1]];
      } else {
        for (int64_t i = 0; i < n; ++i) dq[i * step[0]] = sq[i * step[1]];
      }
    });
  });
}

// dst = src converted; both contiguous with equal numel.
void cast(const Tensor& src, Tensor& dst) {
  if (src.numel() != dst.numel() || !src.is_contiguous() || !dst.is_contiguous())
    fail("cast", "cast from {} to {} needs contiguous tensors of equal size", src.str(), dst.str());
  dispatch_any(src.dtype(), "cast", [&](auto stag) {
    using S = decltype(stag);
    dispatch_any(dst.dtype(), "cast", [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      parallel_for(src.numel(), 32768, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = static_cast<D>(s[i]);
      });
    });
  });
}

// y = alpha x + beta y; x, y contiguous, same numel.
void axpby(const Tensor& x, double alpha, Tensor& y, double beta) {
  if (x.numel() != y.numel()) fail("axpby", "sizes differ: {} and {}", x.str(), y.str());
  check_dtype(x, y.dtype(), "axpby", "x");
  dispatch_float(y.dtype(), "axpby", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    const T a = static_cast<T>(alpha), bb = static_cast<T>(beta);
    parallel_for(y.numel(), 32768, [&](int64_t b, int64_t e) {
      if (beta == 0.0)
        for (int64_t i = b; i < e; ++i) yp[i] = a * xp[i];
      else if (beta == 1.0 && alpha == 1.0)
        for (int64_t i = b; i < e; ++i) yp[i] += xp[i];
      else
        for (int64_t i = b; i < e; ++i) yp[i] = a * xp[i] + bb * yp[i];
    });
  });
}

template <class T, BinaryOp OP>
static inline T apply(T a, T b) {
  if constexpr (OP == BinaryOp::add) return a + b;
  if constexpr (OP == BinaryOp::sub) return a - b;
  if constexpr (OP == BinaryOp::mul) return a * b;
  if constexpr (OP == BinaryOp::div) return a / b;
}

template <class T, BinaryOp OP>
static void binary_loop(const Tensor& a, const Tensor& b, Tensor& out) {
  const Tensor ae = a.expand(out.shape()), be = b.expand(out.shape());
  const T* ap = ae.data<T>();
  const T* bp = be.data<T>();
  T* op = out.data<T>();
  strided_for<3>(out.shape(), {&out.strides(), &ae.strides(), &be.strides()},
                 [&](auto off, int64_t n, auto st) {
                   T* o = op + off[0];
                   const T* x = ap + off[1];
                   const T* y = bp + off[2];
                   if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                     for (int64_t i = 0; i < n; ++i) o[i] = apply<T, OP>(x[i], y[i]);
                   } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                     const T yv = *y;
                     for (int64_t i = 0; i < n; ++i) o[i] = apply<T, OP>(x[i], yv);
                   } else {
                     for (int64_t i = 0; i < n; ++i) o[i * st[0]] = apply<T, OP>(x[i * st[1]], y[i * st[2]]);
                   }
                 });
}

// out = a op b; a, b broadcast to out's shape (any strides); out contiguous.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  check_dtype(a, out.dtype(), "binary", "a");
  check_dtype(b, out.dtype(), "binary", "b");
  dispatch_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case BinaryOp::add:
        return binary_loop<T, BinaryOp::add>(a, b, out);
      case BinaryOp::sub:
        return binary_loop<T, BinaryOp::sub>(a, b, out);
      case BinaryOp::mul:
        return binary_loop<T, BinaryOp::mul>(a, b, out);
      case BinaryOp::div:
        return binary_loop<T, BinaryOp::div>(a, b, out);
    }
  });
}

// dst (+)= alpha * sum of src over the dims where dst has size 1.
// src: contiguous; dst: contiguous, dst.dim() == src.dim().
// Every dst element sums its inputs in increasing flat-index order, in double.
void reduce_sum_to(const Tensor& src, Tensor& dst, double alpha, bool accumulate) {
  if (src.dim() != dst.dim()) fail("reduce_sum_to", "rank differs: {} to {}", src.str(), dst.str());
  for (int64_t d = 0; d < src.dim(); ++d)
    if (dst.size(d) != 1 && dst.size(d) != src.size(d))
      fail("reduce_sum_to", "cannot reduce {} to {}", src.str(), dst.str());
  check_dtype(src, dst.dtype(), "reduce_sum_to", "src");
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
        parallel_for(K, std::max<int64_t>(1, 4096 / (R * S)), [&](int64_t b, int64_t e) {
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

namespace saobp::cpu {

// y = f(x):  exp, log, log1p, softplus(x) = log(1 + e^x) (computed as max(x,0) + log1p(e^-|x|)).
// f'(x):     exp → y,  log → 1/x,  log1p → 1/(1+x),  softplus → σ(x) = 1/(1 + e^-x).
void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  check_shape(y, x.shape(), "unary", "output");
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T v = xp[i];
        switch (op) {
          case UnaryOp::exp:
            yp[i] = std::exp(v);
            break;
          case UnaryOp::log:
            yp[i] = std::log(v);
            break;
          case UnaryOp::log1p:
            yp[i] = std::log1p(v);
            break;
          case UnaryOp::softplus:
            yp[i] = std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
            break;
        }
      }
    });
  });
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  check_shape(gy, x.shape(), "unary_backward", "gy");
  check_shape(gx, x.shape(), "unary_backward", "gx");
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.data<T>(), *yp = y.data<T>(), *g = gy.data<T>();
    T* o = gx.data<T>();
    parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        switch (op) {
          case UnaryOp::exp:
            o[i] += g[i] * yp[i];
            break;
          case UnaryOp::log:
            o[i] += g[i] / xp[i];
            break;
          case UnaryOp::log1p:
            o[i] += g[i] / (T(1) + xp[i]);
            break;
          case UnaryOp::softplus:
            o[i] += g[i] / (T(1) + std::exp(-xp[i]));
            break;
        }
      }
    });
  });
}

}  // namespace saobp::cpu
