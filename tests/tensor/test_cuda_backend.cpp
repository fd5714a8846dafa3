// The CUDA backend against the CPU reference: every kernel of kernels.inc runs on the same
// inputs on both devices and must agree (f64 to 1e-12, f32 to 1e-5, relative to the largest
// reference value; bitwise where both sides do the same IEEE operations in the same order).
// The reductions and GEMM must also be bitwise identical run to run on the GPU. Without a GPU
// every case is skipped with a warning.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/kernels.h"
#include "autograd/regularizers.h"
#include "support.h"
#include "tensor/backend.h"
#include "tensor/kernels.h"

using namespace saobp;

namespace {

const Device kCpu = Device::cpu();
const Device kGpu = Device::cuda();
const DType kFloating[] = {DType::f32, DType::f64};
const DType kStorable[] = {DType::f32, DType::f64, DType::i32, DType::u8};

double tolerance(DType t) { return t == DType::f64 ? 1e-12 : 1e-5; }

// A CPU tensor of N(0, scale^2) values, drawn by the CPU kernel.
Tensor randn(const Shape& s, DType t, uint64_t seed, double scale = 1.0) {
  Tensor x = Tensor::empty(s, t);
  kern::fill_random(x, RandomKind::normal, 0.0, scale, RngKey{seed, 0, 0});
  return x;
}

Tensor uniform(const Shape& s, DType t, double lo, double hi, uint64_t seed) {
  Tensor x = Tensor::empty(s, DType::f64);
  kern::fill_random(x, RandomKind::uniform, lo, hi, RngKey{seed, 1, 0});
  return x.to(t);
}

// i32 values in [0, limit).
Tensor random_ids(int64_t n, int32_t limit, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(gen() % static_cast<uint32_t>(limit));
  return Tensor::from_vector(v, {n});
}

// u8 values, 1 with probability `keep`.
Tensor random_mask(const Shape& s, double keep, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = gen() < keep * 4294967296.0;
  return Tensor::from_vector(v, s);
}

Tensor gpu(const Tensor& t) { return t.to(kGpu); }  // always a fresh device copy

// A device copy of a vector, or with `offset` one element past an aligned start: contiguous, but
// 4 (8) bytes off the 16-byte alignment cuBLASLt's epilogues want.
Tensor gpu_vector(const Tensor& v, bool offset) {
  if (!offset) return gpu(v);
  Tensor big = Tensor::empty({v.numel() + 1}, v.dtype(), kGpu);
  Tensor tail = big.slice(0, 1, v.numel() + 1);
  kern::copy(gpu(v), tail, false);
  return tail;
}

// max |got - want| / max |want| (0 when both are all zero; infinite on a NaN in only one).
double rel_err(const Tensor& want, const Tensor& got) {
  const auto w = want.to(kCpu).to(DType::f64).to_vector<double>();
  const auto g = got.to(kCpu).to(DType::f64).to_vector<double>();
  REQUIRE(w.size() == g.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    diff = std::max(diff, std::abs(w[i] - g[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return diff == 0 ? 0 : diff / scale;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(kCpu).contiguous(), hb = b.to(kCpu).contiguous();
  return ha.dtype() == hb.dtype() && ha.shape() == hb.shape() &&
         std::memcmp(ha.raw(), hb.raw(), static_cast<size_t>(ha.numel()) * dtype_size(ha.dtype())) == 0;
}

#define CHECK_CLOSE(want, got, dtype)               \
  do {                                              \
    INFO(#got << " (" << dtype_name(dtype) << ")"); \
    CHECK(rel_err(want, got) <= tolerance(dtype));  \
  } while (0)

}  // namespace

TEST_CASE("cuda runtime: device, copies, caching allocator", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  CHECK(saobp::cuda::built());
  CHECK(!saobp::cuda::device_name(0).empty());
  const std::vector<float> v{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  const Tensor t = Tensor::from_vector(v, {2, 3}, kGpu);
  CHECK(t.to_vector<float>() == v);
  CHECK(t.clone().to_vector<float>() == v);
  void* first = nullptr;
  {
    const Tensor a = Tensor::empty({1000}, DType::f32, kGpu);
    first = a.raw();
  }
  const Tensor b = Tensor::empty({1000}, DType::f32, kGpu);
  CHECK(b.raw() == first);  // the freed block came back from the cache
  saobp::cuda::synchronize(0);
}

// Issue "Train on the GPU", item 3: asking for more than the GPU holds is an error that names the
// GiB asked for and free and the keys to lower, and the device goes on working after it.
TEST_CASE("cuda runtime: out of memory is an error naming the sizes and the keys", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const saobp::cuda::DeviceProperties p = saobp::cuda::device_properties(0);
  const int64_t floats = static_cast<int64_t>(p.total_bytes / 4) + (int64_t{1} << 28);  // 1 GiB past the card
  CHECK_ERROR(Tensor::empty({floats}, DType::f32, kGpu),
              Catch::Matchers::Contains("out of GPU memory on cuda:0") &&
                  Catch::Matchers::Contains("GiB free") && Catch::Matchers::Contains("train.batch_size") &&
                  Catch::Matchers::Contains("train.seq_len"));
  const std::vector<float> v{1.0f, 2.0f};
  CHECK(Tensor::from_vector(v, {2}, kGpu).to_vector<float>() == v);
}

// train.memory_limit_gib: the caching allocator holds no more than the limit from the driver,
// releasing its cached blocks before it refuses.
TEST_CASE("cuda runtime: a memory limit is kept, cached blocks released first", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  constexpr int64_t kMiB = int64_t{1} << 20;
  saobp::cuda::set_memory_limit(0, 256 * kMiB);
  {
    Tensor a = Tensor::empty({200 * kMiB / 4}, DType::f32, kGpu);
    CHECK_ERROR(
        Tensor::empty({100 * kMiB / 4}, DType::f32, kGpu),
        Catch::Matchers::Contains("out of GPU memory on cuda:0 under train.memory_limit_gib = 0.25") &&
            Catch::Matchers::Contains("model.tiled=true"));
  }  // a's block goes to the cache: 200 MiB still held
  CHECK_NOTHROW(Tensor::empty({100 * kMiB / 4}, DType::f32, kGpu));  // the cache is released for it
  saobp::cuda::set_memory_limit(0, 0);
  CHECK_NOTHROW(Tensor::empty({300 * kMiB / 4}, DType::f32, kGpu));
}

TEST_CASE("cuda fill on a strided view", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kStorable) {
    Tensor base_c = Tensor::zeros({4, 6}, dt), base_g = Tensor::zeros({4, 6}, dt, kGpu);
    Tensor view_c = base_c.transpose(0, 1).slice(0, 1, 5), view_g = base_g.transpose(0, 1).slice(0, 1, 5);
    kern::fill(view_c, 3.0);
    kern::fill(view_g, 3.0);
    CHECK(bitwise_equal(base_c, base_g));
  }
}

TEST_CASE("cuda copy: strided, broadcast, accumulate", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kStorable) {
    INFO(dtype_name(dt));
    const Tensor src = uniform({5, 4}, dt, 0, 100, 1);
    Tensor dst_c = uniform({4, 5}, dt, 0, 100, 2), dst_g = gpu(dst_c);
    kern::copy(src.transpose(0, 1), dst_c, false);
    kern::copy(gpu(src).transpose(0, 1), dst_g, false);
    CHECK(bitwise_equal(dst_c, dst_g));
    const Tensor row = uniform({1, 5}, dt, 0, 100, 3);
    kern::copy(row.expand({4, 5}), dst_c, true);
    kern::copy(gpu(row).expand({4, 5}), dst_g, true);
    CHECK(bitwise_equal(dst_c, dst_g));
  }
}

TEST_CASE("cuda cast between every pair of dtypes", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType from : kStorable)
    for (DType to : kStorable) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      const Tensor src = uniform({3, 7}, from, 0, 200, 4);
      Tensor out_c = Tensor::empty({3, 7}, to), out_g = Tensor::empty({3, 7}, to, kGpu);
      kern::cast(src, out_c);
      kern::cast(gpu(src), out_g);
      CHECK(bitwise_equal(out_c, out_g));
    }
}

TEST_CASE("cuda bf16 casts give the CPU's bits", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // Normal values, ties, subnormals, overflow to inf, NaN: f32 -> bf16 -> f32 on both devices.
  Tensor src = uniform({5, 1000}, DType::f32, -3e38, 3e38, 9);
  float* p = src.data<float>();
  const uint32_t special[] = {0x3F808000, 0x3F818000, 0x00008000, 0x00018000,
                              0x7F7FFFFF, 0x7FC00000, 0xFF800001};
  for (size_t i = 0; i < std::size(special); ++i) std::memcpy(p + i, &special[i], sizeof(float));
  for (int i = 100; i < 600; ++i) p[i] *= 1e-40f;  // subnormal and small
  const Tensor hc = src.to(DType::bf16), hg = gpu(src).to(DType::bf16);
  CHECK(bitwise_equal(hc, hg));
  CHECK(bitwise_equal(hc.to(DType::f32), hg.to(DType::f32)));
  Tensor copied = Tensor::empty(hc.shape(), DType::bf16, kGpu);  // bf16 -> bf16 copies the bits
  kern::cast(gpu(hc), copied);
  CHECK(bitwise_equal(hc, copied));
  // Four elements a thread where the pointers are aligned, one at a time where not, and the last
  // n % 4 alone: slices starting at each of 4 offsets, of each length modulo 4.
  const Tensor flat = src.view({-1}), flat_g = gpu(flat), half_g = flat_g.to(DType::bf16);
  for (int64_t start : {0, 1, 2, 3})
    for (int64_t len : {4000, 4001, 4002, 4003, 1, 2, 3}) {
      INFO("start " << start << " length " << len);
      const Tensor want = flat.slice(0, start, start + len).to(DType::bf16);
      const Tensor got = flat_g.slice(0, start, start + len).to(DType::bf16);
      CHECK(bitwise_equal(want, got));
      const Tensor back = half_g.slice(0, start, start + len).to(DType::f32);
      CHECK(bitwise_equal(want.to(DType::f32), back));
    }
}

TEST_CASE("cuda fill_random draws the CPU's Philox numbers", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const RngKey key{7, 3, 5};
  for (DType dt : kFloating) {
    Tensor u_c = Tensor::empty({1001}, dt), u_g = Tensor::empty({1001}, dt, kGpu);
    kern::fill_random(u_c, RandomKind::uniform, -2.0, 3.0, key);
    kern::fill_random(u_g, RandomKind::uniform, -2.0, 3.0, key);
    CHECK(bitwise_equal(u_c, u_g));
    Tensor n_c = Tensor::empty({1001}, dt), n_g = Tensor::empty({1001}, dt, kGpu);
    kern::fill_random(n_c, RandomKind::normal, 0.5, 2.0, key);
    kern::fill_random(n_g, RandomKind::normal, 0.5, 2.0, key);
    CHECK_CLOSE(n_c, n_g, dt);
    // Value i depends on offset + i only: a draw at offset 505 is the tail of the one above.
    Tensor tail = Tensor::empty({501}, dt, kGpu);
    kern::fill_random(tail, RandomKind::normal, 0.5, 2.0, RngKey{7, 3, 505});
    CHECK(bitwise_equal(tail, n_g.slice(0, 500, 1001)));
  }
}

TEST_CASE("cuda gemm: transposes, batch broadcasting, alpha/beta", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  struct Case {
    Shape a_batch, b_batch, c_batch;
  };
  const Case cases[] = {{{}, {}, {}}, {{3}, {3}, {3}}, {{}, {3}, {3}}, {{3}, {}, {3}}, {{2, 3}, {}, {2, 3}}};
  const int64_t M = 37, K = 45, N = 29;
  uint64_t seed = 10;
  for (DType dt : kFloating)
    for (const Case& cs : cases)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (double beta : {0.0, 0.5}) {
            INFO(dtype_name(dt) << " ta=" << ta << " tb=" << tb << " beta=" << beta << " batches "
                                << shape_str(cs.a_batch) << shape_str(cs.b_batch));
            auto with = [](Shape batch, int64_t r, int64_t c) {
              batch.push_back(r);
              batch.push_back(c);
              return batch;
            };
            const Tensor a = randn(ta ? with(cs.a_batch, K, M) : with(cs.a_batch, M, K), dt, ++seed);
            const Tensor b = randn(tb ? with(cs.b_batch, N, K) : with(cs.b_batch, K, N), dt, ++seed);
            Tensor c_c = randn(with(cs.c_batch, M, N), dt, ++seed);
            if (beta == 0.0) kern::fill(c_c, std::nan(""));  // beta = 0 must ignore c
            Tensor c_g = gpu(c_c);
            kern::gemm(a, ta, b, tb, c_c, 0.7, beta);
            kern::gemm(gpu(a), ta, gpu(b), tb, c_g, 0.7, beta);
            CHECK_CLOSE(c_c, c_g, dt);
          }
  for (DType dt : kFloating) {  // K == 0: c = beta c
    const Tensor a = Tensor::empty({4, 0}, dt), b = Tensor::empty({0, 3}, dt);
    Tensor c_c = randn({4, 3}, dt, 3), c_g = gpu(c_c);
    kern::gemm(a, false, b, false, c_c, 1.0, 0.5);
    kern::gemm(gpu(a), false, gpu(b), false, c_g, 1.0, 0.5);
    CHECK_CLOSE(c_c, c_g, dt);
  }
}

TEST_CASE("cuda gemm_bias, gemm_then_bias, gemm_rowsum and gemm_colsum match the CPU's", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // The cuBLASLt epilogue path (f32: shapes of a layer, odd and multiple-of-4 leading dims, 16-byte
  // aligned vectors) and the definitions' path (f64; a bias or sums at an offset of one float).
  struct Case {
    int64_t M, K, N;
  };
  for (DType dt : kFloating)
    for (const Case& k : {Case{256, 128, 384}, Case{37, 600, 29}, Case{4096 / 8, 1024, 256}})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool offset : {false, true})
            for (bool accumulate : {false, true}) {
              INFO(dtype_name(dt) << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << ta << " tb "
                                  << tb << " offset " << offset << " accumulate " << accumulate);
              const Tensor a = randn(ta ? Shape{k.K, k.M} : Shape{k.M, k.K}, dt, 141),
                           b = randn(tb ? Shape{k.N, k.K} : Shape{k.K, k.N}, dt, 142);
              const auto vec_g = [&](const Tensor& v) { return gpu_vector(v, offset); };
              const Tensor bias = randn({k.N}, dt, 143);
              Tensor c_c = Tensor::empty({k.M, k.N}, dt), c_g = Tensor::empty({k.M, k.N}, dt, kGpu);
              kern::gemm_then_bias(a, ta, b, tb, bias, c_c);
              kern::gemm_then_bias(gpu(a), ta, gpu(b), tb, vec_g(bias), c_g);
              CHECK_CLOSE(c_c, c_g, dt);
              Tensor c0 = randn({k.M, k.N}, dt, 144), c2_c = c0.clone(), c2_g = gpu(c0);
              Tensor s_c = randn({k.N}, dt, 145), s_g = vec_g(s_c);
              kern::gemm_colsum(a, ta, b, tb, c2_c, accumulate ? 1.0 : 0.0, s_c, accumulate);
              kern::gemm_colsum(gpu(a), ta, gpu(b), tb, c2_g, accumulate ? 1.0 : 0.0, s_g, accumulate);
              CHECK_CLOSE(c2_c, c2_g, dt);
              CHECK_CLOSE(s_c, s_g, dt);
              Tensor c3_c = c0.clone(), c3_g = gpu(c0), r_c = randn({k.M}, dt, 146), r_g = vec_g(r_c);
              kern::gemm_rowsum(a, ta, b, tb, c3_c, accumulate ? 1.0 : 0.0, r_c, accumulate);
              kern::gemm_rowsum(gpu(a), ta, gpu(b), tb, c3_g, accumulate ? 1.0 : 0.0, r_g, accumulate);
              CHECK_CLOSE(c3_c, c3_g, dt);
              CHECK_CLOSE(r_c, r_g, dt);
              // Twice on the GPU: the same bits.
              Tensor c4_g = gpu(c0), r2_g = vec_g(r_c.clone());
              kern::gemm_rowsum(gpu(a), ta, gpu(b), tb, c4_g, accumulate ? 1.0 : 0.0, r2_g, accumulate);
              Tensor c5_g = gpu(c0), r3_g = vec_g(r_c.clone());
              kern::gemm_rowsum(gpu(a), ta, gpu(b), tb, c5_g, accumulate ? 1.0 : 0.0, r3_g, accumulate);
              CHECK(bitwise_equal(c4_g, c5_g));
              CHECK(bitwise_equal(r2_g, r3_g));
            }
  for (DType dt : kFloating)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(dtype_name(dt) << " ta=" << ta << " tb=" << tb);
        const int64_t M = 37, K = 45, N = 29;
        const Tensor a = randn(ta ? Shape{K, M} : Shape{M, K}, dt, 41),
                     b = randn(tb ? Shape{N, K} : Shape{K, N}, dt, 42);
        const Tensor bias = randn({N}, dt, 43);
        Tensor c_c = Tensor::empty({M, N}, dt), c_g = Tensor::empty({M, N}, dt, kGpu);
        kern::gemm_bias(a, ta, b, tb, bias, c_c);
        kern::gemm_bias(gpu(a), ta, gpu(b), tb, gpu(bias), c_g);
        CHECK_CLOSE(c_c, c_g, dt);
      }
  for (DType dt : kFloating)
    for (bool ta : {false, true})
      for (bool accumulate : {false, true}) {
        INFO(dtype_name(dt) << " ta=" << ta << " accumulate=" << accumulate);
        const int64_t M = 37, K = 600, N = 29;
        const Tensor a = randn(ta ? Shape{K, M} : Shape{M, K}, dt, 44), b = randn({K, N}, dt, 45);
        Tensor c_c = randn({M, N}, dt, 46), c_g = gpu(c_c), s_c = randn({M}, dt, 47), s_g = gpu(s_c);
        kern::gemm_rowsum(a, ta, b, false, c_c, 0.5, s_c, accumulate);
        kern::gemm_rowsum(gpu(a), ta, gpu(b), false, c_g, 0.5, s_g, accumulate);
        CHECK_CLOSE(c_c, c_g, dt);
        CHECK_CLOSE(s_c, s_g, dt);
      }
}

