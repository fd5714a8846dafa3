// The training loop end to end on the synthetic source: resume equality, checkpoints, errors;
// checkpoint integrity (checksums, non-finite weights, trainer_state bounds, config.json against
// config.toml), interrupted swaps, and a run directory that already holds a run; the baseline
// regularizers (train.regularizer) in training and `analyze --per-sample` on a checkpoint.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/hash.h"
#include "model/bert.h"
#include "model/safetensors.h"
#include "study/study.h"
#include "support.h"
#include "train/analysis.h"
#include "train/checkpoint.h"
#include "train/pretrained.h"
#include "train/task.h"
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

// tiny() as a short run for the regularizer and analyze tests: 3 steps, every one logged, no
// accumulation, no intermediate checkpoint.
RunConfig short_run(const std::string& run_dir, std::vector<std::string> extra) {
  std::vector<std::string> o = {"train.max_steps=3", "train.warmup_steps=1", "train.log_every=1",
                                "train.save_every=0", "train.grad_accum=1"};
  o.insert(o.end(), extra.begin(), extra.end());
  return tiny(run_dir, o);
}

// The gradient of `name` after one training loss of `cfg`'s task, backward.
std::vector<double> grad_after_step(const RunConfig& cfg, const std::string& name,
                                    double* penalty = nullptr) {
  const std::unique_ptr<Task> task = make_task(cfg);
  task->prepare_training();
  task->train_loss(0, 0, nullptr, nullptr).backward();
  if (penalty) *penalty = task->regularizer().last_penalty().item();
  const Var& p = task->params().get(name);
  return p.grad().defined() ? test::values(p.grad()) : std::vector<double>();
}

// 4 steps of 2 micro-batches, a checkpoint every 2 steps, a metrics line every step.
RunConfig checkpointing(const std::string& run_dir) {
  return tiny(run_dir, {"model.layers=1", "train.max_steps=4", "train.warmup_steps=1", "train.log_every=1",
                        "train.save_every=2", "train.eval_batches=1"});
}

TrainOptions quiet_options() {
  TrainOptions o;
  o.quiet = true;
  return o;
}

// Replaces dir/name with `bytes` and records its checksum, as a consistent but wrong checkpoint.
void rewrite(const std::string& dir, const std::string& name, const std::string& bytes) {
  write_file_atomic(dir + "/" + name, bytes);
  nlohmann::json sums = nlohmann::json::parse(read_file(dir + "/checksums.json"));
  sums["files"][name] = fmt::format("{:016x}", fnv1a64(bytes));
  write_file_atomic(dir + "/checksums.json", sums.dump());
}

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// A pid that ran and has exited (its leftovers belong to no live process).
long dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

size_t lines_of(const std::string& path) {
  const std::string s = read_file(path);
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
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
  CHECK_THROWS_WITH(load_training_state(final_dir, opt, 3, 2), Catch::Contains("trainer_state.json"));
  // A number of the wrong kind is refused by name, never converted (1e300 into an int is
  // undefined behaviour; 2.5 was cut to 2).
  fs::remove(fs::path(final_dir) / "checksums.json");  // else the checksum names the change first
  const std::string state =
      R"({"step": 3, "data_position": 3, "config_hash": "0", "seed": 42, "optimizer_steps": 3)";
  for (const auto& [extra, message] :
       {std::pair<const char*, const char*>{R"(, "ranks": 1e300})", "ranks is 1e+300; expected an integer"},
        {R"(, "grad_accum": 2.5})", "grad_accum is 2.5; expected an integer"},
        {R"(, "seed": -1})", "'seed' is -1, not an integer >= 0"}}) {
    write_file_atomic((fs::path(final_dir) / "trainer_state.json").string(), state + extra);
    CHECK_THROWS_WITH(load_training_state(final_dir, opt, 3, 2),
                      Catch::Contains("trainer_state.json") && Catch::Contains(message));
  }
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
  TrainOptions overwrite = quiet;
  overwrite.overwrite = true;  // the diverged run left its metrics.jsonl
  train(cfg, overwrite);
  TrainOptions resume = quiet;
  resume.resume_dir = (fs::path(dir) / "final").string();
  CHECK_THROWS_WITH(train(tiny(dir, {"train.max_steps=3", "train.lr=1e-3"}), resume),
                    Catch::Contains("different config"));
  fs::remove_all(dir);
}

