// The training loop end to end on the synthetic source: resume equality, checkpoints, errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "core/fs.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace saobp;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("saobp-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

RunConfig tiny(const std::string& run_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {
      "model.preset=custom", "model.vocab_size=64",     "model.hidden=16",        "model.layers=2",
      "model.heads=2",       "model.intermediate=32",   "model.max_positions=16", "model.attention=bp_high",
      "train.seq_len=12",    "train.batch_size=4",      "train.max_steps=6",      "train.warmup_steps=2",
      "train.lr=3e-3",       "train.eval_every=0",      "train.log_every=0",      "train.save_every=3",
      "train.grad_accum=2",  "train.run_dir=" + run_dir};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

}  // namespace

TEST_CASE("trainer: a resumed run ends bitwise where an uninterrupted one does", "[train]") {
  for (const char* family : {"bert", "gpt2"}) {
    INFO(family);
    const std::string dir = temp_dir(std::string("resume-") + family);
    const RunConfig cfg =
        tiny(dir, {std::string("model.family=") + family, "model.vocab_size=64", "model.max_positions=16"});
    TrainOptions quiet;
    quiet.quiet = true;
    const TrainSummary full = train(cfg, quiet);
    REQUIRE(full.steps == 6);
    REQUIRE(fs::exists(fs::path(dir) / "checkpoint-3" / "model.safetensors"));
    const std::string uninterrupted = read_file((fs::path(dir) / "final" / "model.safetensors").string());
    const std::string moments = read_file((fs::path(dir) / "final" / "optimizer.safetensors").string());

    TrainOptions resume = quiet;
    resume.resume_dir = (fs::path(dir) / "checkpoint-3").string();
    const TrainSummary rest = train(cfg, resume);
    CHECK(rest.steps == 6);
    REQUIRE(rest.losses.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(rest.losses[i] == full.losses[3 + i]);
    CHECK(read_file((fs::path(dir) / "final" / "model.safetensors").string()) == uninterrupted);
    CHECK(read_file((fs::path(dir) / "final" / "optimizer.safetensors").string()) == moments);
    for (const char* f : {"trainer_state.json", "config.json", "config.toml"})
      CHECK(fs::exists(fs::path(dir) / "final" / f));
    const EvalResult e = evaluate_checkpoint((fs::path(dir) / "final").string(), {"train.eval_batches=2"});
    CHECK(std::isfinite(e.loss));
    CHECK(e.predictions > 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("trainer: a tiny GPT-2 learns the synthetic copy data", "[train]") {
  const std::string dir = temp_dir("gpt-learns");
  TrainOptions quiet;
  quiet.quiet = true;
  const TrainSummary s =
      train(tiny(dir, {"model.family=gpt2", "model.vocab_size=32", "model.max_positions=16",
                       "train.max_steps=800", "train.lr=1e-2", "train.save_every=0", "train.grad_accum=1"}),
            quiet);
  // About log(27) at the start; the second half of each sequence is a copy, so the loss can
  // fall towards half of that (measured: 3.47 -> 1.69 at step 800).
  double tail = 0;
  for (size_t i = s.losses.size() - 20; i < s.losses.size(); ++i) tail += s.losses[i] / 20;
  CHECK(s.losses.front() > 3.0);
  CHECK(tail < 0.6 * s.losses.front());
  fs::remove_all(dir);
}

TEST_CASE("trainer: checkpoints round-trip and bad ones are rejected by name", "[train]") {
  const std::string dir = temp_dir("ckpt");
  const RunConfig cfg = tiny(dir, {"train.max_steps=3", "train.save_every=0"});
  TrainOptions quiet;
  quiet.quiet = true;
  train(cfg, quiet);
  const std::string final_dir = (fs::path(dir) / "final").string();

  BertForMaskedLM model(encoder_config(cfg), 7);  // a different init, then the saved weights
  load_weights(final_dir, model.params());
  BertForMaskedLM again(encoder_config(cfg), 9);
  load_weights(final_dir, again.params());
  for (size_t i = 0; i < model.params().all().size(); ++i)
    CHECK(model.params().all()[i].data().to_vector<float>() ==
          again.params().all()[i].data().to_vector<float>());
  const EvalResult e = evaluate_checkpoint(final_dir, {"train.eval_batches=2"});
  CHECK(std::isfinite(e.loss));
  CHECK(e.predictions > 0);

  // A model of another size: the mismatch names the tensor.
  BertForMaskedLM other(encoder_config(tiny(dir, {"model.hidden=32"})), 42);
  CHECK_THROWS_WITH(load_weights(final_dir, other.params()),
                    Catch::Contains("word_embeddings") && Catch::Contains("model.safetensors"));
  // A truncated file: the reader names the file.
  const std::string path = (fs::path(final_dir) / "model.safetensors").string();
  const std::string bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_weights(final_dir, model.params()), Catch::Contains("model.safetensors"));
  // A damaged trainer_state.json.
  write_file_atomic(path, bytes);
  write_file_atomic((fs::path(final_dir) / "trainer_state.json").string(), "{\"step\": ");
  AdamW opt(model.params().all(), AdamWConfig{});
  CHECK_THROWS_WITH(load_training_state(final_dir, opt), Catch::Contains("trainer_state.json"));
  fs::remove_all(dir);
}

TEST_CASE("trainer: a diverging run stops naming the step, resume refuses another config", "[train]") {
  const std::string dir = temp_dir("nan");
  TrainOptions quiet;
  quiet.quiet = true;
  CHECK_THROWS_WITH(
      train(tiny(dir, {"train.lr=1e30", "train.grad_clip=0", "train.max_steps=20", "train.save_every=0"}),
            quiet),
      Catch::Contains("step") && Catch::Contains("last good checkpoint"));
  const RunConfig cfg = tiny(dir, {"train.max_steps=3"});
  train(cfg, quiet);
  TrainOptions resume = quiet;
  resume.resume_dir = (fs::path(dir) / "final").string();
  CHECK_THROWS_WITH(train(tiny(dir, {"train.max_steps=3", "train.lr=1e-3"}), resume),
                    Catch::Contains("different config"));
  fs::remove_all(dir);
}