// --profile's table: each op's calls and time, and each GEMM's library call under its shape with
// 2·M·N·K·batch FLOPs, apart from the ops (their time is part of the gemm op's).
TEST_CASE("cuda profile: ops, and the GEMMs by shape with their FLOPs", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const Tensor a = gpu(randn({3, 5, 4}, DType::f32, 70)), b = gpu(randn({3, 4, 6}, DType::f32, 71));
  Tensor c = Tensor::empty({3, 5, 6}, DType::f32, kGpu);
  cuda::set_profiling(true);
  for (int i = 0; i < 2; ++i) kern::gemm(a, false, b, false, c, 1.0, 0.0);
  kern::gemm(a.to(DType::bf16), false, b.to(DType::bf16), false, c, 1.0, 0.0);
  const auto report = cuda::profile_report();
  cuda::set_profiling(false);
  auto find = [&](bool detail, const std::string& op) {
    for (const cuda::OpTime& o : report)
      if (o.detail == detail && o.op == op) return o;
    return cuda::OpTime{};
  };
  CHECK(find(false, "gemm").calls == 3);
  const cuda::OpTime f32 = find(true, "gemm f32 nn 5x6x4x3"), bf16 = find(true, "gemm bf16 nn 5x6x4x3");
  CHECK(f32.calls == 2);
  CHECK(f32.flops == 2 * 2.0 * 5 * 6 * 4 * 3);
  CHECK(bf16.calls == 1);
  CHECK(bf16.flops == 2.0 * 5 * 6 * 4 * 3);
  CHECK(f32.ms > 0);
  CHECK(cuda::profile_report().empty());  // the report starts counting anew
}

