// Tensor: creation, metadata, views (shared storage, strides), copies, broadcasting and the
// errors of bad geometry.
#include <bit>
#include <cmath>

#include "support.h"
#include "tensor/device_info.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::values;

namespace {

// 0, 1, 2, ... as f32 in the given shape.
Tensor iota(const Shape& shape, DType dtype = DType::f32) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::from_vector(v, shape).to(dtype);
}

// Element at a multi-index of a strided tensor, read straight from storage.
float at(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
  return t.data<float>()[off];
}

void set(const Tensor& t, const std::vector<int64_t>& idx, float v) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
  t.data<float>()[off] = v;
}

}  // namespace

TEST_CASE("creation, metadata and host access", "[tensor]") {
  const Tensor z = Tensor::zeros({2, 3});
  CHECK(z.defined());
  CHECK(z.dim() == 2);
  CHECK(z.numel() == 6);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.is_contiguous());
  CHECK(z.dtype() == DType::f32);
  CHECK(z.device().is_cpu());
  CHECK(z.str() == "f32[2, 3] cpu");
  CHECK(values(z) == std::vector<double>(6, 0.0));
  CHECK(values(Tensor::full({2, 2}, 2.5, DType::f64)) == std::vector<double>(4, 2.5));
  const Tensor s = Tensor::scalar(3.0, DType::i32);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item() == 3.0);
  CHECK(s.item<int32_t>() == 3);
  CHECK(Tensor::from_vector(std::vector<uint8_t>{1, 0, 1}).to_vector<uint8_t>() ==
        std::vector<uint8_t>{1, 0, 1});
  CHECK_FALSE(Tensor().defined());
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(shape_numel({2, 0, 4}) == 0);
  CHECK(Tensor::zeros({3, 0}).numel() == 0);
  CHECK(Device::parse("cuda:1") == Device::cuda(1));
  CHECK_ERROR(Device::parse("tpu"), Contains("[device]") && Contains("tpu"));
  CHECK_ERROR(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
              Contains("[from_vector]") && Contains("[2, 2]"));
  CHECK_ERROR(Tensor::empty({2, -1}), Contains("[empty]"));
  CHECK_ERROR(Tensor::zeros({2, 2}).item(), Contains("[item]"));
}

TEST_CASE("data<T>() checks the dtype", "[tensor]") {
  const Tensor t = Tensor::zeros({2}, DType::f32);
  CHECK_NOTHROW(t.data<float>());
  CHECK_ERROR(t.data<double>(), Contains("[data]") && Contains("f32[2]") && Contains("f64"));
  CHECK_THROWS_AS(t.data<int32_t>(), saobp::Error);
  CHECK_THROWS_AS(Tensor::zeros({2}, DType::u8).data<float>(), saobp::Error);
  CHECK_ERROR(Tensor().raw(), Contains("[data]"));
}

TEST_CASE("view shares storage, infers -1 and rejects bad shapes", "[tensor]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor v = x.view({6, -1});
  CHECK(v.shape() == Shape{6, 4});
  CHECK(v.strides() == Shape{4, 1});
  CHECK(v.shares_storage(x));
  set(v, {5, 3}, -7.0f);  // write through the view
  CHECK(at(x, {1, 2, 3}) == -7.0f);
  CHECK(x.view({24}).shape() == Shape{24});
  CHECK(x.view({-1}).shape() == Shape{24});
  CHECK(x.view({2, 1, 12}).strides() == Shape{12, 12, 1});
  CHECK_ERROR(x.view({5, 5}), Contains("[view]") && Contains("[5, 5]"));
  CHECK_ERROR(x.view({-1, -1}), Contains("[view]"));
  CHECK_ERROR(x.view({7, -1}), Contains("[view]"));
  CHECK_ERROR(x.view({-2, 12}), Contains("[view]"));
  CHECK_ERROR(x.transpose(0, 1).view({24}), Contains("[view]") && Contains("reshape"));
}

TEST_CASE("reshape views contiguous data and copies non-contiguous data", "[tensor]") {
  const Tensor x = iota({2, 3});
  const Tensor r = x.reshape({3, 2});
  CHECK(r.shares_storage(x));
  CHECK(values(r) == std::vector<double>{0, 1, 2, 3, 4, 5});

  const Tensor t = x.transpose(0, 1);  // (3,2): 0 3 1 4 2 5
  CHECK_FALSE(t.is_contiguous());
  const Tensor rt = t.reshape({6});
  CHECK_FALSE(rt.shares_storage(x));
  CHECK(rt.is_contiguous());
  CHECK(values(rt) == std::vector<double>{0, 3, 1, 4, 2, 5});
  set(rt, {0}, 100.0f);  // a copy: the base is untouched
  CHECK(at(x, {0, 0}) == 0.0f);

  CHECK_THROWS_AS(x.reshape({4}), saobp::Error);
  CHECK_THROWS_AS(t.reshape({5}), saobp::Error);
  CHECK_ERROR(x.reshape({4, -1}), Contains("cannot view") && Contains("[4, -1]"));
}

