// The run config: every shipped file loads, overrides of each type, the error messages (unknown
// key, wrong type, bad value, syntax error), presets and explicit keys, and the to_toml round trip.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "model/bert.h"
#include "support.h"
#include "train/config.h"

using namespace saobp;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = SAOBP_SOURCE_DIR;
std::string shipped(const std::string& name) { return (kRoot / "configs" / name).string(); }

// Writes `text` to a fresh file in the temp directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("saobp_test_config_{}", ::getpid());
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("every shipped config loads", "[config]") {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kRoot / "configs")) {
    if (e.path().extension() != ".toml") continue;
    INFO(e.path().string());
    RunConfig c;
    REQUIRE_NOTHROW(c = load_config(e.path().string(), {}));
    CHECK(c.train.run_dir == "runs/" + e.path().stem().string());
    if (c.model.family == "bert") CHECK_NOTHROW(encoder_config(c));
    CHECK_NOTHROW(lr_at(schedule_of(c), c.train.max_steps / 2));
    ++n;
  }
  CHECK(n >= 7);
}

TEST_CASE("shipped configs carry the paper's values", "[config]") {
  struct Row {
    const char* size;
    int64_t steps;
    double lr;
    int64_t warmup;
    double lambda;
    int64_t layers, hidden, heads;
  };
  for (const Row& r :
       {Row{"mini", 60000, 5e-5, 3000, 0.2, 4, 256, 4}, Row{"small", 150000, 3e-4, 7500, 0.08, 4, 512, 8},
        Row{"medium", 245000, 3e-4, 12000, 0.05, 8, 512, 8}}) {
    for (const char* fam : {"bert", "gpt2"}) {
      INFO(fam << "-" << r.size);
      const RunConfig c = load_config(shipped(fmt::format("{}-{}.toml", fam, r.size)));
      CHECK(c.model.family == fam);
      CHECK(c.train.max_steps == r.steps);
      CHECK(c.train.lr == r.lr);
      CHECK(c.train.warmup_steps == r.warmup);
      CHECK(c.train.min_lr == 0.0);
      CHECK(c.train.seed == 42);
      CHECK(c.train.seq_len == 128);
      CHECK(c.train.batch_size == 32);
      CHECK(c.model.attention.lambda == r.lambda);
      CHECK(c.model.attention.variant == AttnVariant::bp_high);
      CHECK(c.model.layers == r.layers);
      CHECK(c.model.hidden == r.hidden);
      CHECK(c.model.heads == r.heads);
      CHECK(c.model.intermediate == 4 * r.hidden);
      CHECK(c.data.kind == "text");
    }
  }
  const RunConfig q = load_config(shipped("quickstart.toml"));
  CHECK(q.model.layers == 2);
  CHECK(q.data.kind == "fortune");
  CHECK(q.data.path == "/usr/share/games/fortunes");
  CHECK(q.data.vocab_size == q.model.vocab_size);
  const EncoderConfig e = encoder_config(q);
  CHECK(e.vocab == q.model.vocab_size);
  CHECK(e.attention.variant == AttnVariant::bp_high);
}

TEST_CASE("overrides of each type", "[config]") {
  const RunConfig c =
      load_config(shipped("bert-mini.toml"),
                  {"train.lr=3e-4", "model.attention=bp_low", "model.layer_lambdas=[0.1,0.2,0.3,0.4]",
                   "train.max_steps=100", "train.warmup_steps = 10", "model.learnable_lambda=true",
                   "model.dropout=0", "data.path=corpus/wiki.txt", "model.family=\"bert\"",
                   "train.device=cuda:0", "data.task=1234", "train.lr=1e-3"});
  CHECK(c.train.lr == 1e-3);  // the last override of a key wins
  CHECK(c.model.attention.variant == AttnVariant::bp_low);
  CHECK(c.model.attention.layer_lambdas == std::vector<double>{0.1, 0.2, 0.3, 0.4});
  CHECK(c.train.max_steps == 100);
  CHECK(c.train.warmup_steps == 10);
  CHECK(c.model.attention.learnable_lambda);
  CHECK(c.model.dropout == 0.0);  // an integer is accepted for a float key
  CHECK(c.data.path == "corpus/wiki.txt");
  CHECK(c.train.device == "cuda:0");
  CHECK(c.data.task == "1234");  // a string key keeps the raw text of a non-string value
  CHECK(encoder_config(c).attention.layer_lambdas.size() == 4);
  // Overrides alone, no file.
  const RunConfig d = load_config("", {"model.preset=small"});
  CHECK(d.model.hidden == 512);
  CHECK(d.train.run_dir == "runs/default");
}