TEST_CASE("regularizer config keys are checked by name", "[regularizer][config]") {
  const RunConfig d = load_config("", {});
  CHECK(d.train.regularizer == "none");
  CHECK(d.train.regularizer_coef == 1e-5);
  CHECK(d.train.entropy_reg_gamma == 0.2);
  CHECK_THROWS_WITH(load_config("", {"train.regularizer=l2"}), Catch::Contains("train.regularizer"));
  CHECK_THROWS_WITH(load_config("", {"train.regularizer_coef=-1"}),
                    Catch::Contains("train.regularizer_coef"));
  CHECK_THROWS_WITH(load_config("", {"train.entropy_reg_gamma=-0.1"}),
                    Catch::Contains("train.entropy_reg_gamma"));
  CHECK(to_toml(load_config("", {"train.regularizer=eigen"})).find("regularizer = \"eigen\"") !=
        std::string::npos);
  CHECK(config_hash(load_config("", {"train.regularizer=eigen"})) != config_hash(d));
}

TEST_CASE("regularizers train a tiny BERT and GPT-2: penalty logged, θ and weights get its gradient",
          "[regularizer][train]") {
  for (const char* family : {"bert", "gpt2"})
    for (const char* kind : {"entropy", "eigen"}) {
      INFO(family << " " << kind);
      const std::string dir = temp_dir(std::string("reg-") + family + "-" + kind);
      // γ = 0.05: a causal map at T = 12 has a mean row entropy near 0.55 log T at initialization,
      // inside the default margin around θ = 0.5.
      const std::vector<std::string> extra = {std::string("model.family=") + family,
                                              std::string("train.regularizer=") + kind,
                                              "train.entropy_reg_gamma=0.05", "model.attention=bp_high"};
      const RunConfig cfg = short_run(dir, extra);  // 3 steps, each logged
      TrainOptions quiet;
      quiet.quiet = true;
      const TrainSummary s = train(cfg, quiet);
      REQUIRE(s.losses.size() == 3);
      for (double l : s.losses) CHECK(std::isfinite(l));
      std::ifstream metrics(fs::path(dir) / "metrics.jsonl");
      std::string line;
      int logged = 0;
      while (std::getline(metrics, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (!j.contains("loss")) continue;
        REQUIRE(j.contains("reg_penalty"));
        CHECK(j["reg_penalty"].get<double>() > 0);
        ++logged;
      }
      CHECK(logged == 3);

      // The penalty's gradient: with coef 1 against coef 0, θ (entropy) or layer 0's query
      // weight (eigen) gets a different gradient; θ's is zero without the penalty.
      const std::string layer0 =
          std::string(family) == "bert" ? "bert.encoder.layer.0.attention.self." : "transformer.h.0.attn.";
      const std::string name =
          std::string(kind) == "entropy"
              ? layer0 + "saobp_entropy_theta"
              : layer0 + (std::string(family) == "bert" ? "query.weight" : "c_attn.weight");
      double penalty = 0;
      RunConfig on = cfg, off = cfg;
      on.train.regularizer_coef = 1.0, off.train.regularizer_coef = 0.0;
      const std::vector<double> g_on = grad_after_step(on, name, &penalty),
                                g_off = grad_after_step(off, name);
      CHECK(penalty > 0);
      REQUIRE(g_on.size() == g_off.size());
      CHECK(test::max_abs_diff(g_on, g_off) > 1e-6);
      if (std::string(kind) == "entropy") {
        for (double g : g_off) CHECK(g == 0.0);
      }
      fs::remove_all(dir);
    }
}

TEST_CASE("regularizer none registers nothing and logs a zero penalty, and the log line has the memory peak",
          "[regularizer][train]") {
  const std::string dir = temp_dir("reg-none");
  const RunConfig cfg = short_run(dir, {});
  const std::unique_ptr<Task> task = make_task(cfg);
  CHECK_THROWS(task->params().get("bert.encoder.layer.0.attention.self.saobp_entropy_theta"));
  CHECK_FALSE(task->regularizer().on());
  RunConfig ent = cfg;
  ent.train.regularizer = "entropy";
  const std::unique_ptr<Task> with = make_task(ent);
  CHECK(with->params().all().size() == task->params().all().size() + 2);
  CHECK(test::values(with->params().get("bert.encoder.layer.1.attention.self.saobp_entropy_theta").data()) ==
        std::vector<double>{kEntropyThetaInit, kEntropyThetaInit});
  TrainOptions quiet;
  quiet.quiet = true;
  train(cfg, quiet);
  std::ifstream metrics(fs::path(dir) / "metrics.jsonl");
  std::string line;
  REQUIRE(std::getline(metrics, line));
  const nlohmann::json first = nlohmann::json::parse(line);
  CHECK(first["reg_penalty"] == 0.0);
  // The most bytes of host tensor storage alive at once (at least the model's parameters and
  // their AdamW moments), and the CPU's resident peak, whole and per token of a micro-batch.
  REQUIRE(first.contains("peak_tensor_memory_gib"));
  double n_params = 0;
  for (const Var& p : task->params().all()) n_params += static_cast<double>(p.numel());
  CHECK(first["peak_tensor_memory_gib"].get<double>() * (1 << 30) >= 3 * 4 * n_params);  // f32 θ, m, v
  CHECK(first["peak_tensor_memory_mib_per_token"].get<double>() *
            static_cast<double>(cfg.train.batch_size * cfg.train.seq_len) ==
        Approx(first["peak_tensor_memory_gib"].get<double>() * 1024));
  REQUIRE(first.contains("peak_rss_gib"));
  CHECK(first["peak_rss_gib"].get<double>() > 0);
  CHECK(first["peak_rss_mib_per_token"].get<double>() *
            static_cast<double>(cfg.train.batch_size * cfg.train.seq_len) ==
        Approx(first["peak_rss_gib"].get<double>() * 1024));
  fs::remove_all(dir);
}

TEST_CASE("analyze --per-sample on a tiny checkpoint: every (sample, layer, map, head), thread-independent",
          "[regularizer][analyze]") {
  const std::string dir = temp_dir("per-sample");
  const RunConfig cfg = short_run(dir, {"train.log_every=0"});
  TrainOptions quiet;
  quiet.quiet = true;
  const TrainSummary s = train(cfg, quiet);
  AnalysisOptions ao;
  ao.samples = 6;  // two batches of 4, the second cut to 2 rows
  ao.per_sample = true;
  const DiagnosticsReport one =
      test::with_threads(1, [&] { return analyze_checkpoint(s.final_checkpoint, ao); });
  const DiagnosticsReport two =
      test::with_threads(2, [&] { return analyze_checkpoint(s.final_checkpoint, ao); });
  REQUIRE(one.per_sample.size() == static_cast<size_t>(6 * 2 * 2 * 2));
  CHECK(one.per_sample.back().sample == 5);
  CHECK(one.per_sample_csv() == two.per_sample_csv());
  const std::string out = (fs::path(dir) / "analysis").string();
  write_analysis(one, s.final_checkpoint, out);
  CHECK(read_file((fs::path(out) / "per_sample.csv").string()) == one.per_sample_csv());
  ao.per_sample = false;
  const std::string plain = (fs::path(dir) / "plain").string();
  write_analysis(analyze_checkpoint(s.final_checkpoint, ao), s.final_checkpoint, plain);
  CHECK_FALSE(fs::exists(fs::path(plain) / "per_sample.csv"));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: every file's checksum is recorded and a flipped byte is refused by name",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-sums");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string fin = dir + "/final";
  const nlohmann::json sums = json_of(fin + "/checksums.json");
  CHECK(sums["algorithm"] == "fnv1a64");
  for (const char* f :
       {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "config.json", "config.toml"})
    CHECK(sums["files"].contains(f));
  std::string bytes = read_file(fin + "/model.safetensors");
  bytes[bytes.size() - 5] ^= 0x10;  // a data byte: the header still parses
  write_file_atomic(fin + "/model.safetensors", bytes);
  BertForMaskedLM model(encoder_config(cfg), 1);
  CHECK_ERROR(load_weights(fin, model.params()),
              Catch::Contains("model.safetensors") && Catch::Contains("checksum"));
  CHECK_ERROR(evaluate_checkpoint(fin, {}),
              Catch::Contains("model.safetensors") && Catch::Contains("checksum"));
  CHECK_ERROR(init_from_pretrained(fin, model.params(), {}), Catch::Contains("checksum"));
  // A Hugging Face folder has no checksums.json: it loads.
  fs::remove(fin + "/checksums.json");
  CHECK_NOTHROW(load_weights(fin, model.params()));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: NaN and Inf weights are refused naming the tensor and the index",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-nan");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string fin = dir + "/final";
  BertForMaskedLM model(encoder_config(cfg), 1);
  load_weights(fin, model.params());
  std::vector<NamedTensor> named;
  for (const Var& p : model.params().all()) named.push_back({p.name(), p.data().clone()});
  std::vector<float> v = named[3].tensor.to_vector<float>();
  v[5] = std::numeric_limits<float>::quiet_NaN();
  named[3].tensor = Tensor::from_vector(v, named[3].tensor.shape());
  const std::string path = fin + "/model.safetensors";
  save_safetensors(path, named, {{"format", "pt"}});
  rewrite(fin, "model.safetensors", read_file(path));
  CHECK_ERROR(load_weights(fin, model.params()),
              Catch::Contains(named[3].name) && Catch::Contains("index 5"));
  CHECK_ERROR(init_from_pretrained(fin, model.params(), {}),
              Catch::Contains(named[3].name) && Catch::Contains("nan"));
  CHECK_ERROR(evaluate_checkpoint(fin, {}), Catch::Contains(named[3].name));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a negative second moment in optimizer.safetensors is refused naming the tensor",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-moment");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string ck = dir + "/checkpoint-2", path = ck + "/optimizer.safetensors";
  SafetensorsFile f = load_safetensors(path);
  NamedTensor* sq = nullptr;
  for (NamedTensor& t : f.tensors)
    if (!sq && t.name.size() > 11 && t.name.substr(t.name.size() - 11) == ".exp_avg_sq") sq = &t;
  REQUIRE(sq);
  std::vector<float> v = sq->tensor.to_vector<float>();
  REQUIRE(v.size() > 2);
  v[2] = -1.0f;  // finite, so only the sign gives it away
  sq->tensor = Tensor::from_vector(v, sq->tensor.shape());
  save_safetensors(path, f.tensors, f.metadata);
  rewrite(ck, "optimizer.safetensors", read_file(path));
  TrainOptions resume = quiet_options();
  resume.resume_dir = ck;
  CHECK_ERROR(train(cfg, resume), Catch::Contains(path) && Catch::Contains(sq->name) &&
                                      Catch::Contains("index 2") &&
                                      Catch::Contains("second moments are >= 0"));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: trainer_state.json out of range is refused naming the key", "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-state");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string ck = dir + "/checkpoint-2";
  const nlohmann::json good = json_of(ck + "/trainer_state.json");
  TrainOptions resume = quiet_options();
  resume.resume_dir = ck;
  auto with = [&](const char* key, int64_t value) {
    nlohmann::json j = good;
    j[key] = value;
    rewrite(ck, "trainer_state.json", j.dump());
  };
  with("step", -1);
  CHECK_ERROR(train(cfg, resume), Catch::Contains("trainer_state.json") && Catch::Contains("'step'"));
  with("step", 1000000000000);
  CHECK_ERROR(train(cfg, resume), Catch::Contains("'step'") && Catch::Contains("max_steps"));
  with("data_position", -7);
  CHECK_ERROR(train(cfg, resume), Catch::Contains("'data_position'"));
  with("data_position", std::numeric_limits<int64_t>::max());
  CHECK_ERROR(train(cfg, resume), Catch::Contains("'data_position'"));
  with("optimizer_steps", 1);
  CHECK_ERROR(train(cfg, resume), Catch::Contains("'optimizer_steps'"));
  rewrite(ck, "trainer_state.json", good.dump());
  CHECK_NOTHROW(train(cfg, resume));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: eval refuses a config.json that disagrees with config.toml", "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-cfgjson");
  train(checkpointing(dir), quiet_options());
  const std::string fin = dir + "/final";
  const nlohmann::json good = json_of(fin + "/config.json");
  CHECK_NOTHROW(evaluate_checkpoint(fin, {}));
  nlohmann::json j = good;
  j["num_hidden_layers"] = 3;
  rewrite(fin, "config.json", j.dump());
  CHECK_ERROR(evaluate_checkpoint(fin, {}),
              Catch::Contains("config.json") && Catch::Contains("num_hidden_layers"));
  j = good;
  j["vocab_size"] = 65;
  rewrite(fin, "config.json", j.dump());
  CHECK_ERROR(evaluate_checkpoint(fin, {}), Catch::Contains("'vocab_size'"));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: an interrupted swap is finished or undone at the next start, and said",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-swap");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string weights = read_file(dir + "/final/model.safetensors");
  const long pid = dead_pid();
  // Killed between the renames: final is gone, final.old-PID holds it.
  fs::rename(dir + "/final", dir + fmt::format("/final.old-{}", pid));
  // A read-only command reads the old copy and changes nothing.
  CHECK(readable_checkpoint(dir + "/final") == dir + fmt::format("/final.old-{}", pid));
  CHECK_NOTHROW(evaluate_checkpoint(dir + "/final", {}));
  CHECK_FALSE(fs::exists(dir + "/final"));
  // A half-written copy of checkpoint-2 (no checksums.json) and a leftover atomic-write file.
  fs::copy(dir + "/checkpoint-2", dir + fmt::format("/checkpoint-2.tmp-{}", pid));
  fs::remove(dir + fmt::format("/checkpoint-2.tmp-{}/checksums.json", pid));
  write_file_atomic(dir + fmt::format("/metrics.jsonl.tmp.{}", pid), "x");
  // Another process's save in progress is left alone.
  fs::create_directories(dir + fmt::format("/checkpoint-4.tmp-{}", ::getppid()));
  const std::vector<std::string> notes = recover_interrupted_saves(dir);
  REQUIRE(notes.size() == 4);
  CHECK(read_file(dir + "/final/model.safetensors") == weights);
  CHECK_FALSE(fs::exists(dir + fmt::format("/final.old-{}", pid)));
  CHECK_FALSE(fs::exists(dir + fmt::format("/checkpoint-2.tmp-{}", pid)));
  CHECK_FALSE(fs::exists(dir + fmt::format("/metrics.jsonl.tmp.{}", pid)));
  CHECK(fs::exists(dir + fmt::format("/checkpoint-4.tmp-{}", ::getppid())));
  fs::remove_all(dir + fmt::format("/checkpoint-4.tmp-{}", ::getppid()));
  // Killed after the checksums, before the first rename of a new name: the save is finished.
  fs::rename(dir + "/final", dir + fmt::format("/final.tmp-{}", pid));
  CHECK(recover_interrupted_saves(dir).size() == 1);
  CHECK(read_file(dir + "/final/model.safetensors") == weights);
  // Both an old copy and a complete new one: the new one wins, the old one goes.
  fs::copy(dir + "/checkpoint-2", dir + fmt::format("/final.old-{}", pid));
  fs::rename(dir + "/final", dir + fmt::format("/final.tmp-{}", pid));
  CHECK(recover_interrupted_saves(dir).size() == 2);
  CHECK(read_file(dir + "/final/model.safetensors") == weights);
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    CHECK(name.find(".old-") == std::string::npos);
    CHECK(name.find(".tmp") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a new run refuses a run directory that holds one, --resume takes the latest",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-rerun");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  const std::string metrics = dir + "/metrics.jsonl";
  const size_t lines = lines_of(metrics);
  REQUIRE(lines == 4);
  CHECK_ERROR(train(cfg, quiet_options()),
              Catch::Contains(dir) && Catch::Contains("--resume") && Catch::Contains("--overwrite"));
  CHECK(lines_of(metrics) == lines);
  // --resume with no directory: the latest complete checkpoint (final), metrics appended.
  TrainOptions latest = quiet_options();
  latest.resume_latest = true;
  CHECK(latest_checkpoint(dir) == dir + "/final");
  train(cfg, latest);
  CHECK(lines_of(metrics) == lines);  // final was at max_steps: no step taken, nothing lost
  // Without final, checkpoint-2 (a damaged one is skipped); the rest of the run is appended.
  fs::remove_all(dir + "/final");
  fs::copy(dir + "/checkpoint-2", dir + "/checkpoint-3");
  write_file_atomic(dir + "/checkpoint-3/config.toml", "damaged");
  std::vector<std::string> notes;
  CHECK(latest_checkpoint(dir, &notes) == dir + "/checkpoint-2");
  CHECK(notes.size() == 1);
  fs::remove_all(dir + "/checkpoint-3");
  const TrainSummary rest = train(cfg, latest);
  CHECK(rest.losses.size() == 2);
  CHECK(lines_of(metrics) == lines + 2);
  // --overwrite: a new run, metrics.jsonl started again.
  TrainOptions over = quiet_options();
  over.overwrite = true;
  train(cfg, over);
  CHECK(lines_of(metrics) == lines);
  // No checkpoint at all: --resume says so.
  const std::string empty = temp_dir("ckpt-rerun-empty");
  CHECK_ERROR(train(checkpointing(empty), latest), Catch::Contains("no complete checkpoint"));
  fs::remove_all(dir);
  fs::remove_all(empty);
}