TEST_CASE("transpose and permute swap strides and write through", "[tensor]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor t = x.transpose(0, 2);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK(t.shares_storage(x));
  CHECK_FALSE(t.is_contiguous());
  CHECK(at(t, {3, 1, 1}) == at(x, {1, 1, 3}));
  set(t, {2, 0, 1}, 99.0f);
  CHECK(at(x, {1, 0, 2}) == 99.0f);
  CHECK(x.transpose(-1, -2).shape() == Shape{2, 4, 3});

  const Tensor p = x.permute({1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(p.strides() == Shape{4, 1, 12});
  CHECK(p.shares_storage(x));
  CHECK(at(p, {2, 3, 1}) == at(x, {1, 2, 3}));
  CHECK(x.permute({-3, -2, -1}).strides() == x.strides());
  CHECK_ERROR(x.permute({0, 1}), Contains("[permute]"));
  CHECK_ERROR(x.permute({0, 1, 1}), Contains("[permute]") && Contains("repeats"));
  CHECK_ERROR(x.permute({0, 1, 3}), Contains("permute") && Contains("3"));
  CHECK_ERROR(x.transpose(0, 3), Contains("transpose") && Contains("3"));
  CHECK_ERROR(x.transpose(-4, 0), Contains("transpose") && Contains("-4"));
}

TEST_CASE("slice, split and squeeze/unsqueeze are views", "[tensor]") {
  const Tensor x = iota({4, 5});
  const Tensor s = x.slice(1, 1, 4);
  CHECK(s.shape() == Shape{4, 3});
  CHECK(s.strides() == Shape{5, 1});
  CHECK(s.offset() == 1);
  CHECK(s.shares_storage(x));
  CHECK_FALSE(s.is_contiguous());
  CHECK(values(s) == std::vector<double>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18});
  set(s, {2, 2}, -1.0f);
  CHECK(at(x, {2, 3}) == -1.0f);
  const Tensor rows = x.slice(0, 1, 3);
  CHECK(rows.is_contiguous());
  CHECK(rows.offset() == 5);
  CHECK(x.slice(0, 2, 2).numel() == 0);
  CHECK(x.slice(-1, 0, 5).shape() == x.shape());
  CHECK_ERROR(x.slice(1, 2, 6), Contains("[slice]") && Contains("[2, 6)"));
  CHECK_ERROR(x.slice(1, -1, 2), Contains("[slice]"));
  CHECK_ERROR(x.slice(0, 3, 2), Contains("[slice]"));
  CHECK_ERROR(x.slice(2, 0, 1), Contains("slice") && Contains("2"));

  const auto parts = x.split(1, 2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{4, 2});
  CHECK(parts[2].shape() == Shape{4, 1});
  CHECK(parts[2].offset() == 4);
  for (const auto& p : parts) CHECK(p.shares_storage(x));
  set(parts[1], {3, 0}, 55.0f);
  CHECK(at(x, {3, 2}) == 55.0f);
  CHECK_ERROR(x.split(1, 0), Contains("[split]"));
  CHECK_ERROR(x.split(2, 1), Contains("split"));

  const Tensor u = x.unsqueeze(1);
  CHECK(u.shape() == Shape{4, 1, 5});
  CHECK(u.is_contiguous());
  CHECK(u.shares_storage(x));
  CHECK(x.unsqueeze(-1).shape() == Shape{4, 5, 1});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 4, 5});
  CHECK(u.squeeze(1).shape() == Shape{4, 5});
  CHECK(u.squeeze(1).strides() == Shape{5, 1});
  CHECK(u.squeeze(1).shares_storage(x));
  set(x.unsqueeze(0).unsqueeze(2), {0, 3, 0, 4}, 42.0f);
  CHECK(at(x, {3, 4}) == 42.0f);
  CHECK_ERROR(x.unsqueeze(3), Contains("[unsqueeze]"));
  CHECK_ERROR(x.squeeze(0), Contains("[squeeze]") && Contains("not 1"));
  CHECK_ERROR(u.squeeze(3), Contains("squeeze") && Contains("3"));
}

