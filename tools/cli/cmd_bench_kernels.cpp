// `saobp bench-kernels`: GEMM at transformer shapes, LayerNorm and softmax, with the machine's
// measured FP32 FMA peak, and Eigen's own (self-threaded) GEMM measured in the same run as the
// baseline (the saobp_eigen_baseline executable next to this binary).
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "../bench/bench_util.h"
#include "attention/attention.h"
#include "cli/commands.h"
#include "tensor/kernels.h"

namespace saobp::cli {

namespace {

bool attention_bench = true, tiled_bench = false;

struct GemmShape {
  const char* what;
  int64_t batch, M, N, K;
  bool ta, tb;
};

Tensor random_tensor(const Shape& s, uint64_t stream) {
  Tensor t = Tensor::empty(s);
  kern::fill_random(t, RandomKind::uniform, -1.0, 1.0, RngKey{42, stream, 0});
  return t;
}

// Eigen baseline GFLOP/s per (M, N, K, batch), or empty when the executable is absent.
std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, double> eigen_baseline(
    const std::vector<GemmShape>& shapes) {
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, double> out;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "saobp_eigen_baseline";
  if (!std::filesystem::exists(exe)) return out;
  const auto in = std::filesystem::temp_directory_path() / fmt::format("saobp-bench-{}.txt", ::getpid());
  {
    std::ofstream f(in);
    for (const auto& s : shapes) f << s.M << ' ' << s.N << ' ' << s.K << ' ' << s.batch << '\n';
  }
  FILE* p = ::popen(fmt::format("'{}' < '{}'", exe.string(), in.string()).c_str(), "r");
  long M, N, K, B;
  double g;
  while (p && std::fscanf(p, "%ld %ld %ld %ld %lf", &M, &N, &K, &B, &g) == 5) out[{M, N, K, B}] = g;
  if (p) ::pclose(p);
  std::filesystem::remove(in);
  return out;
}

// Attention forward + backward of every variant at B·NH = 128, HS = 64 (fused kernels).
void bench_attention() {
  fmt::print("\n{:<12} {:>5} {:>12} {:>12} {:>12} {:>14}\n", "attention", "T", "fwd ms", "bwd ms",
             "fwd+bwd ms", "vs original");
  const int64_t B = 16, NH = 8, HS = 64;
  for (int64_t T : {128, 256, 512}) {
    double base = 0;
    for (AttnVariant v :
         {AttnVariant::original, AttnVariant::bp_high, AttnVariant::bp_low, AttnVariant::bp_elemmul}) {
      const bool bp = v == AttnVariant::bp_high || v == AttnVariant::bp_low;
      Tensor q = random_tensor({B, NH, T, HS}, 11), k = random_tensor({B, NH, T, HS}, 12),
             vv = random_tensor({B, NH, T, HS}, 13);
      Tensor g = random_tensor({B, NH, T, HS}, 14), lam = Tensor::full({NH}, 0.2);
      Tensor out = q.empty_like(), probs = Tensor::empty({B, NH, T, T}), saved, aux;
      if (bp) saved = Tensor::empty({1, B, NH, T, T});
      if (v == AttnVariant::bp_elemmul)
        saved = Tensor::empty({1, B, NH, T, T}), aux = Tensor::empty({B, NH, T});
      Tensor gq = q.zeros_like(), gk = q.zeros_like(), gv = q.zeros_like(), gl = lam.zeros_like();
      const AttnParams p{v, false, 1, 0.125};
      const int reps = v == AttnVariant::bp_elemmul && T >= 256 ? 3 : 7;
      const double f = bench::median_seconds(
          [&] { kern::attention_forward(q, k, vv, Tensor(), lam, p, out, probs, saved, aux); }, reps);
      const double b = bench::median_seconds(
          [&] { kern::attention_backward(q, k, vv, Tensor(), lam, p, probs, saved, aux, g, gq, gk, gv, gl); },
          reps);
      if (v == AttnVariant::original) base = f + b;
      fmt::print("{:<12} {:>5} {:>12.2f} {:>12.2f} {:>12.2f} {:>13.2f}x\n", variant_name(v), T, 1e3 * f,
                 1e3 * b, 1e3 * (f + b), (f + b) / base);
    }
  }
}

// The tiled kernels against the materialized ones (bp_high, 1 BP step, encoder and decoder,
// B·NH = 4, HS = 64) for T up to 8192, with the bytes each keeps for the backward per head: the
// materialized kernel S + 1 maps of T×T (b^0 in `saved`, B in `probs`), the tiled one 2S + 1
// vectors of T (lse, column sums) besides the output, which both keep.
void bench_attention_tiled() {
  fmt::print("\n{:<20} {:>5} {:>14} {:>14} {:>8} {:>16} {:>16}\n", "bp_high, 1 step", "T", "materialized ms",
             "tiled ms", "ratio", "kept/head (mat.)", "kept/head (tiled)");
  const int64_t B = 1, NH = 4, HS = 64;
  for (bool causal : {false, true})
    for (int64_t T : {512, 1024, 2048, 4096, 8192}) {
      Tensor q = random_tensor({B, NH, T, HS}, 11), k = random_tensor({B, NH, T, HS}, 12),
             vv = random_tensor({B, NH, T, HS}, 13), g = random_tensor({B, NH, T, HS}, 14);
      Tensor lam = Tensor::full({NH}, 0.2);
      Tensor out = q.empty_like(), gq = q.zeros_like(), gk = q.zeros_like(), gv = q.zeros_like(),
             gl = lam.zeros_like();
      const AttnParams p{AttnVariant::bp_high, causal, 1, 0.125};
      const int reps = T >= 4096 ? 1 : 3;
      double mat = 0;
      const bool fits = T <= 4096;  // 2 maps of 8192² per head and the scratch: several GiB
      if (fits) {
        Tensor probs = Tensor::empty({B, NH, T, T}), saved = Tensor::empty({1, B, NH, T, T}), aux;
        mat = bench::median_seconds(
            [&] {
              kern::attention_forward(q, k, vv, Tensor(), lam, p, out, probs, saved, aux);
              kern::attention_backward(q, k, vv, Tensor(), lam, p, probs, saved, aux, g, gq, gk, gv, gl);
            },
            reps);
      }
      Tensor lse = Tensor::empty({2, B, NH, T}), col = Tensor::empty({1, B, NH, T});
      const double tiled = bench::median_seconds(
          [&] {
            kern::attention_tiled_forward(q, k, vv, Tensor(), lam, p, out, lse, col);
            kern::attention_tiled_backward(q, k, vv, Tensor(), lam, p, out, lse, col, g, gq, gk, gv, gl);
          },
          reps);
      const double mib = 1.0 / (1 << 20);
      fmt::print("{:<20} {:>5} {:>14} {:>14.1f} {:>8} {:>13.1f} MiB {:>13.3f} MiB\n",
                 causal ? "decoder" : "encoder", T, fits ? fmt::format("{:.1f}", 1e3 * mat) : "-",
                 1e3 * tiled, fits ? fmt::format("{:.2f}x", tiled / mat) : "-", 2.0 * T * T * 4 * mib,
                 3.0 * T * 4 * mib);
    }
}

int run_bench_kernels(bool skip_baseline) {
  fmt::print("saobp bench-kernels: {} OpenMP threads, f32\n", omp_get_max_threads());
  const double peak = bench::fma_peak_gflops();
  fmt::print("measured FP32 FMA peak: {:.1f} GFLOP/s\n\n", peak);

  const std::vector<GemmShape> shapes = {
      {"x W: (4096x256)(256x1024)", 1, 4096, 1024, 256, false, false},
      {"x W: (4096x1024)(1024x256)", 1, 4096, 256, 1024, false, false},
      {"x Wt (linear fwd, 4096x256x1024)", 1, 4096, 1024, 256, false, true},
      {"gt x (weight grad, 1024x256 over 4096)", 1, 1024, 256, 4096, true, false},
      {"Q Kt: (128, 128x64)(128, 64x128)", 128, 128, 128, 64, false, true},
      {"A V: (128, 128x128)(128, 128x64)", 128, 128, 64, 128, false, false},
      {"Q Kt: (128, 512x64)(128, 64x512)", 128, 512, 512, 64, false, true},
      {"A V: (128, 512x512)(128, 512x64)", 128, 512, 64, 512, false, false},
  };
  const auto base = skip_baseline ? decltype(eigen_baseline(shapes)){} : eigen_baseline(shapes);
  fmt::print("{:<42} {:>10} {:>8} {:>14} {:>8}\n", "GEMM", "GFLOP/s", "% peak", "Eigen GFLOP/s", "ratio");
  for (const auto& s : shapes) {
    Tensor a = random_tensor(s.ta ? Shape{s.batch, s.K, s.M} : Shape{s.batch, s.M, s.K}, 1);
    Tensor b = random_tensor(s.tb ? Shape{s.batch, s.N, s.K} : Shape{s.batch, s.K, s.N}, 2);
    Tensor c = Tensor::empty({s.batch, s.M, s.N});
    const double secs = bench::median_seconds([&] { kern::gemm(a, s.ta, b, s.tb, c, 1.0, 0.0); });
    const double gf = 2.0 * s.batch * s.M * s.N * s.K / secs / 1e9;
    auto it = base.find({s.M, s.N, s.K, s.batch});
    if (it != base.end() && !s.ta && !s.tb)
      fmt::print("{:<42} {:>10.1f} {:>7.0f}% {:>14.1f} {:>7.2f}x\n", s.what, gf, 100 * gf / peak, it->second,
                 gf / it->second);
    else
      fmt::print("{:<42} {:>10.1f} {:>7.0f}% {:>14} {:>8}\n", s.what, gf, 100 * gf / peak, "-", "-");
  }

  fmt::print("\n{:<42} {:>10} {:>10}\n", "memory-bound kernels", "GB/s", "ms");
  auto row = [](const char* what, double bytes, double secs) {
    fmt::print("{:<42} {:>10.1f} {:>10.3f}\n", what, bytes / secs / 1e9, secs * 1e3);
  };
  {
    const int64_t N = 4096, C = 256;
    Tensor x = random_tensor({N, C}, 3), w = random_tensor({C}, 4), b = random_tensor({C}, 5);
    Tensor y = x.empty_like(), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
    row("layernorm fwd (4096x256)", 2.0 * N * C * 4,
        bench::median_seconds([&] { kern::layernorm_forward(x, w, b, 1e-5, y, mean, rstd); }));
    Tensor gy = random_tensor({N, C}, 6), gx = x.zeros_like(), gw = w.zeros_like(), gb = b.zeros_like();
    row("layernorm bwd (4096x256)", 3.0 * N * C * 4,
        bench::median_seconds([&] { kern::layernorm_backward(x, w, mean, rstd, gy, gx, gw, gb); }));
  }
  for (int64_t T : {128, 512}) {
    const int64_t R = 128 * T;
    Tensor x = random_tensor({128, T, T}, 7), y = x.empty_like();
    std::vector<uint8_t> causal(static_cast<size_t>(T * T));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) causal[static_cast<size_t>(i * T + j)] = j <= i;
    Tensor mask = Tensor::from_vector(causal, {1, T, T});
    row(fmt::format("softmax fwd (128x{}x{})", T, T).c_str(), 2.0 * R * T * 4,
        bench::median_seconds([&] { kern::softmax_forward(x, Tensor(), y, false); }));
    row(fmt::format("softmax fwd, causal mask (128x{}x{})", T, T).c_str(), 2.0 * R * T * 4,
        bench::median_seconds([&] { kern::softmax_forward(x, mask, y, false); }));
    Tensor gy = random_tensor({128, T, T}, 8), gx = x.zeros_like();
    row(fmt::format("softmax bwd (128x{}x{})", T, T).c_str(), 3.0 * R * T * 4,
        bench::median_seconds([&] { kern::softmax_backward(y, gy, Tensor(), gx, false); }));
  }
  if (attention_bench) bench_attention();
  if (tiled_bench) bench_attention_tiled();
  return 0;
}

}  // namespace

void register_bench_kernels(CLI::App& app) {
  static bool skip_baseline = false;
  CLI::App* sub = app.add_subcommand(
      "bench-kernels", "Benchmark GEMM, LayerNorm, softmax and attention against the FMA peak and Eigen");
  sub->add_flag("--no-baseline", skip_baseline, "skip the Eigen baseline");
  sub->add_flag("!--no-attention", attention_bench, "skip the attention variants");
  sub->add_flag("--tiled", tiled_bench,
                "also time the tiled attention kernels against the materialized ones, T = 512 .. 8192");
  add_command(sub, [] { return run_bench_kernels(skip_baseline); });
}

}  // namespace saobp::cli