TEST_CASE(
    "checkpoint: --resume names the keys that differ, and takes a moved run or new log, save and thread "
    "settings",
    "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-resume-keys"), moved = temp_dir("ckpt-resume-moved");
  const RunConfig cfg = checkpointing(dir);
  const TrainSummary whole = train(cfg, quiet_options());
  fs::remove_all(dir + "/final");
  TrainOptions resume = quiet_options();
  resume.resume_dir = dir + "/checkpoint-2";
  // A key that changes the training: refused, naming it with both values; nothing written.
  RunConfig lr = cfg;
  lr.train.lr = 1e-3;
  CHECK_ERROR(train(lr, resume), Catch::Contains("train.lr = 0.003 in the checkpoint, 0.001 in this run") &&
                                     Catch::Contains("--init"));
  CHECK_FALSE(fs::exists(dir + "/final"));
  // Into another run's folder (the checkpoint is not inside it): refused, naming train.run_dir.
  CHECK_ERROR(train(checkpointing(moved), resume), Catch::Contains("train.run_dir = "));
  CHECK_FALSE(fs::exists(moved + "/metrics.jsonl"));
  fs::remove_all(moved);
  // The run folder copied elsewhere, with another log interval and thread count: resumed, and
  // the rest of the run is the uninterrupted one's.
  fs::copy(dir, moved, fs::copy_options::recursive);
  RunConfig other = checkpointing(moved);
  other.train.log_every = 2;
  other.train.threads = 1;
  resume.resume_dir = moved + "/checkpoint-2";
  const TrainSummary rest = train(other, resume);
  REQUIRE(rest.losses.size() == 2);
  CHECK(rest.losses.back() == whole.losses.back());
  // Its checkpoints carry this run's config and hash: resuming them with it needs no note.
  resume.resume_dir = moved + "/final";
  CHECK(train(other, resume).losses.empty());
  fs::remove_all(dir);
  fs::remove_all(moved);
}