TEST_CASE("expand broadcasts with stride 0", "[tensor]") {
  const Tensor b = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor e = b.expand({2, 3});
  CHECK(e.shape() == Shape{2, 3});
  CHECK(e.strides() == Shape{0, 1});
  CHECK(e.shares_storage(b));
  CHECK(values(e) == std::vector<double>{1, 2, 3, 1, 2, 3});
  const Tensor c = Tensor::from_vector(std::vector<float>{1, 2}, {2, 1}).expand({3, 2, 4});
  CHECK(c.strides() == Shape{0, 1, 0});
  CHECK_FALSE(c.is_contiguous());
  const Tensor cc = c.contiguous();
  CHECK(cc.is_contiguous());
  CHECK(values(cc.slice(0, 2, 3)) == std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2});
  CHECK_ERROR(b.expand({2, 4}), Contains("[expand]") && Contains("[2, 4]"));
  CHECK_ERROR(b.expand({}), Contains("[expand]"));
}

TEST_CASE("split_heads is a strided view of (B,T,C) as (B,NH,T,HS)", "[tensor]") {
  const int64_t B = 2, T = 3, NH = 2, HS = 4, C = NH * HS;
  const Tensor x = iota({B, T, C});
  const Tensor h = x.split_heads(NH);
  CHECK(h.shape() == Shape{B, NH, T, HS});
  CHECK(h.strides() == Shape{T * C, HS, C, 1});
  CHECK(h.shares_storage(x));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < NH; ++n)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s < HS; ++s) REQUIRE(at(h, {b, n, t, s}) == at(x, {b, t, n * HS + s}));
  set(h, {1, 1, 2, 3}, -3.0f);
  CHECK(at(x, {1, 2, 7}) == -3.0f);
  CHECK_ERROR(x.split_heads(3), Contains("[split_heads]"));
  CHECK_ERROR(Tensor::zeros({2, 8}).split_heads(2), Contains("[split_heads]"));
}

TEST_CASE("contiguous() copies only when needed, clone() always copies", "[tensor]") {
  const Tensor x = iota({3, 4});
  const Tensor c = x.contiguous();
  CHECK(c.shares_storage(x));
  CHECK(c.raw() == x.raw());
  const Tensor rows = x.slice(0, 1, 3);  // contiguous although offset
  CHECK(rows.contiguous().raw() == rows.raw());
  const Tensor one = x.slice(1, 2, 3);  // (3,1) with stride 4: not contiguous
  CHECK_FALSE(one.is_contiguous());
  const Tensor oc = one.contiguous();
  CHECK_FALSE(oc.shares_storage(x));
  CHECK(values(oc) == std::vector<double>{2, 6, 10});
  // Size-1 dims do not break contiguity, whatever their stride.
  const Tensor col = x.slice(0, 1, 2).transpose(0, 1);  // (4,1) with strides (1,4)
  CHECK(col.is_contiguous());
  CHECK(col.contiguous().raw() == col.raw());
  const Tensor t = x.transpose(0, 1).contiguous();
  CHECK_FALSE(t.shares_storage(x));
  CHECK(t.strides() == Shape{3, 1});
  CHECK(values(t) == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  const Tensor k = x.clone();
  CHECK_FALSE(k.shares_storage(x));
  CHECK(saobp::test::bitwise_equal(k, x));
}

TEST_CASE("zero-size tensors are contiguous and can be viewed", "[tensor]") {
  for (const Shape& s : {Shape{3, 0}, Shape{0, 4}, Shape{2, 0, 5}}) {
    INFO(shape_str(s));
    const Tensor t = Tensor::zeros(s);
    CHECK(t.numel() == 0);
    CHECK(t.is_contiguous());
    CHECK(t.contiguous().shares_storage(t));
    CHECK(t.view({0, 7}).shape() == Shape{0, 7});
    CHECK(t.reshape({-1}).numel() == 0);
    CHECK(values(t.clone()).empty());
  }
}

TEST_CASE("copy_from broadcasts and converts, to(dtype) casts", "[tensor]") {
  Tensor dst = Tensor::zeros({2, 3}, DType::f64);
  dst.copy_from(Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.0f}, {3}));
  CHECK(values(dst) == std::vector<double>{1.5, -2, 3, 1.5, -2, 3});
  Tensor tv = dst.transpose(0, 1);  // write into a strided destination
  tv.copy_from(iota({3, 2}, DType::f64));
  CHECK(values(dst) == std::vector<double>{0, 2, 4, 1, 3, 5});
  CHECK_ERROR(dst.copy_from(Tensor::zeros({4}, DType::f64)), Contains("[expand]"));
  const Tensor i = Tensor::from_vector(std::vector<float>{1.9f, -2.9f, 0.0f}).to(DType::i32);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 0});
  CHECK(values(i.to(DType::f64)) == std::vector<double>{1, -2, 0});
  CHECK(values(Tensor::from_vector(std::vector<uint8_t>{0, 1, 255}).to(DType::f32)) ==
        std::vector<double>{0, 1, 255});
  const Tensor same = dst.to(DType::f64);
  CHECK(same.shares_storage(dst));
  if (!cuda::built()) CHECK_ERROR(Tensor::zeros({2}).to(Device::cuda(0)), Contains("without CUDA"));
}