TEST_CASE("cuda gemm is bitwise reproducible", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating) {
    const Tensor a = gpu(randn({4, 192, 256}, dt, 1)), b = gpu(randn({256, 160}, dt, 2));
    Tensor c1 = Tensor::empty({4, 192, 160}, dt, kGpu), c2 = Tensor::empty({4, 192, 160}, dt, kGpu);
    kern::gemm(a, false, b, false, c1, 1.0, 0.0);
    kern::gemm(a, false, b, false, c2, 1.0, 0.0);
    CHECK(bitwise_equal(c1, c2));
  }
}

TEST_CASE("cuda bf16 GEMMs: the CPU's widened f32 product to f32 accuracy, the same bits twice",
          "[cuda][bf16]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // Each term a_ik b_kj of two bf16 values is exact in f32 on both devices; only the order of
  // the f32 sums differs (tensor cores against the CPU's sgemm), so f32's tolerance holds. Every
  // variant, on the cuBLASLt epilogue path (aligned vectors) and the definitions' (offset ones).
  struct Case {
    int64_t Bc, M, K, N;
  };
  const auto bf = [](const Tensor& t) { return t.to(DType::bf16); };
  for (const Case& k : {Case{1, 256, 128, 384}, Case{1, 37, 600, 29}, Case{3, 64, 96, 40}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool offset : {false, true}) {
          INFO("Bc " << k.Bc << " M " << k.M << " K " << k.K << " N " << k.N << " ta " << ta << " tb " << tb
                     << " offset " << offset);
          const Tensor a = bf(randn(ta ? Shape{k.Bc, k.K, k.M} : Shape{k.Bc, k.M, k.K}, DType::f32, 151)),
                       b = bf(randn(tb ? Shape{k.N, k.K} : Shape{k.K, k.N}, DType::f32, 152));
          Tensor c0 = randn({k.Bc, k.M, k.N}, DType::f32, 153), c_c = c0.clone(), c_g = gpu(c0),
                 c_g2 = gpu(c0);
          kern::gemm(a, ta, b, tb, c_c, 0.75, 0.5);
          kern::gemm(gpu(a), ta, gpu(b), tb, c_g, 0.75, 0.5);
          kern::gemm(gpu(a), ta, gpu(b), tb, c_g2, 0.75, 0.5);
          CHECK_CLOSE(c_c, c_g, DType::f32);
          CHECK(bitwise_equal(c_g, c_g2));
          if (k.Bc != 1) continue;
          const Tensor a2 = a.view(ta ? Shape{k.K, k.M} : Shape{k.M, k.K});
          const auto vec_g = [&](const Tensor& v) { return gpu_vector(v, offset); };
          const Tensor bias = randn({k.N}, DType::f32, 154);
          const Tensor cm = c0.view({k.M, k.N});
          for (bool then_bias : {false, true}) {
            Tensor b_c = Tensor::empty({k.M, k.N}), b_g = Tensor::empty({k.M, k.N}, DType::f32, kGpu);
            if (then_bias) {
              kern::gemm_then_bias(a2, ta, b, tb, bias, b_c);
              kern::gemm_then_bias(gpu(a2), ta, gpu(b), tb, vec_g(bias), b_g);
            } else {
              kern::gemm_bias(a2, ta, b, tb, bias, b_c);
              kern::gemm_bias(gpu(a2), ta, gpu(b), tb, vec_g(bias), b_g);
            }
            CHECK_CLOSE(b_c, b_g, DType::f32);
          }
          for (bool accumulate : {false, true}) {
            Tensor r_c = cm.clone(), r_g = gpu(cm), rs_c = randn({k.M}, DType::f32, 155), rs_g = vec_g(rs_c);
            kern::gemm_rowsum(a2, ta, b, tb, r_c, 0.5, rs_c, accumulate);
            kern::gemm_rowsum(gpu(a2), ta, gpu(b), tb, r_g, 0.5, rs_g, accumulate);
            CHECK_CLOSE(r_c, r_g, DType::f32);
            CHECK_CLOSE(rs_c, rs_g, DType::f32);
            Tensor s_c = cm.clone(), s_g = gpu(cm), cs_c = randn({k.N}, DType::f32, 156), cs_g = vec_g(cs_c);
            kern::gemm_colsum(a2, ta, b, tb, s_c, 0.5, cs_c, accumulate);
            kern::gemm_colsum(gpu(a2), ta, gpu(b), tb, s_g, 0.5, cs_g, accumulate);
            CHECK_CLOSE(s_c, s_g, DType::f32);
            CHECK_CLOSE(cs_c, cs_g, DType::f32);
          }
        }
}

TEST_CASE("cuda binary with broadcasting and strided inputs", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const Shape b_shapes[] = {{4}, {2, 1, 4}, {1, 3, 1}, {2, 3, 4}};
  for (DType dt : kFloating)
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div})
      for (const Shape& bs : b_shapes) {
        INFO(dtype_name(dt) << " op " << static_cast<int>(op) << " b " << shape_str(bs));
        const Tensor a = randn({2, 4, 3}, dt, 5);  // used as (2,3,4) through a transpose
        const Tensor b = uniform(bs, dt, 0.5, 2.0, 6);
        Tensor out_c = Tensor::empty({2, 3, 4}, dt), out_g = Tensor::empty({2, 3, 4}, dt, kGpu);
        kern::binary(op, a.transpose(1, 2), b, out_c);
        kern::binary(op, gpu(a).transpose(1, 2), gpu(b), out_g);
        CHECK(bitwise_equal(out_c, out_g));  // one correctly rounded IEEE operation each
      }
}