TEST_CASE("checkpoint: an output path that would replace an input of the command is refused by option",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-out-over-in");
  train(checkpointing(dir), quiet_options());
  const std::string fin = dir + "/final", prompts = dir + "/prompts.txt";
  write_file_atomic(prompts, "hello\n");
  const std::vector<std::string> inputs = {fin, prompts};
  auto refused = [&](const std::string& out, const std::vector<std::string>& in) {
    try {
      refuse_output_over_inputs(out, "--out", in);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("--out " + out) != std::string::npos);
      return true;
    }
    return false;
  };
  // The input file itself, by another spelling or through a link; the checkpoint's own files.
  CHECK(refused(prompts, inputs));
  CHECK(refused(dir + "/./sub/../prompts.txt", inputs));
  fs::create_symlink(prompts, dir + "/link.txt");
  CHECK(refused(dir + "/link.txt", inputs));
  CHECK(refused(fin, inputs));
  for (const char* f :
       {"model.safetensors", "config.toml", "config.json", "checksums.json", "trainer_state.json"})
    CHECK(refused(fin + "/" + f, inputs));
  // A run folder as the input: what the run saved there.
  for (const char* f :
       {"metrics.jsonl", "final/model.safetensors", "checkpoint-2/new.txt", "final/analysis.json"})
    CHECK(refused(dir + "/" + f, {dir}));
  // New files beside them are outputs like any other.
  CHECK_FALSE(refused(fin + "/analysis", inputs));           // analyze's default folder
  CHECK_FALSE(refused(fin + "/generations.jsonl", inputs));  // a new file in the checkpoint folder
  CHECK_FALSE(refused(dir + "/report.html", {dir}));
  // Any other folder (benchmark data, a study): every file in it, at any depth.
  const std::string data = dir + "/glue";
  fs::create_directories(data + "/SST-2");
  write_file_atomic(data + "/SST-2/dev.tsv", "sentence\tlabel\n");
  CHECK(refused(data + "/SST-2/dev.tsv", {fin, data}));
  CHECK_FALSE(refused(data + "/SST-2/results.json", {fin, data}));
  CHECK_FALSE(refused(dir + "/other.txt", inputs));
  CHECK_FALSE(refused("", inputs));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a run folder in use by another process is refused, and free again when it ends",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-locked");
  const RunConfig cfg = checkpointing(dir);
  train(cfg, quiet_options());
  fs::remove_all(dir + "/final");
  // Another process's run holds the folder: a resumption and an --overwrite are both refused,
  // and nothing of the run is touched.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  TrainOptions resume = quiet_options(), over = quiet_options();
  resume.resume_latest = true;
  over.overwrite = true;
  for (const TrainOptions& o : {resume, over})
    CHECK_ERROR(train(cfg, o), Catch::Contains(dir) && Catch::Contains("in use by another saobp process"));
  CHECK(fs::exists(dir + "/checkpoint-2/model.safetensors"));
  ::close(fd);
  CHECK(train(cfg, resume).losses.size() == 2);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: --overwrite removes a run's outputs and leaves every other file alone",
          "[train][checkpoint]") {
  const std::string dir = temp_dir("ckpt-overwrite");
  fs::create_directories(dir);
  RunConfig cfg = checkpointing(dir);
  TrainOptions over = quiet_options();
  over.overwrite = true;
  // A folder of the user's files that holds no run: refused with and without --overwrite.
  write_file_atomic(dir + "/thesis.tex", "precious\n");
  for (const TrainOptions& o : {quiet_options(), over})
    CHECK_ERROR(train(cfg, o), Catch::Contains(dir) && Catch::Contains("holds no run") &&
                                   Catch::Contains("thesis.tex") && Catch::Contains("empty or new folder"));
  CHECK(read_file(dir + "/thesis.tex") == "precious\n");
  fs::remove(dir + "/thesis.tex");
  train(cfg, quiet_options());
  REQUIRE(fs::exists(dir + "/checkpoint-2"));
  // Files the user put beside the run, and the run's inputs among them, stay.
  fs::create_directories(dir + "/sub");
  write_file_atomic(dir + "/thesis.tex", "precious\n");
  write_file_atomic(dir + "/sub/data.csv", "x\n");
  write_file_atomic(dir + "/final/notes.txt", "inside the run\n");
  for (const char* name :
       {"final", "checkpoint-2", "metrics.jsonl", "results.json", "predictions_dev.jsonl", "predictions.json",
        "null_odds_test.json", "SST-2.tsv", "MNLI-mm.tsv", "final.tmp-123", "checkpoint-4.old-9"})
    CHECK(is_run_output(name));
  for (const char* name : {"thesis.tex", "sub", "data.tsv", "final2", "checkpoint-x", "metrics.json",
                           "corpus.txt", "run.toml", "predictions.txt"})
    CHECK_FALSE(is_run_output(name));
  // An input inside what --overwrite would delete: refused, nothing removed.
  RunConfig reads_final = cfg;
  reads_final.data.vocab = dir + "/final/vocab.txt";
  CHECK_ERROR(train(reads_final, over), Catch::Contains("data.vocab") && Catch::Contains(dir + "/final"));
  TrainOptions init_inside = over;
  init_inside.init_dir = dir + "/checkpoint-2";
  CHECK_ERROR(train(cfg, init_inside), Catch::Contains("--init") && Catch::Contains("would delete"));
  REQUIRE(fs::exists(dir + "/final/notes.txt"));
  // --overwrite: a new run; the run's outputs replaced, the user's files untouched.
  train(cfg, over);
  CHECK(lines_of(dir + "/metrics.jsonl") == 4);
  CHECK_FALSE(fs::exists(dir + "/final/notes.txt"));
  CHECK(read_file(dir + "/thesis.tex") == "precious\n");
  CHECK(read_file(dir + "/sub/data.csv") == "x\n");
  fs::remove_all(dir);
}

