// Training on the GPU against the CPU reference (issue "Train on the GPU", item 4): the same
// config with train.device = "cuda" and "cpu" agrees in loss at every step; two GPU runs write
// the same bytes; a checkpoint moves between the devices. [cuda]: compiled always, skipped
// where no GPU is present (every check here runs on a GPU machine: tools/gpu_check.sh).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fs.h"
#include "tensor/device_info.h"
#include "train/config.h"
#include "train/trainer.h"

using namespace saobp;
namespace fs = std::filesystem;

namespace {

std::string gpu_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("saobp-test-gpu-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// A tiny model with everything on that the GPU path must carry: RoPE or learned positions, head
// skip, 2 BP steps, learnable λ, dropout; 20 steps, no accumulation.
RunConfig gpu_config(const std::string& family, const std::string& variant, const std::string& device,
                     const std::string& run_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {
      "model.family=" + family, "model.preset=custom",    "model.vocab_size=64",
      "model.hidden=32",        "model.layers=2",         "model.heads=2",
      "model.intermediate=64",  "model.max_positions=32", "model.attention=" + variant,
      "model.dropout=0.1",      "data.kind=synthetic",    "train.seq_len=16",
      "train.batch_size=4",     "train.max_steps=20",     "train.warmup_steps=2",
      "train.lr=3e-3",          "train.eval_every=0",     "train.log_every=0",
      "train.save_every=10",    "train.device=" + device, "train.run_dir=" + run_dir};
  if (variant != "original") {
    o.push_back("model.bp_steps=2");
    o.push_back("model.learnable_lambda=true");
  }
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

TrainSummary run(const RunConfig& cfg) {
  TrainOptions opt;
  opt.quiet = true;
  return train(cfg, opt);
}

}  // namespace

TEST_CASE("cuda training: 20 steps on the GPU follow the CPU's losses", "[cuda][train]") {
  if (!cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (const std::string family : {"bert", "gpt2"})
    for (const std::string variant : {"original", "bp_high", "bp_low", "bp_elemmul"})
      for (const std::string positions : {"learned", "rope"}) {
        INFO(family << " " << variant << " positions " << positions);
        const std::vector<std::string> extra = {"model.positions=" + positions,
                                                "model.skip_sinky_heads=true"};
        const std::string dir = gpu_dir("parity");
        const TrainSummary cpu = run(gpu_config(family, variant, "cpu", dir + "/cpu", extra));
        const TrainSummary gpu = run(gpu_config(family, variant, "cuda", dir + "/gpu", extra));
        REQUIRE(cpu.losses.size() == 20);
        REQUIRE(gpu.losses.size() == 20);
        for (size_t s = 0; s < cpu.losses.size(); ++s) {
          INFO("step " << s + 1 << ": cpu " << cpu.losses[s] << " gpu " << gpu.losses[s]);
          CHECK(std::abs(gpu.losses[s] - cpu.losses[s]) <= 1e-4 * std::abs(cpu.losses[s]));
        }
        fs::remove_all(dir);
      }
}

TEST_CASE("cuda training: two GPU runs write the same bytes, checkpoints move between devices",
          "[cuda][train]") {
  if (!cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  for (const std::string family : {"bert", "gpt2"}) {
    INFO(family);
    const std::string dir = gpu_dir("rerun");
    run(gpu_config(family, "bp_high", "cuda", dir + "/a"));
    run(gpu_config(family, "bp_high", "cuda", dir + "/b"));
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      CHECK(read_file(dir + "/a/final/" + f) == read_file(dir + "/b/final/" + f));
    // The GPU run's checkpoint-10 resumed on the CPU, and the CPU run's on the GPU: each ends
    // where its own device's uninterrupted run ends, within the parity bound of the losses.
    const TrainSummary cpu_full = run(gpu_config(family, "bp_high", "cpu", dir + "/c"));
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"a", "cpu"}, {"c", "cuda"}}) {
      const std::string resumed = dir + "/resume-" + to;
      fs::create_directories(resumed);
      TrainOptions opt;
      opt.quiet = true;
      opt.resume_dir = dir + "/" + from + "/checkpoint-10";
      const TrainSummary r = train(gpu_config(family, "bp_high", to, dir + "/" + from), opt);
      REQUIRE(r.losses.size() == 10);
      CHECK(std::abs(r.losses.back() - cpu_full.losses.back()) <= 1e-4 * std::abs(cpu_full.losses.back()));
    }
    fs::remove_all(dir);
  }
}

// Issue "Train on the GPU", item 2: a training step on a GPU makes the host wait for the GPU a
// fixed number of times, whatever the depth and grad_accum: once to read the micro-batches'
// losses and penalties (Tensor::items; the deferred index checks are read with them) and once
// for the gradient norm (global_grad_norm). Counted as the difference between runs of 4 and 8
// steps (the setup, the final save and the final evaluation are the same in both).
TEST_CASE("cuda training: the host waits for the GPU twice a step", "[cuda][train]") {
  if (!cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  struct Case {
    std::string family, variant;
    int layers, grad_accum;
    std::vector<std::string> extra;
  };
  const std::vector<Case> cases = {
      {"bert", "original", 2, 1, {}},
      {"bert", "bp_high", 4, 1, {"model.skip_sinky_heads=true"}},
      {"bert", "bp_low", 2, 3, {"train.regularizer=entropy", "model.positions=rope"}},
      {"gpt2", "bp_elemmul", 2, 2, {"train.regularizer=eigen"}},
      {"gpt2", "bp_high", 3, 1, {"model.positions=rope", "model.skip_sinky_heads=true"}},
  };
  for (const Case& c : cases) {
    INFO(c.family << " " << c.variant << " layers " << c.layers << " grad_accum " << c.grad_accum);
    std::vector<uint64_t> waits;
    for (int steps : {4, 8}) {
      std::vector<std::string> extra = c.extra;
      extra.push_back("model.layers=" + std::to_string(c.layers));
      extra.push_back("train.grad_accum=" + std::to_string(c.grad_accum));
      extra.push_back("train.max_steps=" + std::to_string(steps));
      extra.push_back("train.save_every=0");
      const std::string dir = gpu_dir("waits");
      const uint64_t w0 = cuda::host_waits();
      run(gpu_config(c.family, c.variant, "cuda", dir, extra));
      waits.push_back(cuda::host_waits() - w0);
      fs::remove_all(dir);
    }
    INFO("waits in 4 steps " << waits[0] << ", in 8 steps " << waits[1]);
    CHECK(waits[1] - waits[0] == 2 * 4);
  }
}