TEST_CASE("cuda reduce_sum_to", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  struct Case {
    Shape src, dst;
  };
  const Case cases[] = {{{4, 6, 8}, {1, 1, 8}},   {{4, 6, 8}, {4, 6, 1}},  {{4, 6, 8}, {1, 6, 1}},
                        {{4, 6, 8}, {4, 1, 8}},   {{4, 6, 8}, {1, 1, 1}},  {{4, 6, 8}, {4, 6, 8}},
                        {{300, 1000}, {1, 1000}}, {{300, 1000}, {300, 1}}, {{300, 1000}, {1, 1}}};
  for (DType dt : kFloating)
    for (const Case& cs : cases)
      for (bool accumulate : {false, true}) {
        INFO(dtype_name(dt) << " " << shape_str(cs.src) << " -> " << shape_str(cs.dst) << " acc "
                            << accumulate);
        const Tensor src = randn(cs.src, dt, 7);
        Tensor dst_c = randn(cs.dst, dt, 8), dst_g = gpu(dst_c), dst_g2 = gpu(dst_c);
        kern::reduce_sum_to(src, dst_c, 0.5, accumulate);
        kern::reduce_sum_to(gpu(src), dst_g, 0.5, accumulate);
        kern::reduce_sum_to(gpu(src), dst_g2, 0.5, accumulate);
        CHECK_CLOSE(dst_c, dst_g, dt);
        CHECK(bitwise_equal(dst_g, dst_g2));
      }
}

TEST_CASE("cuda axpby", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating)
    for (auto [alpha, beta] : {std::pair{0.3, 0.0}, std::pair{1.0, 1.0}, std::pair{-0.5, 2.0}}) {
      const Tensor x = randn({1000}, dt, 9);
      Tensor y_c = randn({1000}, dt, 10);
      if (beta == 0.0) kern::fill(y_c, std::nan(""));  // beta = 0 must ignore y
      Tensor y_g = gpu(y_c);
      kern::axpby(x, alpha, y_c, beta);
      kern::axpby(gpu(x), alpha, y_g, beta);
      CHECK_CLOSE(y_c, y_g, dt);
    }
}

TEST_CASE("cuda gelu forward and backward", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating)
    for (bool tanh_approx : {false, true}) {
      INFO(dtype_name(dt) << " tanh " << tanh_approx);
      const Tensor x = randn({3, 333}, dt, 11, 3.0), gy = randn({3, 333}, dt, 12);
      Tensor y_c = x.empty_like(), y_g = Tensor::empty({3, 333}, dt, kGpu);
      kern::gelu_forward(x, y_c, tanh_approx);
      kern::gelu_forward(gpu(x), y_g, tanh_approx);
      CHECK_CLOSE(y_c, y_g, dt);
      Tensor gx_c = randn({3, 333}, dt, 13), gx_g = gpu(gx_c);
      kern::gelu_backward(x, gy, gx_c, tanh_approx, true);
      kern::gelu_backward(gpu(x), gpu(gy), gx_g, tanh_approx, true);
      CHECK_CLOSE(gx_c, gx_g, dt);
    }
}

TEST_CASE("cuda unary forward and backward", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating)
    for (UnaryOp op : {UnaryOp::exp, UnaryOp::log, UnaryOp::log1p, UnaryOp::softplus}) {
      INFO(dtype_name(dt) << " op " << static_cast<int>(op));
      const bool positive = op == UnaryOp::log || op == UnaryOp::log1p;
      const Tensor x = positive ? uniform({1000}, dt, 0.1, 5.0, 40) : randn({1000}, dt, 40, 4.0);
      const Tensor gy = randn({1000}, dt, 41);
      Tensor y_c = x.empty_like(), y_g = Tensor::empty({1000}, dt, kGpu);
      kern::unary(op, x, y_c);
      kern::unary(op, gpu(x), y_g);
      CHECK_CLOSE(y_c, y_g, dt);
      Tensor gx_c = randn({1000}, dt, 42), gx_g = gpu(gx_c);
      kern::unary_backward(op, x, y_c, gy, gx_c);
      kern::unary_backward(op, gpu(x), y_g, gpu(gy), gx_g);
      CHECK_CLOSE(gx_c, gx_g, dt);
    }
}

TEST_CASE("cuda adamw_step", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating) {
    Tensor p_c = randn({777}, dt, 43), m_c = randn({777}, dt, 44, 0.1);
    Tensor v_c = uniform({777}, dt, 0.0, 0.01, 45);
    Tensor p_g = gpu(p_c), m_g = gpu(m_c), v_g = gpu(v_c);
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g = randn({777}, dt, 45 + static_cast<uint64_t>(step));
      const AdamWParams h{1e-2, 0.9, 0.999, 1e-8, 0.1, step};
      kern::adamw_step(p_c, g, m_c, v_c, h);
      kern::adamw_step(p_g, gpu(g), m_g, v_g, h);
    }
    CHECK_CLOSE(p_c, p_g, dt);
    CHECK_CLOSE(m_c, m_g, dt);
    CHECK_CLOSE(v_c, v_g, dt);
  }
}