TEST_CASE("broadcast_shapes follows numpy and names the op and shapes", "[tensor]") {
  CHECK(broadcast_shapes({2, 3}, {3}, "t") == Shape{2, 3});
  CHECK(broadcast_shapes({2, 1, 4}, {3, 1}, "t") == Shape{2, 3, 4});
  CHECK(broadcast_shapes({1}, {2, 3}, "t") == Shape{2, 3});
  CHECK(broadcast_shapes({}, {2, 3}, "t") == Shape{2, 3});
  CHECK(broadcast_shapes({5, 1}, {1, 6}, "t") == Shape{5, 6});
  CHECK_ERROR(broadcast_shapes({2, 3}, {4}, "add"),
              Contains("[add]") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_ERROR(broadcast_shapes({2, 3, 4}, {2, 1, 3}, "mul"), Contains("[mul]"));
}

TEST_CASE("check helpers name the op", "[tensor]") {
  const Tensor x = Tensor::zeros({2, 3});
  CHECK_NOTHROW(check_shape(x, {2, 3}, "op", "x"));
  CHECK_ERROR(check_shape(x, {3, 2}, "myop", "weight"),
              Contains("[myop]") && Contains("weight") && Contains("[3, 2]") && Contains("[2, 3]"));
  CHECK_ERROR(check_shape(Tensor(), {1}, "myop", "bias"), Contains("undefined"));
  CHECK_ERROR(check_dtype(x, DType::i32, "myop", "ids"), Contains("[myop]") && Contains("i32"));
}

TEST_CASE("bf16: round to nearest even, inf past the largest, NaN kept, exact widening", "[tensor]") {
  const auto f = [](uint32_t u) { return std::bit_cast<float>(u); };
  // (binary32 bits, bf16 bits): exact, ties to even both ways, above and below a tie, signed
  // zero, infinities, rounding past the largest finite bf16 to inf and just below it to it,
  // subnormals (ties to even too), quiet and signaling NaNs of both signs made quiet.
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3F800000, 0x3F80}, {0x3F808000, 0x3F80}, {0x3F818000, 0x3F82}, {0x3F808001, 0x3F81},
      {0x3F807FFF, 0x3F80}, {0x80000000, 0x8000}, {0xBF808000, 0xBF80}, {0x7F800000, 0x7F80},
      {0xFF800000, 0xFF80}, {0x7F7FFFFF, 0x7F80}, {0x7F7F7FFF, 0x7F7F}, {0x00000001, 0x0000},
      {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x7FC00000, 0x7FC0}, {0x7F800001, 0x7FC0},
      {0xFFC12345, 0xFFC1}, {0xFF800001, 0xFFC0}};
  std::vector<float> in;
  for (const auto& [x, b] : cases) {
    INFO(std::hex << x);
    CHECK(bf16_bits(f(x)) == b);
    in.push_back(f(x));
  }
  // Widening is exact: every bf16 back to the float with those top bits.
  for (uint32_t b = 0; b < 0x10000; b += 257)
    CHECK(std::bit_cast<uint32_t>(bf16_value(uint16_t(b))) == b << 16);
  // Tensors: f32 -> bf16 -> f32 through kern::cast gives bf16_value(bf16_bits(x)), NaN for NaN.
  const Tensor x = Tensor::from_vector(in, {static_cast<int64_t>(in.size())});
  const Tensor h = x.to(DType::bf16);
  CHECK(h.dtype() == DType::bf16);
  const std::vector<float> back = h.to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < in.size(); ++i) {
    INFO(i);
    CHECK(h.data<bf16>()[i].bits == cases[i].second);
    if (std::isnan(in[i]))
      CHECK(std::isnan(back[i]));
    else
      CHECK(std::bit_cast<uint32_t>(back[i]) == uint32_t(cases[i].second) << 16);
  }
  // bf16 converts to and from f32 only.
  CHECK_ERROR(x.to(DType::f64).to(DType::bf16), Contains("bf16 converts to and from f32 only"));
  CHECK_ERROR(h.to(DType::i32), Contains("bf16 converts to and from f32 only"));
}