TEST_CASE("presets fill sizes and λ, explicit keys override", "[config]") {
  const RunConfig mini = load_config("", {});
  CHECK(mini.model.hidden == 256);
  CHECK(mini.model.attention.lambda == 0.2);
  CHECK(mini.model.vocab_size == 30522);
  CHECK(mini.data.vocab_size == 30522);  // 0 resolves to model.vocab_size
  const RunConfig med = load_config("", {"model.preset=medium"});
  CHECK(med.model.layers == 8);
  CHECK(med.model.hidden == 512);
  CHECK(med.model.heads == 8);
  CHECK(med.model.attention.lambda == 0.05);
  const RunConfig over = load_config("", {"model.preset=medium", "model.layers=6", "model.lambda=0.1"});
  CHECK(over.model.layers == 6);
  CHECK(over.model.hidden == 512);
  CHECK(over.model.attention.lambda == 0.1);
  // The preset applies whatever the order of the keys in the file.
  const RunConfig f =
      load_config(write_temp("order.toml",
                             "[model]\nfamily = \"bert\"\nhidden = 128\nheads = 2\npreset = \"small\"\n"
                             "[data]\nkind = \"synthetic\"\n"));
  CHECK(f.model.hidden == 128);
  CHECK(f.model.heads == 2);
  CHECK(f.model.intermediate == 2048);
  const RunConfig g = load_config("", {"model.family=gpt2", "model.preset=small"});
  CHECK(g.model.vocab_size == 50257);
  CHECK(g.model.max_positions == 1024);
  CHECK(g.model.hidden == 512);
  CHECK_ERROR(encoder_config(g), Contains("model.family"));
}

