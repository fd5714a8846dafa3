// Training with bf16 GEMM inputs (train.precision = "bf16", docs/precision.md), emulated on the
// CPU: a run config refuses bf16 there, but the trainer takes a config with it set directly, and
// the CPU's bf16 GEMM is the f32 GEMM of the widened operands, the reference of the GPU's. The
// GPU's own runs are the [cuda] test at the end.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tensor/device_info.h"
#include "train/config.h"
#include "train/trainer.h"

using namespace saobp;
namespace fs = std::filesystem;

namespace {

// Settings where both families learn the synthetic copy task within the run (the loss falls
// from log 64 = 4.16 by half): BERT's MLM needs a larger step and more of them. One thread: the
// models are too small to share, and a second thread only waits (the bits are the same).
RunConfig tiny(const std::string& family, const std::string& variant, const std::string& run_dir,
               const std::string& precision) {
  const bool bert = family == "bert";
  const std::string batch = bert ? "32" : "16", steps = bert ? "1000" : "600", lr = bert ? "6e-3" : "3e-3";
  RunConfig c = load_config("", {"model.family=" + family,
                                 "model.preset=custom",
                                 "model.vocab_size=64",
                                 "model.hidden=32",
                                 "model.layers=2",
                                 "model.heads=2",
                                 "model.intermediate=64",
                                 "model.max_positions=32",
                                 "model.attention=" + variant,
                                 "model.dropout=0.1",
                                 "data.kind=synthetic",
                                 "train.seq_len=16",
                                 "train.batch_size=" + batch,
                                 "train.max_steps=" + steps,
                                 "train.warmup_steps=10",
                                 "train.lr=" + lr,
                                 "train.eval_every=0",
                                 "train.log_every=0",
                                 "train.save_every=0",
                                 "train.threads=1",
                                 "train.run_dir=" + run_dir});
  c.train.precision = precision;  // bf16 on the CPU: past load_config's refusal, for this test only
  return c;
}

TrainSummary run(const RunConfig& cfg) {
  TrainOptions opt;
  opt.quiet = true;
  opt.overwrite = true;
  return train(cfg, opt);
}

// Mean of the last 100 steps' losses (one step's loss is noisy).
double tail_mean(const std::vector<double>& losses) {
  double s = 0;
  for (size_t i = losses.size() - 100; i < losses.size(); ++i) s += losses[i];
  return s / 100;
}

}  // namespace

TEST_CASE("bf16 GEMM inputs train as f32 does, within the stated bound, and repeat bit for bit",
          "[train][bf16][slow]") {
  const std::string dir =
      (fs::temp_directory_path() / ("saobp-test-bf16-" + std::to_string(::getpid()))).string();
  for (const std::string family : {"bert", "gpt2"})
    for (const std::string variant : {"original", "bp_high"}) {
      INFO(family << " " << variant);
      const TrainSummary f = run(tiny(family, variant, dir + "/f32", "f32"));
      const TrainSummary h = run(tiny(family, variant, dir + "/bf16", "bf16"));
      REQUIRE(f.losses.size() == h.losses.size());
      REQUIRE(f.losses.size() >= 600);
      if (variant == "bp_high")  // bitwise: the same rounding, the same sums
        CHECK(run(tiny(family, variant, dir + "/bf16b", "bf16")).losses == h.losses);
      CHECK(h.losses != f.losses);  // and the rounding is there
      // Step 1 sees the same weights: only the rounding of the GEMMs' operands differs.
      CHECK(std::abs(h.losses[0] - f.losses[0]) <= 2e-3 * f.losses[0]);
      // The bound of docs/precision.md for these tiny models: the last 100 steps' mean loss within
      // 5% of f32's (measured: 0.3-0.5% for BERT, under 0.1% for GPT-2), and both learned (the
      // loss fell by half from step 1).
      const double mf = tail_mean(f.losses), mh = tail_mean(h.losses);
      WARN(family << " " << variant << ": f32 " << f.losses[0] << " -> " << mf << ", bf16 " << h.losses[0]
                  << " -> " << mh << ", relative difference " << std::abs(mh - mf) / mf);
      CHECK(std::abs(mh - mf) <= 0.05 * mf);
      CHECK(mf < 0.5 * f.losses[0]);
      CHECK(mh < 0.5 * h.losses[0]);
    }
  fs::remove_all(dir);
}

namespace {

// The parity runs of docs/precision.md: BERT-Mini or GPT2-Mini (the paper's sizes, a vocabulary
// of 1000 for the synthetic copy task), T = 128, B = 32, 300 steps.
RunConfig mini(const std::string& family, const std::string& device, const std::string& run_dir,
               const std::string& precision) {
  RunConfig c = load_config(
      "", {"model.family=" + family, "model.preset=mini", "model.vocab_size=1000", "model.attention=bp_high",
           "data.kind=synthetic", "train.seq_len=128", "train.batch_size=32", "train.max_steps=300",
           "train.warmup_steps=30", "train.lr=1e-3", "train.eval_every=0", "train.log_every=0",
           "train.save_every=0", "train.device=" + device, "train.run_dir=" + run_dir});
  c.train.precision = precision;
  return c;
}

void mini_parity(const std::string& device, double bound) {
  const std::string dir =
      (fs::temp_directory_path() / ("saobp-test-bf16-mini-" + std::to_string(::getpid()))).string();
  for (const std::string family : {"bert", "gpt2"}) {
    const TrainSummary f = run(mini(family, device, dir + "/f32", "f32"));
    const TrainSummary h = run(mini(family, device, dir + "/bf16", "bf16"));
    REQUIRE(f.losses.size() == 300);
    REQUIRE(h.losses.size() == 300);
    const double mf = tail_mean(f.losses), mh = tail_mean(h.losses);
    const double rel = std::abs(mh - mf) / mf;
    WARN(family << "-mini on " << device << ": f32 " << f.losses[0] << " " << f.losses[99] << " "
                << f.losses[199] << " -> " << mf << ", bf16 " << h.losses[0] << " " << h.losses[99] << " "
                << h.losses[199] << " -> " << mh
                << " (steps 1, 100, 200, last 100 steps' mean), relative difference " << rel);
    CHECK(rel <= bound);
    // It trains, though 300 steps only begin the copy task (emulated on the CPU: BERT-Mini 6.97 to
    // 6.43, GPT2-Mini 6.96 to 6.91; bf16 within 4.5e-7 and 3.8e-7 of f32 there).
    CHECK(mh < h.losses[0]);
    if (device != "cpu") {  // a second bf16 run on the GPU: the same bits
      const TrainSummary h2 = run(mini(family, device, dir + "/bf16b", "bf16"));
      CHECK(h2.losses == h.losses);
    }
  }
  fs::remove_all(dir);
}

}  // namespace

// [mini]: the paper's Mini models for 300 steps, which the emulated backend (SAOBP_CUDA=EMU,
// tools/emu_check.sh) leaves out: minutes on a GPU, hours there.
TEST_CASE("cuda bf16: BERT-Mini and GPT2-Mini trained 300 steps end within the bound of f32",
          "[cuda][bf16][mini]") {
  if (!cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  mini_parity("cuda", 1e-3);
}

// The same runs emulated on the CPU (the figures of docs/precision.md; 10 minutes on 2 idle cores):
// saobp_tests "[.bf16-cpu-mini]".
TEST_CASE("bf16 on the CPU: BERT-Mini and GPT2-Mini trained 300 steps end within the bound of f32",
          "[.bf16-cpu-mini]") {
  mini_parity("cpu", 1e-3);
}
