// The cost table's FLOP arithmetic (src/train/flops.h, src/study/cost.h) against hand counts.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "study/cost.h"
#include "train/config.h"
#include "train/flops.h"

using namespace saobp;
using Catch::Matchers::Contains;

namespace {

// BERT, C = 16, I = 32, L = 2, NH = 2, V = 64, B = 4, T = 8: 32 tokens per step; the MLM head on
// 0.25 x 32 = 8 rows.
RunConfig tiny() {
  return load_config("",
                     {"model.family=bert", "model.preset=custom", "model.hidden=16", "model.intermediate=32",
                      "model.layers=2", "model.heads=2", "model.vocab_size=64", "model.max_positions=16",
                      "train.batch_size=4", "train.seq_len=8", "data.mlm_probability=0.25"});
}

}  // namespace

TEST_CASE("cost: FLOPs per training step and per forward pass, by hand", "[study][cost]") {
  // Training (6 x multiply-adds): blocks 6 L(4C^2 + 2CI) tokens = 6 * 2(1024 + 1024) * 32 = 786432;
  // attention 12 L T C tokens = 12*2*8*16*32 = 98304; MLM transform 6 C^2 rows = 6*256*8 = 12288;
  // decoder 6 C V rows = 6*1024*8 = 49152. Total 946176.
  // BP-High adds 24 steps L NH T tokens = 24*1*2*2*8*32 = 24576: 970752.
  // BP-ElemMul adds 6 L NH T^2 tokens = 6*2*2*64*32 = 49152: 995328.
  // Forward (2 x): 262144 + 32768 + 4096 + 16384 = 315392; BP-High adds 11*2*2*8*32 = 11264: 326656.
  const nlohmann::json t = study::cost_table(tiny(), {"original", "bp_high", "bp_elemmul"}, {})["cost_table"];
  CHECK(t["tokens_per_step"] == 32.0);
  CHECK(t["head_rows"] == 8.0);
  const nlohmann::json& v = t["variants"];
  REQUIRE(v.size() == 3);
  CHECK(v[0]["attention"] == "original");
  CHECK(v[0]["train_flops_per_step"] == 946176.0);
  CHECK(v[0]["inference_flops_per_batch"] == 315392.0);
  CHECK(v[0]["inference_flops_per_token"] == 315392.0 / 32);
  CHECK(v[0]["extra_train_flops"] == 0.0);
  CHECK(v[0]["train_flop_terms"].size() == 4);
  CHECK(v[1]["train_flops_per_step"] == 970752.0);
  CHECK(v[1]["inference_flops_per_batch"] == 326656.0);
  CHECK(v[1]["extra_train_flops"].get<double>() == Approx(24576.0 / 946176.0));
  CHECK(v[1]["train_flop_terms"][2]["name"] == "SAOBP Potts refinement (elementwise)");
  CHECK(v[2]["train_flops_per_step"] == 995328.0);
  CHECK(v[1]["ms_per_step"].is_null());  // nothing measured without bench files
  CHECK(v[1]["inference_ms_per_batch"].is_null());
  CHECK(v[1]["latency_ms"].is_null());
  // Inference: BP-High adds 11264 to 315392, i.e. 1/28.
  CHECK(v[0]["extra_inference_flops"] == 0.0);
  CHECK(v[1]["extra_inference_flops"].get<double>() == Approx(1.0 / 28));
  // Two BP steps double the Potts term: 946176 + 2 * 24576.
  RunConfig two = tiny();
  two.model.attention.variant = AttnVariant::bp_low;
  two.model.attention.bp_steps = 2;
  CHECK(total_flops(step_flops(two, Head::mlm, 32, 8, 0)) == 946176.0 + 2 * 24576.0);
}