TEST_CASE("config errors name the key and where it came from", "[config]") {
  // Unknown key in a file: file:line, the key, and the allowed keys of its section.
  const std::string typo = write_temp("typo.toml", "[model]\nhidden = 64\nhiden = 64\n");
  CHECK_ERROR(load_config(typo), Contains("typo.toml:3:") && Contains("model.hiden") &&
                                     Contains("allowed in [model]") && Contains("intermediate"));
  CHECK_ERROR(load_config(write_temp("sec.toml", "[optim]\nlr = 1\n")),
              Contains("sec.toml:1:") && Contains("[optim]") && Contains("model, train, data"));
  CHECK_ERROR(load_config("", {"train.lrr=1"}),
              Contains("train.lrr") && Contains("allowed in [train]") && Contains("warmup_steps"));
  CHECK_ERROR(load_config("", {"optim.lr=1"}), Contains("optim"));
  CHECK_ERROR(load_config("", {"train.lr"}), Contains("section.key=value"));
  CHECK_ERROR(load_config("", {"lr=1"}), Contains("section.key=value"));
  // The leaking ablation: a decoder's BP setting only.
  CHECK_ERROR(load_config("", {"model.family=bert", "model.attention=bp_high", "model.leaky_bp=true"}),
              Contains("model.leaky_bp") && Contains("decoder"));
  CHECK_ERROR(load_config("", {"model.family=gpt2", "model.attention=original", "model.leaky_bp=true"}),
              Contains("model.leaky_bp"));
  CHECK(load_config("", {"model.family=gpt2", "model.attention=bp_high", "model.leaky_bp=true"})
            .model.attention.leaky_bp);
  // Wrong types: key, expected type, what was found.
  CHECK_ERROR(load_config(write_temp("type.toml", "[train]\nlr = 1e-3\nmax_steps = \"many\"\n")),
              Contains("type.toml:3:") && Contains("train.max_steps") && Contains("expected an integer") &&
                  Contains("a string \"many\""));
  CHECK_ERROR(load_config("", {"train.max_steps=1.5"}), Contains("train.max_steps") &&
                                                            Contains("an integer") &&
                                                            Contains("a float 1.5") && Contains("override"));
  CHECK_ERROR(load_config("", {"train.lr=fast"}),
              Contains("train.lr") && Contains("a number") && Contains("\"fast\""));
  CHECK_ERROR(load_config("", {"model.learnable_lambda=1"}),
              Contains("model.learnable_lambda") && Contains("boolean"));
  CHECK_ERROR(load_config("", {"model.layer_lambdas=[0.1,\"x\",0.3,0.4]"}),
              Contains("model.layer_lambdas") && Contains("element 1"));
  CHECK_ERROR(load_config(write_temp("tbl.toml", "model = 3\n")), Contains("[model]") && Contains("table"));
  // Bad values.
  CHECK_ERROR(load_config("", {"model.attention=bp_mid"}), Contains("model.attention") &&
                                                               Contains("bp_mid") && Contains("bp_high") &&
                                                               Contains("bp_elemmul"));
  CHECK_ERROR(load_config("", {"model.heads=3"}), Contains("model.heads") && Contains("model.hidden"));
  CHECK_ERROR(load_config("", {"model.lambda=-0.1"}), Contains("model.lambda"));
  CHECK_ERROR(load_config("", {"model.dropout=1.0"}), Contains("model.dropout"));
  CHECK_ERROR(load_config("", {"model.layer_lambdas=[0.1,0.2]"}),
              Contains("model.layer_lambdas") && Contains("4"));
  CHECK_ERROR(load_config("", {"model.family=t5"}), Contains("model.family") && Contains("bert, gpt2"));
  CHECK_ERROR(load_config("", {"model.preset=large"}), Contains("model.preset") && Contains("custom"));
  CHECK_ERROR(load_config("", {"model.positions=alibi"}), Contains("model.positions"));
  CHECK_ERROR(load_config("", {"train.max_steps=100", "train.warmup_steps=100"}),
              Contains("train.max_steps") && Contains("override 'train.max_steps=100'"));
  CHECK_ERROR(load_config("", {"train.warmup_steps=-1"}), Contains("train.warmup_steps"));
  CHECK_ERROR(load_config("", {"train.device=tpu"}), Contains("train.device"));
  CHECK_ERROR(load_config("", {"train.seq_len=1000"}),
              Contains("train.seq_len") && Contains("max_positions"));
  CHECK_ERROR(load_config("", {"train.seed=-1"}), Contains("train.seed"));
  CHECK_ERROR(load_config("", {"data.kind=csv"}), Contains("data.kind") && Contains("jsonl"));
  CHECK_ERROR(load_config("", {"data.kind=task"}), Contains("data.task"));
  CHECK_ERROR(load_config("", {"data.mlm_probability=0"}), Contains("data.mlm_probability"));
  CHECK_ERROR(load_config(write_temp("val.toml", "[train]\n\nbatch_size = 0\n")),
              Contains("val.toml:3:") && Contains("train.batch_size"));
  // Syntax errors: file, line and column.
  CHECK_ERROR(load_config(write_temp("syntax.toml", "[model]\nhidden = 64\nheads = = 2\n")),
              Contains("syntax.toml:3:") && Contains("syntax error"));
  CHECK_ERROR(load_config(write_temp("dup.toml", "[train]\nlr = 1e-3\nlr = 2e-3\n")),
              Contains("dup.toml:3:"));
  CHECK_ERROR(load_config((kRoot / "configs" / "no-such.toml").string()), Contains("no-such.toml"));
}