// docs/finetune.md, "Longer inputs": `saobp train CONFIG --init PHASE1/final train.seq_len=...`
// (TrainOptions::init_dir) continues pretraining at a longer length from every weight of phase 1.
TEST_CASE("trainer: a second pretraining phase at a longer seq_len starts from the first phase's weights",
          "[train][pretrained]") {
  for (const char* family : {"bert", "gpt2"}) {
    INFO(family);
    const std::string pos = std::string(family) == "bert" ? "bert.embeddings.position_embeddings.weight"
                                                          : "transformer.wpe.weight";
    const std::vector<std::string> common = {std::string("model.family=") + family,
                                             "model.vocab_size=64",
                                             "model.max_positions=32",
                                             "train.warmup_steps=1",
                                             "train.save_every=0",
                                             "train.grad_accum=1",
                                             "train.weight_decay=0"};  // untrained rows stay bitwise
    auto with = [&](std::vector<std::string> o) {
      o.insert(o.begin(), common.begin(), common.end());
      return o;
    };
    const std::string d1 = temp_dir(std::string("phase1-") + family),
                      d2 = temp_dir(std::string("phase2-") + family);
    // Phase 1 at T = 12: rows 12..31 of the position table get no gradient.
    const RunConfig c1 = tiny(d1, with({"train.seq_len=12", "train.max_steps=3"}));
    const Tensor init = make_task(c1)->params().get(pos).data().clone();
    train(c1, quiet_options());
    const SafetensorsFile p1 = load_safetensors(d1 + "/final/model.safetensors");
    const Tensor& pos1 = p1.get(pos);
    CHECK(!test::bitwise_equal(pos1.slice(0, 0, 12), init.slice(0, 0, 12)));
    CHECK(test::bitwise_equal(pos1.slice(0, 12, 32), init.slice(0, 12, 32)));

    // Phase 2 at T = 32 from phase 1's checkpoint: every tensor loaded, none initialized.
    const RunConfig c2 = tiny(d2, with({"train.seq_len=32", "train.max_steps=3"}));
    TrainOptions opt = quiet_options();
    opt.init_dir = d1 + "/final";
    const TrainSummary s2 = train(c2, opt);
    const std::unique_ptr<Task> task = make_task(c2);
    task->prepare_training();
    CHECK(s2.init_report["loaded"].size() == task->params().all().size());
    CHECK(s2.init_report["initialized"].empty());
    // Its first loss is phase 1's weights on phase 2's first batch (T = 32), not a fresh model's.
    const double fresh = task->train_loss(0, 0, nullptr, nullptr).data().item();
    init_from_pretrained(d1 + "/final", task->params(), task->head_prefixes());
    const double continued = task->train_loss(0, 0, nullptr, nullptr).data().item();
    REQUIRE(s2.losses.size() == 3);
    CHECK(s2.losses[0] == continued);
    CHECK(s2.losses[0] != fresh);
    // Phase 2 trains the rows phase 1 never reached.
    const SafetensorsFile p2 = load_safetensors(d2 + "/final/model.safetensors");
    CHECK(!test::bitwise_equal(p2.get(pos).slice(0, 12, 32), pos1.slice(0, 12, 32)));
    fs::remove_all(d1);
    fs::remove_all(d2);
  }
}