TEST_CASE("cost: measured times come from bench files of the same shape", "[study][cost]") {
  const auto dir = std::filesystem::temp_directory_path() / ("saobp-test-cost-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "bp.json").string(), bad = (dir / "bad.json").string();
  write_file_atomic(good, R"({"family": "bert", "batch_size": 4, "seq_len": 8, "attention": "bp_high",
                             "ms_per_step_median": 12.5, "tokens_per_s": 2560, "gflops": 0.08})");
  write_file_atomic(bad, R"({"family": "bert", "batch_size": 4, "seq_len": 16, "attention": "bp_high"})");
  const nlohmann::json t = study::cost_table(tiny(), {"original", "bp_high"}, {good});
  CHECK(t["cost_table"]["variants"][0]["ms_per_step"].is_null());
  CHECK(t["cost_table"]["variants"][1]["ms_per_step"] == 12.5);
  CHECK(t["cost_table"]["variants"][1]["tokens_per_s"] == 2560);
  CHECK_THAT(
      study::cost_markdown(t),
      Contains("| bp_high | 0.0009708 | +2.6% | 12.5 | 2560 | 0.0003267 | +3.6% | 1.021e+04 | - | - | - |"));
  CHECK_THROWS_WITH(study::cost_table(tiny(), {"original"}, {bad}), Contains("bad.json") && Contains("T=16"));
  CHECK_THROWS_WITH(study::cost_table(tiny(), {"softmax"}, {}), Contains("softmax"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("cost: an inference batch is one batch of B sequences, whatever grad_accum", "[study][cost]") {
  // grad_accum = 2: a training step is 2 x 32 = 64 tokens (the MLM head on 16 rows), twice the
  // single-batch step's 946176 FLOPs; an inference batch stays B·T = 32 tokens (head on 8 rows),
  // 315392 FLOPs, 9856 per token.
  RunConfig c = tiny();
  c.train.grad_accum = 2;
  const nlohmann::json t = study::cost_table(c, {"original"}, {})["cost_table"];
  CHECK(t["tokens_per_step"] == 64.0);
  CHECK(t["head_rows"] == 16.0);
  CHECK(t["tokens_per_batch"] == 32.0);
  CHECK(t["batch_head_rows"] == 8.0);
  CHECK(t["variants"][0]["train_flops_per_step"] == 2 * 946176.0);
  CHECK(t["variants"][0]["inference_flops_per_batch"] == 315392.0);
  CHECK(t["variants"][0]["inference_flops_per_token"] == 9856.0);
}

TEST_CASE("cost: inference ms/batch, tokens/s and latency come from inference bench files", "[study][cost]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("saobp-test-cost-inf-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string train = (dir / "train-bp.json").string(), infer_bp = (dir / "infer-bp.json").string(),
                    infer_orig = (dir / "infer-orig.json").string(), bad = (dir / "bad.json").string(),
                    list = (dir / "list.json").string();
  // Training bench of bp_high: 12.5 ms per 32-token step, 32 / 0.0125 = 2560 tokens/s.
  write_file_atomic(train, R"({"family": "bert", "batch_size": 4, "seq_len": 8, "attention": "bp_high",
                              "mode": "pretrain", "ms_per_step_median": 12.5, "tokens_per_s": 2560})");
  // Inference benches, in saobp bench --inference --json's layout: bp_high 2.5 ms per batch of
  // 32 tokens (32 / 0.0025 = 12800 tokens/s), 0.8 ms per sequence; original 2 ms (16000) and 0.5 ms.
  write_file_atomic(infer_bp, R"({"tool": "saobp", "mode": "inference", "family": "bert", "preset": "custom",
    "attention": "bp_high", "batch_size": 4, "seq_len": 8,
    "batch": {"batch_size": 4, "tokens": 32, "ms_median": 2.5, "tokens_per_s": 12800},
    "single": {"batch_size": 1, "tokens": 8, "ms_median": 0.8, "tokens_per_s": 10000}})");
  write_file_atomic(infer_orig, R"({"mode": "inference", "family": "bert", "attention": "original",
    "batch_size": 4, "seq_len": 8, "batch": {"ms_median": 2.0, "tokens_per_s": 16000},
    "single": {"ms_median": 0.5, "tokens_per_s": 16000}})");
  const nlohmann::json t = study::cost_table(tiny(), {"original", "bp_high"}, {train, infer_bp, infer_orig});
  const nlohmann::json& v = t["cost_table"]["variants"];
  // original: inference only; its training columns stay empty.
  CHECK(v[0]["ms_per_step"].is_null());
  CHECK(v[0]["inference_ms_per_batch"] == 2.0);
  CHECK(v[0]["inference_tokens_per_s"] == 16000);
  CHECK(v[0]["latency_ms"] == 0.5);
  // bp_high: both; the inference file does not touch the training figures, nor the other way round.
  CHECK(v[1]["ms_per_step"] == 12.5);
  CHECK(v[1]["tokens_per_s"] == 2560);
  CHECK(v[1]["inference_ms_per_batch"] == 2.5);
  CHECK(v[1]["inference_tokens_per_s"] == 12800);
  CHECK(v[1]["latency_ms"] == 0.8);
  const std::string md = study::cost_markdown(t);
  CHECK_THAT(md, Contains("| attention | train GFLOP/step | vs original | train ms/step | train tokens/s | "
                          "inference GFLOP/batch | vs original | inference FLOP/token | inference ms/batch | "
                          "inference tokens/s | latency ms |"));
  CHECK_THAT(md, Contains("inference: 32 tokens per batch, latency at B = 1"));
  // original: 315392 FLOPs per batch = 0.0003154 GFLOP, 315392 / 32 = 9856 per token.
  CHECK_THAT(
      md,
      Contains("| original | 0.0009462 | +0.0% | - | - | 0.0003154 | +0.0% | 9856 | 2.00 | 16000 | 0.50 |"));
  // bp_high: 326656 = 0.0003267 GFLOP, +1/28 = +3.6%, 326656 / 32 = 10208 per token.
  CHECK_THAT(md, Contains("| bp_high | 0.0009708 | +2.6% | 12.5 | 2560 | 0.0003267 | +3.6% | 1.021e+04 | "
                          "2.50 | 12800 | 0.80 |"));

  // An inference bench without its figures, and a file that is not an object, are named.
  write_file_atomic(bad, R"({"mode": "inference", "family": "bert", "batch_size": 4, "seq_len": 8,
                             "attention": "original", "batch": {"ms_median": 2.0}})");
  CHECK_THROWS_WITH(study::cost_table(tiny(), {"original"}, {bad}),
                    Contains("bad.json") && Contains("inference bench without") && Contains("single"));
  write_file_atomic(list, "[1, 2]");
  CHECK_THROWS_WITH(study::cost_table(tiny(), {"original"}, {list}),
                    Contains("list.json") && Contains("array"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("device_peak: NVIDIA's datasheet rates by the name CUDA reports", "[study][flops]") {
  const auto h200 = device_peak("NVIDIA H200");
  REQUIRE(h200);
  CHECK(h200->bf16_dense == 989.5e12);
  CHECK(h200->f32 == 67e12);
  CHECK(device_peak("NVIDIA H100 80GB HBM3")->model == "H100 SXM");
  CHECK(device_peak("NVIDIA H100 PCIe")->bf16_dense == 756.5e12);
  CHECK(device_peak("NVIDIA H100 NVL")->model == "H100 NVL");
  CHECK(device_peak("NVIDIA A100-SXM4-80GB")->f32 == 19.5e12);
  CHECK_FALSE(device_peak("NVIDIA GeForce RTX 4090"));
  CHECK_FALSE(device_peak(""));
}

TEST_CASE("cost reads a config too large for this machine, whose run is refused", "[study][flops]") {
  // About 1 PiB of activations: beyond any machine's memory, well below 64-bit overflow.
  const std::vector<std::string> o = {"model.family=bert", "data.kind=synthetic", "train.batch_size=1000000",
                                      "train.seq_len=512", "model.max_positions=512"};
  CHECK_THROWS_WITH(load_config("", o),
                    Catch::Contains("train.batch_size") && Catch::Contains("GiB of memory"));
  const RunConfig cfg = load_config("", o, FitCheck::no);
  CHECK(total_flops(step_flops(cfg, Head::mlm, 512e6, 512e6 * 0.15, 0)) > 0);
}