TEST_CASE("config sizes are bounded: overflow, memory estimate, threads", "[config]") {
  // Products of sizes that overflow 64 bits are refused at the key, not wrapped.
  CHECK_ERROR(load_config("", {"train.batch_size=4611686018427387904"}),
              Contains("override 'train.batch_size=4611686018427387904'") && Contains("train.batch_size") &&
                  Contains("overflow 64 bits"));
  CHECK_ERROR(load_config("", {"model.max_positions=9000000000000000000"}),
              Contains("model.max_positions") && Contains("parameter count overflows"));
  // Sizes that fit in 64 bits but not in this machine: the key and the estimate in GiB.
  CHECK_ERROR(load_config("", {"model.layers=1000000000"}), Contains("model.layers: this run needs about") &&
                                                                Contains("GiB") &&
                                                                Contains("layers=1000000000"));
  CHECK_ERROR(load_config("", {"train.batch_size=1000000000"}),
              Contains("train.batch_size: this run needs about") && Contains("activations"));
  CHECK_ERROR(load_config("", {"model.positions=rope", "train.seq_len=1000000000"}),
              Contains("train.seq_len: "));
  CHECK_ERROR(load_config(write_temp("layers.toml", "[model]\npreset = \"custom\"\nlayers = 1000000000\n")),
              Contains("layers.toml:3:") && Contains("model.layers"));
  // A run refused for its attention maps hears of model.tiled, with that run's estimate, when
  // that estimate fits this machine (a T of 65536: 550 GiB of maps materialized).
  const std::vector<std::string> long_run = {"model.vocab_size=1000", "train.seq_len=65536",
                                             "model.max_positions=65536", "train.batch_size=1"};
  RunConfig tiled = load_config(shipped("gpt2-mini.toml"), long_run, FitCheck::no);
  tiled.model.attention.tiled = true;
  const RunMemory tm = run_memory_estimate(tiled);
  const bool tiled_fits = tm.param_bytes + tm.activation_bytes <= physical_memory_bytes();
  INFO("tiled estimate " << (tm.param_bytes + tm.activation_bytes) / double(1 << 30) << " GiB");
  if (tiled_fits)
    CHECK_ERROR(load_config(shipped("gpt2-mini.toml"), long_run),
                Contains("this run needs about") && Contains("with model.tiled=true") && Contains("GiB"));
  else
    CHECK_ERROR(load_config(shipped("gpt2-mini.toml"), long_run),
                Contains("this run needs about") && !Contains("model.tiled"));
  std::vector<std::string> elemmul = long_run;  // no tiled form: no hint
  elemmul.push_back("model.attention=bp_elemmul");
  CHECK_ERROR(load_config(shipped("gpt2-mini.toml"), elemmul),
              Contains("this run needs about") && !Contains("model.tiled"));
  // The estimate bounds the real parameter count (16 bytes each: value, gradient, two moments).
  const RunConfig mini = load_config(shipped("bert-mini.toml"));
  BertForMaskedLM probe(encoder_config(mini), 1);
  int64_t params = 0;
  for (const Var& p : probe.params().all()) params += p.numel();
  const RunMemory mem = run_memory_estimate(mini);
  CHECK(mem.param_bytes >= 16 * params);
  CHECK(mem.param_bytes <= 20 * params);
  CHECK(mem.activation_bytes > 4 * mini.train.batch_size * mini.train.seq_len * mini.model.vocab_size);
  CHECK(physical_memory_bytes() > 0);
  // Thread count: libgomp fails on absurd counts.
  CHECK_ERROR(load_config("", {"train.threads=100000"}), Contains("train.threads: must be in [0, 1024]"));
  CHECK_NOTHROW(load_config("", {"train.threads=1024"}));
}