TEST_CASE("cuda layernorm forward and backward", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const Shape shapes[] = {{2, 37, 70}, {4096, 64}};  // odd C; many rows (several chunks)
  for (DType dt : kFloating)
    for (const Shape& s : shapes) {
      INFO(dtype_name(dt) << " " << shape_str(s));
      const int64_t C = s.back(), N = shape_numel(s) / C;
      const Tensor x = randn(s, dt, 14, 2.0), w = randn({C}, dt, 15), b = randn({C}, dt, 16);
      const Tensor gy = randn(s, dt, 17);
      Tensor y_c = x.empty_like(), mean_c = Tensor::empty({N}, dt), rstd_c = Tensor::empty({N}, dt);
      kern::layernorm_forward(x, w, b, 1e-5, y_c, mean_c, rstd_c);
      auto run_gpu = [&](bool with_gx) {
        Tensor y = Tensor::empty(s, dt, kGpu), mean = Tensor::empty({N}, dt, kGpu);
        Tensor rstd = Tensor::empty({N}, dt, kGpu);
        kern::layernorm_forward(gpu(x), gpu(w), gpu(b), 1e-5, y, mean, rstd);
        Tensor gx = with_gx ? gpu(randn(s, dt, 18)) : Tensor();
        Tensor gw = gpu(randn({C}, dt, 19)), gb = gpu(randn({C}, dt, 20));
        kern::layernorm_backward(gpu(x), gpu(w), mean, rstd, gpu(gy), gx, gw, gb);
        return std::vector<Tensor>{y, mean, rstd, gx, gw, gb};
      };
      const auto g1 = run_gpu(true), g2 = run_gpu(true), g3 = run_gpu(false);
      CHECK_CLOSE(y_c, g1[0], dt);
      CHECK_CLOSE(mean_c, g1[1], dt);
      CHECK_CLOSE(rstd_c, g1[2], dt);
      Tensor gx_c = randn(s, dt, 18), gw_c = randn({C}, dt, 19), gb_c = randn({C}, dt, 20);
      kern::layernorm_backward(x, w, mean_c, rstd_c, gy, gx_c, gw_c, gb_c);
      CHECK_CLOSE(gx_c, g1[3], dt);
      CHECK_CLOSE(gw_c, g1[4], dt);
      CHECK_CLOSE(gb_c, g1[5], dt);
      for (size_t i = 0; i < g1.size(); ++i) CHECK(bitwise_equal(g1[i], g2[i]));
      CHECK(bitwise_equal(g1[4], g3[4]));  // gw, gb do not depend on whether gx is wanted
      CHECK(bitwise_equal(g1[5], g3[5]));
    }
}

TEST_CASE("cuda softmax forward and backward with masks", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const Shape xs{2, 3, 40, 45};
  Tensor causal = Tensor::zeros({1, 1, 40, 45}, DType::u8);  // broadcast over (B, NH)
  for (int64_t t = 0; t < 40; ++t) {
    Tensor row = causal.slice(2, t, t + 1).slice(3, 0, t + 1);
    kern::fill(row, 1.0);
  }
  Tensor holes = random_mask(xs, 0.6, 21);  // full-shape mask with some fully masked rows
  for (int64_t t : {0, 17, 39}) {
    Tensor row = holes.slice(2, t, t + 1);
    kern::fill(row, 0.0);
  }
  const Tensor masks[] = {Tensor(), causal, holes};
  for (DType dt : kFloating)
    for (size_t mi = 0; mi < 3; ++mi)
      for (bool log : {false, true}) {
        INFO(dtype_name(dt) << " mask " << mi << " log " << log);
        const Tensor& mask = masks[mi];
        const Tensor mask_g = mask.defined() ? gpu(mask) : Tensor();
        const Tensor x = randn(xs, dt, 22, 3.0), gy = randn(xs, dt, 23);
        Tensor y_c = x.empty_like();
        kern::softmax_forward(x, mask, y_c, log);
        Tensor gx_c = randn(xs, dt, 24);
        kern::softmax_backward(y_c, gy, mask, gx_c, log);
        auto run_gpu = [&] {
          Tensor y = Tensor::empty(xs, dt, kGpu), gx = gpu(randn(xs, dt, 24));
          kern::softmax_forward(gpu(x), mask_g, y, log);
          kern::softmax_backward(y, gpu(gy), mask_g, gx, log);
          return std::pair{y, gx};
        };
        const auto [y1, gx1] = run_gpu();
        const auto [y2, gx2] = run_gpu();
        CHECK_CLOSE(y_c, y1, dt);
        CHECK_CLOSE(gx_c, gx1, dt);
        CHECK(bitwise_equal(y1, y2));
        CHECK(bitwise_equal(gx1, gx2));
      }
}

// Issue "Hostile input, second round", item 8: a score row that is all NaN gives NaN on the GPU
// as on the CPU (the max skips NaN, so the row looked empty and became zeros), in the softmax
// kernel and so in the attention that uses it; a row with one NaN among finite entries, a row
// of -inf and a fully masked row give what the CPU gives too.
TEST_CASE("cuda softmax and attention: NaN rows propagate as on the CPU", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType dt : kFloating)
    for (bool log : {false, true}) {
      INFO(dtype_name(dt) << " log " << log);
      const std::vector<double> v = {nan,  nan,  nan,  nan,  // all NaN
                                     1.0,  nan,  2.0,  3.0,  // one NaN
                                     -inf, -inf, -inf, -inf, 0.5, 0.25, -1.0, 2.0};
      const Tensor x = Tensor::from_vector(v, {4, 4}).to(dt);
      Tensor mask =
          Tensor::from_vector(std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {4, 4});
      Tensor y_c = x.empty_like(), y_g = Tensor::empty({4, 4}, dt, kGpu);
      kern::softmax_forward(x, mask, y_c, log);
      kern::softmax_forward(gpu(x), gpu(mask), y_g, log);
      const std::vector<double> a = y_c.to(DType::f64).to_vector<double>(),
                                b = y_g.to(Device::cpu()).to(DType::f64).to_vector<double>();
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("entry " << i << ": cpu " << a[i] << " gpu " << b[i]);
        CHECK(std::isnan(a[i]) == std::isnan(b[i]));
        if (!std::isnan(a[i])) CHECK(std::abs(a[i] - b[i]) <= 1e-6 * std::max(1.0, std::abs(a[i])));
      }
      CHECK(std::isnan(b[0]));
    }
  // Attention (original) with one query row of NaN: the same NaN entries on both devices.
  const int64_t B = 1, NH = 2, T = 6, HS = 4;
  for (DType dt : kFloating) {
    Tensor q = randn({B, NH, T, HS}, dt, 40);
    const Tensor k = randn({B, NH, T, HS}, dt, 41), vv = randn({B, NH, T, HS}, dt, 42);
    Tensor row = q.slice(2, 2, 3);
    kern::fill(row, nan);
    const AttnParams p{AttnVariant::original, false, 1, 0.5};
    Tensor none, out_c = q.empty_like(), probs_c = Tensor::empty({B, NH, T, T}, dt);
    kern::attention_forward(q, k, vv, none, none, p, out_c, probs_c, none, none);
    Tensor out_g = Tensor::empty(q.shape(), dt, kGpu), probs_g = Tensor::empty({B, NH, T, T}, dt, kGpu);
    kern::attention_forward(gpu(q), gpu(k), gpu(vv), none, none, p, out_g, probs_g, none, none);
    const std::vector<double> a = out_c.to(DType::f64).to_vector<double>(),
                              b = out_g.to(Device::cpu()).to(DType::f64).to_vector<double>();
    INFO(dtype_name(dt));
    for (size_t i = 0; i < a.size(); ++i) CHECK(std::isnan(a[i]) == std::isnan(b[i]));
    CHECK(std::isnan(b[2 * HS]));
  }
}