TEST_CASE("trainer: every evaluation logs single-layer and cross-layer GTD per layer", "[train]") {
  // The paper's Table 6 correlates both over checkpoints: eval_cross_gtd beside eval_gtd, read back
  // by the study tables and correlate as cross_gtd_L<l>.
  const std::string dir = temp_dir("cross-gtd");
  const RunConfig cfg = short_run(dir, {"train.eval_every=3", "model.attention=bp_high"});
  TrainOptions quiet;
  quiet.quiet = true;
  train(cfg, quiet);
  std::ifstream metrics(fs::path(dir) / "metrics.jsonl");
  std::string line;
  int evals = 0;
  while (std::getline(metrics, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("eval_loss")) continue;
    ++evals;
    REQUIRE(j["eval_cross_gtd"].size() == static_cast<size_t>(cfg.model.layers));
    REQUIRE(j["eval_gtd"].size() == static_cast<size_t>(cfg.model.layers));
    for (const auto& g : j["eval_cross_gtd"]) CHECK((g.get<double>() > 0 && g.get<double>() < 1));
    const auto m = study::eval_line_metrics(j);
    const auto found =
        std::find_if(m.begin(), m.end(), [](const auto& kv) { return kv.first == "cross_gtd_L1"; });
    REQUIRE(found != m.end());
    CHECK(found->second == j["eval_cross_gtd"][1].get<double>());
  }
  CHECK(evals == 1);
  fs::remove_all(dir);
}