TEST_CASE("config nonsense is an error, not a silent default", "[config]") {
  // An empty config file names no model and no data.
  CHECK_ERROR(load_config(write_temp("empty.toml", "")),
              Contains("empty.toml: model.family is not set") && Contains("data.kind"));
  CHECK_ERROR(load_config(write_temp("nodata.toml", "[model]\nfamily = \"gpt2\"\n")),
              Contains("nodata.toml: data.kind is not set"));
  CHECK_NOTHROW(
      load_config(write_temp("min.toml", "[model]\nfamily = \"bert\"\n[data]\nkind = \"synthetic\"\n")));
  CHECK_NOTHROW(load_config(write_temp("empty2.toml", ""), {"model.family=bert", "data.kind=synthetic"}));
  // An evaluation over no batches reported loss 0 and perplexity 0.
  CHECK_ERROR(load_config("", {"train.eval_batches=0"}), Contains("train.eval_batches: must be >= 1, got 0"));
  // An override is one line: a second key after a line break was read too.
  CHECK_ERROR(load_config("", {"train.lr=1e-3\nmodel.layers=2"}), Contains("line break"));
  CHECK_ERROR(load_config("", {"train.run_dir=a\rb"}), Contains("control character"));
  // Digits too large for an integer are not "a string".
  CHECK_ERROR(load_config("", {"model.layers=99999999999999999999"}),
              Contains("model.layers: 99999999999999999999 is out of range for an integer"));
  CHECK_ERROR(load_config("", {"train.seed=-99999999999999999999"}), Contains("out of range for an integer"));
  // A config that is not a regular file is named as what it is, and never read (no hang).
  const std::string fifo = write_temp("fifo-dir-marker", "") + ".fifo.toml";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_ERROR(load_config(fifo), Contains("fifo.toml: not a regular file (a FIFO)"));
  CHECK_ERROR(load_config("/dev/zero"), Contains("/dev/zero: not a regular file (a character device)"));
  fs::remove(fifo);
}

TEST_CASE("to_toml round trips to an equal config and hash", "[config]") {
  for (const char* name : {"bert-mini.toml", "gpt2-medium.toml", "quickstart.toml"}) {
    INFO(name);
    const RunConfig a =
        load_config(shipped(name), {"model.layers=4", "model.layer_lambdas=[0.1, 0.25, 1e-3, 3]",
                                    "train.min_lr=1e-7", "data.path=a \"quoted\" path\\with\\backslashes"});
    const std::string text = to_toml(a);
    for (const char* key : {"family", "rope_base", "layer_lambdas", "threads", "valid_fraction", "run_dir"})
      CHECK_THAT(text, Contains(std::string("\n") + key + " = "));
    const RunConfig b = load_config(write_temp(std::string("rt-") + name, text));
    CHECK(a == b);
    CHECK(to_toml(b) == text);
    CHECK(config_hash(a) == config_hash(b));
  }
  const RunConfig base = load_config(shipped("bert-mini.toml"));
  const uint64_t h = config_hash(base);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"))) == h);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.lr=5.0000001e-5"})) != h);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"model.attention=original"})) != h);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.seed=43"})) != h);
  // The device is no part of it either: a run moves between the CPU and a GPU on resume.
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.device=cuda:1"})) == h);
  RunConfig c = base;
  c.data.text_field = "body";
  CHECK(config_hash(c) != h);
  CHECK_NOTHROW(validate_config(c));
  // How a step's batch is split over ranks and summed is no part of a run's identity
  // (docs/distributed.md): --resume onto another rank count changes grad_accum.
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.grad_accum=4"})) == h);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.reduce=fast"})) == h);
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.bucket_mb=0.5"})) == h);
  CHECK_THAT(to_toml(base), Contains("\nreduce = \"ordered\"\n"));
  // Nor is the memory a run may use.
  CHECK(config_hash(load_config(shipped("bert-mini.toml"), {"train.memory_limit_gib=12"})) == h);
}

