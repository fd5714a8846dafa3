// saobp::cuda fill, copy, cast, axpby, binary, unary: the host halves of elementwise.cu.
// CPU twin: src/tensor/cpu/elementwise.cpp.
#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {

Arith to_arith(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return Arith::add;
    case BinaryOp::sub:
      return Arith::sub;
    case BinaryOp::mul:
      return Arith::mul;
    case BinaryOp::div:
      return Arith::div;
  }
  fail("binary", "unknown operation {}", static_cast<int>(op));
}

Unary to_unary(UnaryOp op, const char* name) {
  switch (op) {
    case UnaryOp::exp:
      return Unary::exp;
    case UnaryOp::log:
      return Unary::log;
    case UnaryOp::log1p:
      return Unary::log1p;
    case UnaryOp::softplus:
      return Unary::softplus;
  }
  fail(name, "unknown operation {}", static_cast<int>(op));
}

}  // namespace

// out: any strides.
void fill(Tensor& out, double value) {
  use_device_of(out, "fill");
  if (out.numel() == 0) return;
  dispatch_any(out.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    const auto ix = make_indexer<1>(out.shape(), {&out.strides()}, "fill");
    check(launch_fill<T>(out.data<T>(), ix, out.numel(), static_cast<T>(value)), "fill");
  });
}

// dst (+)= src; same shape, any strides (src may broadcast with stride 0).
void copy(const Tensor& src, Tensor& dst, bool accumulate) {
  use_device_of(dst, "copy");
  if (dst.numel() == 0) return;
  if (dst.dtype() == DType::bf16) {  // as its bits, never accumulated (the dispatcher's check)
    const auto ix = make_indexer<2>(dst.shape(), {&dst.strides(), &src.strides()}, "copy");
    check(launch_copy<uint16_t>(&src.data<bf16>()->bits, &dst.data<bf16>()->bits, ix, dst.numel(), false),
          "copy");
    return;
  }
  dispatch_any(dst.dtype(), "copy", [&](auto tag) {
    using T = decltype(tag);
    const auto ix = make_indexer<2>(dst.shape(), {&dst.strides(), &src.strides()}, "copy");
    check(launch_copy<T>(src.data<T>(), dst.data<T>(), ix, dst.numel(), accumulate), "copy");
  });
}

// dst = src converted; both contiguous with equal numel.
void cast(const Tensor& src, Tensor& dst) {
  use_device_of(dst, "cast");
  if (dst.numel() == 0) return;
  if (src.dtype() == DType::bf16 || dst.dtype() == DType::bf16) {  // to and from f32 (tensor/bf16.h)
    if (src.dtype() == dst.dtype()) {                              // the bits, as copy moves them
      Tensor out = dst.view({dst.numel()});
      copy(src.view({src.numel()}), out, false);
    } else if (dst.dtype() == DType::bf16) {
      check(launch_to_bf16(src.data<float>(), &dst.data<bf16>()->bits, dst.numel()), "cast");
    } else {
      check(launch_from_bf16(&src.data<bf16>()->bits, dst.data<float>(), dst.numel()), "cast");
    }
    return;
  }
  dispatch_any(src.dtype(), "cast", [&](auto stag) {
    using S = decltype(stag);
    dispatch_any(dst.dtype(), "cast", [&](auto dtag) {
      using D = decltype(dtag);
      check(launch_cast<S, D>(src.data<S>(), dst.data<D>(), dst.numel()), "cast");
    });
  });
}

// y = alpha x + beta y; x, y contiguous, same numel. beta == 0 ignores y (NaN included).
void axpby(const Tensor& x, double alpha, Tensor& y, double beta) {
  use_device_of(y, "axpby");
  if (y.numel() == 0) return;
  dispatch_float(y.dtype(), "axpby", [&](auto tag) {
    using T = decltype(tag);
    check(launch_axpby<T>(x.data<T>(), static_cast<T>(alpha), y.data<T>(), static_cast<T>(beta), beta == 0.0,
                          y.numel()),
          "axpby");
  });
}

// out = a op b; a, b broadcast to out's shape (any strides), out any strides.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  use_device_of(out, "binary");
  const Tensor ae = a.expand(out.shape()), be = b.expand(out.shape());
  if (out.numel() == 0) return;
  const Arith arith = to_arith(op);
  dispatch_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const auto ix = make_indexer<3>(out.shape(), {&out.strides(), &ae.strides(), &be.strides()}, "binary");
    check(launch_binary<T>(arith, ae.data<T>(), be.data<T>(), out.data<T>(), ix, out.numel()), "binary");
  });
}

// y = f(x); x, y contiguous, same shape.
void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  use_device_of(y, "unary");
  if (x.numel() == 0) return;
  const Unary f = to_unary(op, "unary");
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    check(launch_unary<T>(f, x.data<T>(), y.data<T>(), x.numel()), "unary");
  });
}

// gx += gy * f'(x), with y = f(x) given.
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  use_device_of(gx, "unary_backward");
  if (x.numel() == 0) return;
  const Unary f = to_unary(op, "unary_backward");
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    check(launch_unary_backward<T>(f, x.data<T>(), y.data<T>(), gy.data<T>(), gx.data<T>(), x.numel()),
          "unary_backward");
  });
}

}  // namespace saobp::cuda