// model.tiled runs the tiled attention kernels: the same training losses as the materialized ones
// (to float rounding), BERT and GPT-2, with RoPE, 2 BP steps and a learnable λ; a checkpoint of
// one resumes on the other (config_hash does not see the key); no entropies in the log lines.
TEST_CASE("trainer: model.tiled trains as the materialized kernels do", "[train][tiled]") {
  for (const std::string family : {"bert", "gpt2"})
    for (const std::string variant : {"original", "bp_high", "bp_low"}) {
      INFO(family << " " << variant);
      const std::string dir = temp_dir("tiled");
      std::vector<std::string> o = {"model.family=" + family, "model.attention=" + variant,
                                    "model.positions=rope", "train.log_every=1"};
      if (variant != "original") o.insert(o.end(), {"model.bp_steps=2", "model.learnable_lambda=true"});
      TrainOptions t;
      t.quiet = true;
      const TrainSummary a = train(tiny(dir + "/m", o), t);
      o.push_back("model.tiled=true");
      const TrainSummary b = train(tiny(dir + "/t", o), t);
      REQUIRE(a.losses.size() == b.losses.size());
      for (size_t s = 0; s < a.losses.size(); ++s) CHECK(b.losses[s] == Approx(a.losses[s]).epsilon(1e-5));
      CHECK(read_file(dir + "/m/metrics.jsonl").find("entropy_first_layer") != std::string::npos);
      CHECK(read_file(dir + "/t/metrics.jsonl").find("entropy_first_layer") == std::string::npos);
      // The tiled run's checkpoint-3 resumes with the materialized kernels and ends where it did.
      TrainOptions r = t;
      r.resume_dir = dir + "/t/checkpoint-3";
      o.pop_back();
      const TrainSummary c = train(tiny(dir + "/t", o), r);
      CHECK(c.losses.back() == Approx(b.losses.back()).epsilon(1e-5));
      fs::remove_all(dir);
    }
}