// The estimate against the peaks of live tensors measured on an NVIDIA H200 (f32; docs/performance.md,
// "Training on a GPU" and "The tiled SAOBP kernels on the GPU"): above each, and within 3.5x (the
// encoders' 3 V per token counts logits at every position, where the MLM head runs on 15% of them).
// train.threads = 1 keeps the CPU's scratch term below the GPU's, whatever this machine's cores.
TEST_CASE("the memory estimate bounds the peaks measured on a GPU", "[config]") {
  struct Peak {
    const char* config;
    int64_t T, B;
    const char* attention;
    bool tiled;
    double gib;
  };
  const Peak peaks[] = {
      {"gpt2-mini", 16384, 1, "bp_high", false, 53.78},   {"gpt2-mini", 16384, 1, "bp_high", true, 8.05},
      {"gpt2-mini", 2048, 1, "bp_high", false, 1.80},     {"gpt2-mini", 2048, 1, "bp_high", true, 1.30},
      {"bert-mini", 128, 32, "original", false, 0.75},    {"bert-mini", 128, 32, "bp_high", false, 0.78},
      {"bert-mini", 512, 32, "original", false, 2.91},    {"bert-mini", 512, 32, "bp_high", false, 3.66},
      {"bert-medium", 128, 32, "original", false, 2.39},  {"bert-medium", 128, 32, "bp_high", false, 2.54},
      {"bert-medium", 512, 32, "original", false, 9.81},  {"bert-medium", 512, 32, "bp_high", false, 12.31},
      {"gpt2-mini", 128, 32, "original", false, 2.20},    {"gpt2-mini", 128, 32, "bp_high", false, 2.23},
      {"gpt2-mini", 512, 32, "original", false, 8.49},    {"gpt2-mini", 512, 32, "bp_high", false, 8.99},
      {"gpt2-medium", 128, 32, "original", false, 3.93},  {"gpt2-medium", 128, 32, "bp_high", false, 4.06},
      {"gpt2-medium", 512, 32, "original", false, 15.13}, {"gpt2-medium", 512, 32, "bp_high", false, 17.13}};
  for (const Peak& p : peaks) {
    const RunConfig c =
        load_config(shipped(std::string(p.config) + ".toml"),
                    {fmt::format("train.seq_len={}", p.T),
                     fmt::format("model.max_positions={}", std::max<int64_t>(p.T, 512)),
                     fmt::format("train.batch_size={}", p.B), fmt::format("model.attention={}", p.attention),
                     fmt::format("model.tiled={}", p.tiled), "train.threads=1"},
                    FitCheck::no);
    const RunMemory r = run_memory_estimate(c);
    const double gib = static_cast<double>(r.param_bytes + r.activation_bytes) / (1024.0 * 1024.0 * 1024.0);
    INFO(p.config << " T " << p.T << " B " << p.B << " " << p.attention << (p.tiled ? " tiled" : "")
                  << ": estimate " << gib << " GiB, measured " << p.gib);
    CHECK(gib >= p.gib);
    CHECK(gib <= 3.5 * p.gib);
  }
}

TEST_CASE("train.memory_limit_gib bounds the memory estimate, and hears of model.tiled", "[config]") {
  CHECK_ERROR(load_config("", {"train.memory_limit_gib=-1"}),
              Contains("train.memory_limit_gib: must be a number of GiB in [0, 1073741824]"));
  CHECK_ERROR(load_config("", {"train.memory_limit_gib=1e30"}), Contains("train.memory_limit_gib"));
  CHECK_NOTHROW(load_config("", {"train.memory_limit_gib=1073741824"}));
  CHECK_ERROR(load_config("", {"train.memory_limit_gib=nan"}), Contains("train.memory_limit_gib"));
  // GPT2-Mini, bp_high, T = 4096, batch 1: the maps materialized need more than the tiled kernels;
  // a limit between the two estimates refuses the first, naming the limit and the tiled estimate,
  // and takes the second, on the CPU as on a GPU.
  const std::vector<std::string> run = {"model.attention=bp_high", "train.seq_len=4096",
                                        "model.max_positions=4096", "train.batch_size=1"};
  RunConfig c = load_config(shipped("gpt2-mini.toml"), run, FitCheck::no);
  const RunMemory full = run_memory_estimate(c);
  c.model.attention.tiled = true;
  const RunMemory tiled = run_memory_estimate(c);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double need_full = static_cast<double>(full.param_bytes + full.activation_bytes) / gib,
               need_tiled = static_cast<double>(tiled.param_bytes + tiled.activation_bytes) / gib;
  INFO("materialized " << need_full << " GiB, tiled " << need_tiled << " GiB");
  REQUIRE(need_tiled < 0.8 * need_full);
  REQUIRE(need_full < static_cast<double>(physical_memory_bytes()) / gib);  // this machine alone takes it
  std::vector<std::string> limited = run;
  limited.push_back(fmt::format("train.memory_limit_gib={}", (need_full + need_tiled) / 2));
  CHECK_ERROR(load_config(shipped("gpt2-mini.toml"), limited),
              Contains("this run needs about") && Contains("more than train.memory_limit_gib's") &&
                  Contains("with model.tiled=true") && Contains("GiB"));
  limited.push_back("model.tiled=true");
  CHECK_NOTHROW(load_config(shipped("gpt2-mini.toml"), limited));
  std::vector<std::string> roomy = run;
  roomy.push_back(fmt::format("train.memory_limit_gib={}", need_full * 1.01));
  CHECK_NOTHROW(load_config(shipped("gpt2-mini.toml"), roomy));
}