TEST_CASE("cuda embedding forward and backward", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  // Many repeats; one id throughout (a token-type table: a run as long as the batch); a
  // vocabulary larger than the batch (most rows untouched).
  struct Case {
    int64_t V, C, N;
  };
  for (const Case& k : {Case{50, 70, 300}, Case{2, 33, 4096}, Case{30522, 64, 4096}}) {
    const Tensor ids =
        k.V == 2 ? Tensor::zeros({k.N}, DType::i32) : random_ids(k.N, static_cast<int32_t>(k.V), 25);
    for (DType dt : kFloating) {
      INFO("V " << k.V << " C " << k.C << " N " << k.N << " " << dtype_name(dt));
      const Tensor weight = randn({k.V, k.C}, dt, 26), gout = randn({k.N, k.C}, dt, 27);
      Tensor out_c = Tensor::empty({k.N, k.C}, dt), out_g = Tensor::empty({k.N, k.C}, dt, kGpu);
      kern::embedding_forward(weight, ids, out_c);
      kern::embedding_forward(gpu(weight), gpu(ids), out_g);
      CHECK(bitwise_equal(out_c, out_g));
      Tensor gw_c = randn({k.V, k.C}, dt, 28), gw_g = gpu(gw_c);
      kern::embedding_backward(ids, gout, gw_c);
      kern::embedding_backward(gpu(ids), gpu(gout), gw_g);
      CHECK(bitwise_equal(gw_c, gw_g));  // the same additions in the same order (n ascending)
    }
  }
  const int64_t V = 50, C = 70;
  Tensor bad = Tensor::from_vector(std::vector<int32_t>{3, 7, 50, 1}, {4}, kGpu);
  Tensor out = Tensor::empty({4, C}, DType::f32, kGpu);
  const Tensor weight = gpu(randn({V, C}, DType::f32, 29));
  // The check is deferred to the host's next wait for the GPU (a copy to the host here): the
  // launch returns, the kernel reads nothing outside the table (the bad id's row is zeros).
  kern::embedding_forward(weight, bad, out);
  REQUIRE_THROWS_WITH(out.to_vector<float>(), Catch::Contains("id 50 at position 2 is outside [0, 50)"));
  const std::vector<float> rows = out.to_vector<float>();  // the check was reported once
  for (int64_t c = 0; c < C; ++c) CHECK(rows[static_cast<size_t>(2 * C + c)] == 0.0f);
  Tensor negative = Tensor::from_vector(std::vector<int32_t>{-1, 0, 0, 0}, {4}, kGpu);
  Tensor gw = Tensor::zeros({V, C}, DType::f32, kGpu);
  kern::embedding_backward(negative, out, gw);
  REQUIRE_THROWS_WITH(saobp::cuda::synchronize(0), Catch::Contains("id -1 at position 0"));
  // Good ids raise nothing, however many checks wait.
  for (int i = 0; i < 5000; ++i)
    kern::embedding_forward(weight, gpu(random_ids(4, static_cast<int32_t>(V), 25)), out);
  CHECK_NOTHROW(out.to_vector<float>());
}

TEST_CASE("cuda dropout keeps the CPU's mask", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const RngKey key{11, 2, 100};
  for (DType dt : kFloating) {
    const Tensor x = randn({2000}, dt, 30), gy = randn({2000}, dt, 31);
    Tensor y_c = x.empty_like(), mask_c = Tensor::empty({2000}, DType::u8);
    Tensor y_g = Tensor::empty({2000}, dt, kGpu), mask_g = Tensor::empty({2000}, DType::u8, kGpu);
    kern::dropout_forward(x, 0.3, key, y_c, mask_c);
    kern::dropout_forward(gpu(x), 0.3, key, y_g, mask_g);
    CHECK(bitwise_equal(mask_c, mask_g));
    CHECK(bitwise_equal(y_c, y_g));
    Tensor gx_c = randn({2000}, dt, 32), gx_g = gpu(gx_c);
    kern::dropout_backward(gy, mask_c, 0.3, gx_c, true);
    kern::dropout_backward(gpu(gy), mask_g, 0.3, gx_g, true);
    CHECK_CLOSE(gx_c, gx_g, dt);
  }
  Tensor y = Tensor::empty({4}, DType::f32, kGpu), mask = Tensor::empty({4}, DType::u8, kGpu);
  REQUIRE_THROWS_WITH(kern::dropout_forward(y.clone(), 1.0, key, y, mask), Catch::Contains("[0, 1)"));
}

TEST_CASE("cuda cross_entropy forward and backward", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t ignore = -100;
  for (int64_t V : {300, 1000})
    for (DType dt : kFloating) {
      INFO(dtype_name(dt) << " V " << V);
      const int64_t N = 37;
      Tensor targets = random_ids(N, static_cast<int32_t>(V), 33);
      for (int64_t n : {0, 5, 36}) targets.data<int32_t>()[n] = static_cast<int32_t>(ignore);
      const Tensor logits = randn({N, V}, dt, 34, 4.0), gloss = randn({N}, dt, 35);
      Tensor loss_c = Tensor::empty({N}, dt), lse_c = Tensor::empty({N}, dt);
      kern::cross_entropy_forward(logits, targets, ignore, loss_c, lse_c);
      Tensor gl_c = randn({N, V}, dt, 36);
      kern::cross_entropy_backward(logits, targets, lse_c, gloss, ignore, gl_c, true);
      auto run_gpu = [&] {
        Tensor loss = Tensor::empty({N}, dt, kGpu), lse = Tensor::empty({N}, dt, kGpu);
        kern::cross_entropy_forward(gpu(logits), gpu(targets), ignore, loss, lse);
        Tensor gl = gpu(randn({N, V}, dt, 36));
        kern::cross_entropy_backward(gpu(logits), gpu(targets), lse, gpu(gloss), ignore, gl, true);
        return std::vector<Tensor>{loss, lse, gl};
      };
      const auto g1 = run_gpu(), g2 = run_gpu();
      CHECK_CLOSE(loss_c, g1[0], dt);
      CHECK_CLOSE(lse_c, g1[1], dt);
      CHECK_CLOSE(gl_c, g1[2], dt);
      for (size_t i = 0; i < g1.size(); ++i) CHECK(bitwise_equal(g1[i], g2[i]));
    }
  {  // non-finite rows give what the CPU's two-pass form gives (the GPU reads a row once)
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t N = 6, V = 700;
    Tensor logits = randn({N, V}, DType::f32, 38, 4.0);
    float* x = logits.data<float>();
    for (int64_t v = 0; v < V; v += 3) x[v] = -inf;           // row 0: a third masked
    for (int64_t v = 0; v < V; ++v) x[V + v] = -inf;          // row 1: all masked
    x[2 * V + 650] = nan;                                     // row 2: a NaN late in the row
    x[3 * V + 5] = inf;                                       // row 3: +inf
    for (int64_t v = 0; v < V - 1; ++v) x[4 * V + v] = -inf;  // row 4: one value left, the last
    x[5 * V + 0] = 80.0f;                                     // row 5: the max first
    const Tensor targets = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4, V - 1, 9}, {N});
    Tensor loss_c = Tensor::empty({N}, DType::f32), lse_c = Tensor::empty({N}, DType::f32);
    kern::cross_entropy_forward(logits, targets, ignore, loss_c, lse_c);
    Tensor loss_g = Tensor::empty({N}, DType::f32, kGpu), lse_g = Tensor::empty({N}, DType::f32, kGpu);
    kern::cross_entropy_forward(gpu(logits), gpu(targets), ignore, loss_g, lse_g);
    const auto c = lse_c.to_vector<float>(), g = lse_g.to_vector<float>();
    for (int64_t n = 0; n < N; ++n) {
      INFO("row " << n << " cpu " << c[n] << " gpu " << g[n]);
      CHECK(std::isnan(c[n]) == std::isnan(g[n]));
      if (!std::isnan(c[n])) CHECK(std::abs(c[n] - g[n]) <= 1e-5f * std::max(1.0f, std::abs(c[n])));
    }
    CHECK(std::isnan(g[1]));
    CHECK(std::isnan(g[2]));
    CHECK(std::isnan(g[3]));
    CHECK(g[4] == x[4 * V + V - 1]);
  }
  const Tensor logits = gpu(randn({3, 10}, DType::f32, 37));
  const Tensor bad = Tensor::from_vector(std::vector<int32_t>{1, -100, 10}, {3}, kGpu);
  Tensor loss = Tensor::empty({3}, DType::f32, kGpu), lse = Tensor::empty({3}, DType::f32, kGpu);
  kern::cross_entropy_forward(logits, bad, ignore, loss, lse);
  REQUIRE_THROWS_WITH(loss.to_vector<float>(), Catch::Contains("target 10 at position 2 is outside [0, 10)"));
  CHECK(loss.to_vector<float>()[2] == 0.0f);  // read nothing outside the row
}

