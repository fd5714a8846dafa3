// CPU kernels: fill, copy, cast, axpby, binary (broadcast), unary and its backward.
// CUDA twin: src/tensor/cuda/elementwise.cpp + elementwise.cu.
#include <malloc.h>

#include <cmath>
#include <cstring>

#include "tensor/bf16.h"
#include "tensor/cpu/common.h"
#include "tensor/formulas.h"

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

// dst (+)= src; src and dst: same shape, any strides (src may broadcast with stride 0). bf16 is
// copied as its bits (not accumulated: the dispatcher refuses it).
void copy(const Tensor& src, Tensor& dst, bool accumulate) {
  if (dst.dtype() == DType::bf16) {
    const bf16* s = src.data<bf16>();
    bf16* d = dst.data<bf16>();
    strided_for<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](auto off, int64_t n, auto step) {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * step[0]] = s[off[1] + i * step[1]];
    });
    return;
  }
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

// dst = src converted; both contiguous with equal numel. bf16 to and from f32 (tensor/bf16.h).
void cast(const Tensor& src, Tensor& dst) {
  if (src.dtype() == DType::bf16 || dst.dtype() == DType::bf16) {
    const int64_t n = src.numel();
    if (src.dtype() == dst.dtype()) {
      std::copy(src.data<bf16>(), src.data<bf16>() + n, dst.data<bf16>());
    } else if (dst.dtype() == DType::bf16) {
      const float* s = src.data<float>();
      bf16* d = dst.data<bf16>();
      parallel_for(n, 32768, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i].bits = bf16_bits(s[i]);
      });
    } else {
      const bf16* s = src.data<bf16>();
      float* d = dst.data<float>();
      parallel_for(n, 32768, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = bf16_value(s[i].bits);
      });
    }
    return;
  }
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

template <class T, formula::Arith OP>
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
                     for (int64_t i = 0; i < n; ++i) o[i] = formula::arith<T, OP>(x[i], y[i]);
                   } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                     const T yv = *y;
                     for (int64_t i = 0; i < n; ++i) o[i] = formula::arith<T, OP>(x[i], yv);
                   } else {
                     for (int64_t i = 0; i < n; ++i)
                       o[i * st[0]] = formula::arith<T, OP>(x[i * st[1]], y[i * st[2]]);
                   }
                 });
}

// out = a op b; a, b broadcast to out's shape (any strides); out contiguous.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case BinaryOp::add:
        return binary_loop<T, formula::Arith::add>(a, b, out);
      case BinaryOp::sub:
        return binary_loop<T, formula::Arith::sub>(a, b, out);
      case BinaryOp::mul:
        return binary_loop<T, formula::Arith::mul>(a, b, out);
      case BinaryOp::div:
        return binary_loop<T, formula::Arith::div>(a, b, out);
    }
  });
}

// y = f(x):  exp, log, log1p, softplus(x) = log(1 + e^x) (computed as max(x,0) + log1p(e^-|x|)).
// f'(x):     exp → y,  log → 1/x,  log1p → 1/(1+x),  softplus → σ(x) = 1/(1 + e^-x).
void unary(UnaryOp op, const Tensor& x, Tensor& y) {
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