TEST_CASE("train.precision is f32 or bf16, and bf16 runs on a GPU only", "[config]") {
  const RunConfig base = load_config(shipped("bert-mini.toml"));
  CHECK(base.train.precision == "f32");
  CHECK(encoder_config(base).gemm_inputs == GemmInputs::f32);
  // Accepted with a GPU device (whether this machine has one is run_device's business).
  const RunConfig gpu = load_config(shipped("bert-mini.toml"), {"train.device=cuda", "train.precision=bf16"});
  CHECK(gpu.train.precision == "bf16");
  CHECK(encoder_config(gpu).gemm_inputs == GemmInputs::bf16);
  CHECK(
      decoder_config(load_config(shipped("gpt2-mini.toml"), {"train.device=cuda:0", "train.precision=bf16"}))
          .gemm_inputs == GemmInputs::bf16);
  // Refused on the CPU, naming the key and the way out; unknown values are refused too.
  CHECK_ERROR(load_config(shipped("bert-mini.toml"), {"train.precision=bf16"}),
              Contains("train.precision") && Contains("\"cpu\"") && Contains("train.precision = \"f32\""));
  CHECK_ERROR(load_config(write_temp("prec.toml", "[train]\nprecision = \"bf16\"\n")),
              Contains("prec.toml:2:") && Contains("train.precision"));
  for (const char* bad : {"train.precision=fp16", "train.precision=BF16", "train.precision=f64"})
    CHECK_ERROR(load_config(shipped("bert-mini.toml"), {"train.device=cuda", bad}),
                Contains("train.precision") && Contains("allowed: f32, bf16"));
  // No part of a run's identity: a bf16 run saved on a GPU resumes in f32 on the CPU.
  CHECK(config_hash(gpu) == config_hash(base));
  CHECK_THAT(to_toml(gpu), Contains("\nprecision = \"bf16\"\n"));
  CHECK(load_config(write_temp("prec-rt.toml", to_toml(gpu))) == gpu);
}

TEST_CASE("train.reduce is ordered or fast", "[config]") {
  CHECK(load_config(shipped("bert-mini.toml")).train.reduce == "ordered");
  CHECK(load_config(shipped("bert-mini.toml"), {"train.reduce=fast"}).train.reduce == "fast");
  CHECK_THROWS_WITH(load_config(shipped("bert-mini.toml"), {"train.reduce=ring"}), Contains("train.reduce"));
  CHECK(load_config(shipped("bert-mini.toml")).train.bucket_mb == 4.0);
  CHECK(load_config(shipped("bert-mini.toml"), {"train.bucket_mb=0.25"}).train.bucket_mb == 0.25);
  for (const char* bad : {"train.bucket_mb=0", "train.bucket_mb=-1", "train.bucket_mb=5000"})
    CHECK_THROWS_WITH(load_config(shipped("bert-mini.toml"), {bad}), Contains("train.bucket_mb"));
}