namespace {

// One attention call's inputs (CPU tensors) and parameters.
struct AttnCase {
  Tensor q, k, v, key_mask, lambda, gout;
  AttnParams p;
};

// The fused attention's forward, then its backward into gradients that start from N(0,1) values
// (so the accumulation shows), on `dev` with every input copied there: {out, probs, saved, aux,
// gq, gk, gv, glambda}, the ones a variant does not use undefined.
std::vector<Tensor> run_attention(const AttnCase& a, Device dev) {
  const DType dt = a.q.dtype();
  const int64_t B = a.q.size(0), NH = a.q.size(1), T = a.q.size(2);
  const Shape qs = a.q.shape(), tile{B, NH, T, T};
  const bool potts = uses_lambda(a.p.variant);
  auto on = [&](const Tensor& t) { return t.defined() ? t.to(dev).clone() : Tensor(); };
  Tensor out = Tensor::empty(qs, dt, dev), probs = Tensor::empty(tile, dt, dev);
  Tensor saved = a.p.variant == AttnVariant::original
                     ? Tensor()
                     : Tensor::empty({potts ? a.p.steps : 1, B, NH, T, T}, dt, dev);
  Tensor aux = a.p.variant == AttnVariant::bp_elemmul ? Tensor::empty({B, NH, T}, dt, dev) : Tensor();
  kern::attention_forward(on(a.q), on(a.k), on(a.v), on(a.key_mask), on(a.lambda), a.p, out, probs, saved,
                          aux);
  Tensor gq = on(randn(qs, dt, 54)), gk = on(randn(qs, dt, 55)), gv = on(randn(qs, dt, 56));
  Tensor glambda = on(randn({NH}, dt, 57));
  kern::attention_backward(on(a.q), on(a.k), on(a.v), on(a.key_mask), on(a.lambda), a.p, probs, saved, aux,
                           on(a.gout), gq, gk, gv, glambda);
  return {out, probs, saved, aux, gq, gk, gv, glambda};
}
const char* const kAttnNames[] = {"out", "probs", "saved", "aux", "gq", "gk", "gv", "glambda"};

}  // namespace

TEST_CASE("cuda fused attention: every variant, causal, padding, BP steps", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t B = 2, NH = 3, T = 37, HS = 8;
  const Shape qs{B, NH, T, HS};
  Tensor padding = Tensor::full({B, T}, 1.0, DType::u8);  // the last 5 tokens of sequence 1 pad
  Tensor pad_tail = padding.slice(0, 1, 2).slice(1, T - 5, T);
  kern::fill(pad_tail, 0.0);
  for (DType dt : kFloating)
    for (AttnVariant variant :
         {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low, AttnVariant::bp_elemmul})
      for (bool causal : {false, true})
        for (bool padded : {false, true})
          for (int steps : {1, 2}) {
            const bool potts = variant == AttnVariant::bp_high || variant == AttnVariant::bp_low;
            if (steps > 1 && !potts) continue;
            INFO(dtype_name(dt) << " variant " << static_cast<int>(variant) << " causal " << causal
                                << " padded " << padded << " steps " << steps);
            const AttnCase a{randn(qs, dt, 50, 1.5),
                             randn(qs, dt, 51, 1.5),
                             randn(qs, dt, 52),
                             padded ? padding : Tensor(),
                             Tensor::from_vector(std::vector<double>{0.0, 0.7, 2.0}, {NH}).to(dt),
                             randn(qs, dt, 53),
                             {variant, causal, steps, 1.0 / std::sqrt(double(HS))}};
            const auto c = run_attention(a, kCpu), g1 = run_attention(a, kGpu), g2 = run_attention(a, kGpu);
            for (size_t i = 0; i < c.size(); ++i) {
              if (!c[i].defined()) continue;
              INFO(kAttnNames[i]);
              CHECK(rel_err(c[i], g1[i]) <= tolerance(dt));
              CHECK(bitwise_equal(g1[i], g2[i]));
            }
          }
}

namespace {
// The case in f64: the same values (f32 inputs widen exactly), the reference of an f32 run.
AttnCase in_f64(const AttnCase& a) {
  auto wide = [](const Tensor& t) { return t.defined() && t.dtype() != DType::u8 ? t.to(DType::f64) : t; };
  return {wide(a.q), wide(a.k), wide(a.v), a.key_mask, wide(a.lambda), wide(a.gout), a.p};
}
}  // namespace

// The fused schedule of the attention's maps (SAOBP_FUSED_ATTENTION=1; src/attention/cuda/
// attention.cu) against the unfused one (the default) on the same GPU, and both against the CPU.
// In f32 "against the CPU" means as accurate as the CPU: within 4 times the CPU's own distance
// from the f64 result, or 1e-5 where that is larger. BP-Low's three steps amplify an f32 rounding
// about 30-fold (gq, gk: the CPU's f32 result is 3.4e-5 from f64), so two correct f32 results
// can be 7e-5 apart, past a fixed 1e-5 between them (seen under the emulated backend).
// Original and every Potts setting, including the leaking decoder, with rows longer than a warp's
// 32 lanes. The forward forms the same logits and runs the same softmax code (softmax_row.cuh):
// the maps and the output are equal. The backward forms the same dP, y and ds values in other
// kernels (equal but for how the compiler contracts them); ∂L/∂λ sums its terms by rows where the
// unfused kernel sums columns.
TEST_CASE("cuda fused attention schedule gives the unfused one's values", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t B = 2, NH = 3, HS = 8;
  for (int64_t T : {37, 70}) {
    const Shape qs{B, NH, T, HS};
    Tensor padding = Tensor::full({B, T}, 1.0, DType::u8);  // the last 5 tokens of sequence 1 pad
    Tensor pad_tail = padding.slice(0, 1, 2).slice(1, T - 5, T);
    kern::fill(pad_tail, 0.0);
    for (DType dt : kFloating)
      for (AttnVariant variant : {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low})
        for (int mode : {0, 1, 2})  // encoder, decoder, leaking decoder
          for (bool padded : {false, true})
            for (int steps : {1, 2, 3}) {
              const bool potts = variant != AttnVariant::original;
              if (!potts && steps > 1) continue;
              INFO("T " << T << " " << dtype_name(dt) << " variant " << static_cast<int>(variant) << " mode "
                        << mode << " padded " << padded << " steps " << steps);
              AttnCase a{randn(qs, dt, 60, 1.5),
                         randn(qs, dt, 61, 1.5),
                         randn(qs, dt, 62),
                         padded ? padding : Tensor(),
                         Tensor::from_vector(std::vector<double>{0.0, 0.7, 2.0}, {NH}).to(dt),
                         randn(qs, dt, 63),
                         {variant, mode > 0, steps, 1.0 / std::sqrt(double(HS))}};
              a.p.leak = mode == 2;
              const auto cpu = run_attention(a, kCpu), unfused = run_attention(a, kGpu);
              const auto fused =
                  test::with_env("SAOBP_FUSED_ATTENTION", "1", [&] { return run_attention(a, kGpu); });
              const auto exact = dt == DType::f64 ? cpu : run_attention(in_f64(a), kCpu);
              const double close = dt == DType::f64 ? 1e-14 : 1e-6;
              for (size_t i = 0; i < cpu.size(); ++i) {
                const bool lambda_grad = i == 7;
                if (!cpu[i].defined() || (lambda_grad && !potts)) continue;
                INFO(kAttnNames[i]);
                CHECK(rel_err(exact[i], fused[i]) <= std::max(tolerance(dt), 4 * rel_err(exact[i], cpu[i])));
                if (i < 3)  // out, probs, saved
                  CHECK(rel_err(unfused[i], fused[i]) == 0);
                else
                  CHECK(rel_err(unfused[i], fused[i]) <= (lambda_grad ? tolerance(dt) : close));
              }
            }
  }
}

namespace {

// x moved to `dev` as a differentiable op (its gradient goes back to x's device): lets gradcheck,
// which perturbs f64 CPU inputs, check an op that runs on the GPU.
Var on_device(const Var& x, Device dev) {
  return make_result(x.data().to(dev), "on_device", {x},
                     [from = x.device()](const Tensor& gout, GradSlots& gin) {
                       kern::axpby(gout.to(from).contiguous(), 1.0, gin[0], 1.0);
                     });
}

}  // namespace

TEST_CASE("cuda regularizers: Entropy-Reg and Eigen-Reg forward and backward match the CPU's", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t B = 2, NH = 3, T = 19, HS = 8, C = 10;
  const Shape qs{B, NH, T, HS};
  Tensor padding = Tensor::full({B, T}, 1.0, DType::u8);  // the last 4 tokens of sequence 1 pad
  Tensor pad_tail = padding.slice(0, 1, 2).slice(1, T - 4, T);
  kern::fill(pad_tail, 0.0);
  for (DType dt : kFloating)
    for (bool causal : {false, true})
      for (bool padded : {false, true}) {
        INFO(dtype_name(dt) << " causal " << causal << " padded " << padded);
        const Tensor q = randn(qs, dt, 60, 1.5), k = randn(qs, dt, 61, 1.5);
        // θ: head 0 far below its entropy, head 1 far above (both active), head 2 near it.
        const Tensor theta = Tensor::from_vector(std::vector<double>{0.0, 2.0, 0.5}, {NH}).to(dt);
        const Tensor key_mask = padded ? padding : Tensor();
        auto run = [&](Device dev) {
          Var vq(q.to(dev).clone(), true), vk(k.to(dev).clone(), true), vt(theta.to(dev).clone(), true);
          const Var p =
              entropy_reg_penalty(vq, vk, key_mask.defined() ? key_mask.to(dev) : Tensor(), causal, vt, 0.1);
          p.backward();
          return std::vector<Tensor>{p.data(), vq.grad(), vk.grad(), vt.grad()};
        };
        const auto c = run(kCpu), g1 = run(kGpu), g2 = run(kGpu);
        REQUIRE(c[0].item() > 0.1);
        const char* names[] = {"penalty", "gq", "gk", "gtheta"};
        for (size_t i = 0; i < c.size(); ++i) {
          INFO(names[i]);
          CHECK(g1[i].device() == kGpu);
          CHECK(rel_err(c[i], g1[i]) <= tolerance(dt));
          CHECK(bitwise_equal(g1[i], g2[i]));
        }
      }
  for (DType dt : kFloating) {
    INFO(dtype_name(dt));
    const Tensor wq = randn({NH * 4, C}, dt, 62), wk = randn({NH * 4, C}, dt, 63), gv = randn({NH}, dt, 64);
    auto run = [&](Device dev) {
      Var vq(wq.to(dev).clone(), true), vk(wk.to(dev).clone(), true);
      const Var v = qk_eigen_variance(vq, vk, NH);
      v.backward(gv.to(dev));
      return std::vector<Tensor>{v.data(), vq.grad(), vk.grad()};
    };
    const auto c = run(kCpu), g1 = run(kGpu), g2 = run(kGpu);
    const char* names[] = {"var", "gwq", "gwk"};
    for (size_t i = 0; i < c.size(); ++i) {
      INFO(names[i]);
      CHECK(g1[i].device() == kGpu);
      CHECK(rel_err(c[i], g1[i]) <= tolerance(dt));
      CHECK(bitwise_equal(g1[i], g2[i]));
    }
  }
}

TEST_CASE("cuda regularizers: f64 gradcheck of Entropy-Reg and Eigen-Reg on the GPU", "[cuda][gradcheck]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  using VV = std::vector<Var>;
  const Tensor km = Tensor::from_vector(std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  const Tensor q = randn({2, 3, 5, 4}, DType::f64, 65), k = randn({2, 3, 5, 4}, DType::f64, 66);
  const Tensor theta = Tensor::from_vector(std::vector<double>{0.0, 2.0, 0.5}, {3});
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    test::require_gradcheck(
        [&](const VV& v) {
          return on_device(entropy_reg_penalty(on_device(v[0], kGpu), on_device(v[1], kGpu), km.to(kGpu),
                                               causal, on_device(v[2], kGpu), 0.1),
                           kCpu);
        },
        {q, k, theta});
  }
  test::require_gradcheck(
      [&](const VV& v) {
        return on_device(qk_eigen_variance(on_device(v[0], kGpu), on_device(v[1], kGpu), 3), kCpu);
      },
      {randn({6, 5}, DType::f64, 67), randn({6, 5}, DType::f64, 68)});
}

TEST_CASE("cuda rope forward and inverse match the CPU's, in place too", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (DType dt : kFloating)
    for (bool inverse : {false, true})
      for (double base : {10000.0, 2.0}) {
        INFO(dtype_name(dt) << " inverse " << inverse << " base " << base);
        // T = 300 reaches angles t θ_0 of hundreds of radians, where float angles would drift.
        const Tensor x = randn({2, 3, 300, 10}, dt, 70, 2.0);
        Tensor y_c = x.empty_like(), y_g = Tensor::empty(x.shape(), dt, kGpu);
        kern::rope(x, base, inverse, y_c, 0);
        kern::rope(gpu(x), base, inverse, y_g, 0);
        CHECK_CLOSE(y_c, y_g, dt);
        Tensor z = gpu(x);  // y aliasing x
        kern::rope(z, base, inverse, z, 0);
        CHECK(bitwise_equal(y_g, z));
        Tensor y_g2 = Tensor::empty(x.shape(), dt, kGpu);
        kern::rope(gpu(x), base, inverse, y_g2, 0);
        CHECK(bitwise_equal(y_g, y_g2));
        // Rows at an offset (generation): the same rows of the whole rotation, and the CPU's.
        for (int64_t P : {1, 100, 299}) {
          const Tensor part = x.slice(2, P, 300).contiguous();
          Tensor p_c = part.empty_like(), p_g = Tensor::empty(part.shape(), dt, kGpu);
          kern::rope(part, base, inverse, p_c, P);
          kern::rope(gpu(part), base, inverse, p_g, P);
          CHECK(bitwise_equal(p_g, y_g.slice(2, P, 300).contiguous()));
          CHECK_CLOSE(p_c, p_g, dt);
        }
      }
}

TEST_CASE("cuda sink_gate keeps the CPU's heads, with padding and empty tiles", "[cuda]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const int64_t B = 3, NH = 4, T = 23;
  // Sequence 1 pads its last 5 tokens; sequence 2 is all padding (a tile without token rows).
  Tensor key_mask = Tensor::full({B, T}, 1.0, DType::u8);
  Tensor tail = key_mask.slice(0, 1, 2).slice(1, T - 5, T);
  kern::fill(tail, 0.0);
  Tensor empty_row = key_mask.slice(0, 2, 3);
  kern::fill(empty_row, 0.0);
  for (DType dt : kFloating)
    for (bool masked : {false, true})
      for (double tau : {0.1, 0.3, 0.9})
        for (double fraction : {0.0, 0.25, 0.5}) {
          INFO(dtype_name(dt) << " masked " << masked << " tau " << tau << " fraction " << fraction);
          // Rows of a softmax with scaled logits: some heads peaked (sinky), some flat.
          Tensor logits = randn({B, NH, T, T}, DType::f64, 71, 1.0);
          std::vector<double> scaled = logits.to_vector<double>();
          for (size_t i = 0; i < scaled.size(); ++i)
            scaled[i] *= 1.0 + 3.0 * static_cast<double>(i / (T * T) % NH);
          Tensor probs = Tensor::empty({B, NH, T, T}, DType::f64);
          kern::softmax_forward(Tensor::from_vector(scaled, {B, NH, T, T}), Tensor(), probs, false);
          probs = probs.to(dt);
          const Tensor km = masked ? key_mask : Tensor();
          Tensor keep_c = Tensor::empty({B, NH}, dt), keep_g = Tensor::empty({B, NH}, dt, kGpu);
          kern::sink_gate(probs, km, tau, fraction, keep_c);
          kern::sink_gate(gpu(probs), masked ? gpu(km) : Tensor(), tau, fraction, keep_g);
          CHECK(bitwise_equal(keep_c, keep_g));
        }
}
