// The long-range tasks: generators against the brute-force solver, determinism, splits,
// padding, the classification task's wiring, a short run that learns copy_first, and a RoPE
// checkpoint read past its max_positions.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "core/fs.h"
#include "data/tasks.h"
#include "support.h"
#include "train/analysis.h"
#include "train/generate.h"
#include "train/task.h"
#include "train/trainer.h"

using namespace saobp;
namespace fs = std::filesystem;
namespace tk = saobp::tasks;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("saobp-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

RunConfig tiny_task(const std::string& task, const std::string& run_dir,
                    std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"data.kind=task",          "data.task=" + task,
                                "model.preset=custom",     "model.vocab_size=33",
                                "model.hidden=32",         "model.layers=2",
                                "model.heads=2",           "model.intermediate=64",
                                "model.max_positions=32",  "model.dropout=0.0",
                                "train.seq_len=16",        "train.batch_size=16",
                                "train.max_steps=4",       "train.warmup_steps=2",
                                "train.lr=3e-3",           "train.eval_every=0",
                                "train.log_every=0",       "train.save_every=0",
                                "train.eval_batches=4",    "data.eval_lengths=[8, 16, 32, 64]",
                                "train.run_dir=" + run_dir};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

}  // namespace

TEST_CASE("tasks: every generator agrees with the brute-force solver", "[tasks]") {
  for (const std::string& name : tk::task_names()) {
    const tk::TaskSpec t = tk::task_spec(name);
    std::set<int32_t> labels;
    for (int64_t L : {t.min_length, t.min_length + 1, t.min_length + 2, int64_t{16}, int64_t{17}, int64_t{31},
                      int64_t{64}, int64_t{100}, int64_t{512}, tk::kMaxLength}) {
      for (uint64_t i = 0; i < 40; ++i) {
        for (tk::Split split : {tk::Split::train, tk::Split::test}) {
          const tk::Example e = tk::generate(t, 7, split, L, i);
          INFO(name << " L=" << L << " i=" << i << ": " << tk::render(e.tokens));
          REQUIRE(static_cast<int64_t>(e.tokens.size()) == L);
          REQUIRE(e.tokens[0] == tk::kCls);
          for (int32_t tok : e.tokens) REQUIRE((tok > tk::kPad && tok < tk::kVocabSize));
          REQUIRE(e.label >= 0);
          REQUIRE(e.label < t.num_classes);
          REQUIRE(tk::solve(t, e.tokens) == e.label);
          labels.insert(e.label);
        }
      }
    }
    INFO(name);
    CHECK(labels.size() > 3);  // never a constant answer
  }
}

TEST_CASE("tasks: the formats, one example each", "[tasks]") {
  auto show = [](const std::string& name, int64_t L, uint64_t i = 0) {
    return tk::render(tk::generate(tk::task_spec(name), 1, tk::Split::train, L, i).tokens);
  };
  const tk::Example c = tk::generate(tk::task_spec("copy_first"), 1, tk::Split::train, 6, 0);
  const std::string d = std::to_string(c.label);
  CHECK(show("copy_first", 6) == "[CLS] " + d + " 1 1 1 1");
  CHECK(show("copy_last", 6) == "[CLS] 1 1 1 1 " + d);
  CHECK(show("copy_first_blocks", 19) == "[CLS] " + d + " 1 1 1 1 1 1 1 " + d + " 1 1 1 1 1 1 1 " + d + " 1");
  const std::string d11 =
      std::to_string(tk::generate(tk::task_spec("copy_last_blocks"), 1, tk::Split::train, 11, 0).label);
  CHECK(show("copy_last_blocks", 11) == "[CLS] 1 " + d11 + " 1 1 1 1 1 1 1 " + d11);
  CHECK(show("count_sum", 8) == "[CLS] 1 + 1 + 1 + 1");
  CHECK(show("count_sum", 9) == "[CLS] 1 + 1 + 1 + 1 =");
  CHECK(show("count_sum_sep", 15) == "[CLS] 1 + 1 + 1 + 1 + 1 | 1 + 1 =");
  CHECK(show("count_ones", 5) == "[CLS] 1 1 1 1");
  CHECK(show("count_ones_sep", 14) == "[CLS] 1 1 1 1 1 | 1 1 1 1 1 | 1");
  CHECK(tk::solve(tk::task_spec("count_ones_sep"),
                  tk::generate(tk::task_spec("count_ones_sep"), 1, tk::Split::train, 14, 0).tokens) == 11);
  const std::string r = show("count_random_sep", 13);
  CHECK(r.substr(0, 6) == "[CLS] ");
  CHECK(r[16] == '|');  // after the fifth bit
  const std::string w = show("count_word", 10);
  CHECK(w.substr(w.size() - 3, 2) == "? ");
  const std::string p = show("chase2", 14);  // 3 pairs, 2 filler separators, the query
  CHECK(p.substr(0, 6) == "[CLS] ");
  CHECK(p.substr(p.size() - 7, 5) == "| | ?");
  CHECK(p[8] == '>');
}

TEST_CASE("tasks: examples are pure functions of seed, split, length and index", "[tasks]") {
  for (const std::string& name : tk::task_names()) {
    INFO(name);
    const tk::TaskSpec t = tk::task_spec(name);
    for (uint64_t i = 0; i < 5; ++i) {
      const tk::Example a = tk::generate(t, 3, tk::Split::test, 48, i),
                        b = tk::generate(t, 3, tk::Split::test, 48, i);
      CHECK(a.tokens == b.tokens);
      CHECK(a.label == b.label);
    }
    // Training lengths are uniform in [min_length, seq_len] and deterministic.
    std::set<int64_t> lens;
    for (uint64_t i = 0; i < 400; ++i) {
      const int64_t L = tk::train_length(t, 3, i, 40);
      CHECK(L == tk::train_length(t, 3, i, 40));
      CHECK(L >= t.min_length);
      CHECK(L <= 40);
      lens.insert(L);
    }
    CHECK(static_cast<int64_t>(lens.size()) == 40 - t.min_length + 1);
  }
}

TEST_CASE("tasks: train and test splits and seeds draw different examples", "[tasks]") {
  // The random tasks (count_ones and count_sum have one sequence per length by definition).
  for (const char* name : {"copy_first", "count_random", "count_word_sep", "chase2", "chase3"}) {
    INFO(name);
    const tk::TaskSpec t = tk::task_spec(name);
    int same_split = 0, same_seed = 0;
    for (uint64_t i = 0; i < 50; ++i) {
      const tk::Example a = tk::generate(t, 3, tk::Split::train, 64, i);
      same_split += a.tokens == tk::generate(t, 3, tk::Split::test, 64, i).tokens;
      same_seed += a.tokens == tk::generate(t, 4, tk::Split::train, 64, i).tokens;
    }
    // copy_first has only 8 sequences per length: about 50/8 coincide by chance.
    const int limit = std::string(name) == "copy_first" ? 15 : 0;
    CHECK(same_split <= limit);
    CHECK(same_seed <= limit);
  }
  // count_random: P('1') = 0.7.
  const tk::TaskSpec t = tk::task_spec("count_random");
  double ones = 0;
  for (uint64_t i = 0; i < 200; ++i) ones += tk::generate(t, 5, tk::Split::train, 101, i).label;
  CHECK(ones / (200 * 100) == Approx(0.7).margin(0.02));
}

TEST_CASE("tasks: bad names and lengths are refused, bad sequences named", "[tasks]") {
  CHECK_ERROR(tk::task_spec("copy_middle"), Catch::Contains("copy_middle") && Catch::Contains("chase3"));
  CHECK_ERROR(tk::generate(tk::task_spec("chase3"), 1, tk::Split::train, 11, 0),
              Catch::Contains("[12, 1024]"));
  CHECK_ERROR(tk::generate(tk::task_spec("count_ones"), 1, tk::Split::train, 1025, 0),
              Catch::Contains("1025"));
  const tk::TaskSpec chase = tk::task_spec("chase2");
  std::vector<int32_t> s = tk::generate(chase, 1, tk::Split::train, 30, 0).tokens;
  s[2] = tk::kPlus;  // a broken key>value pair
  CHECK_ERROR(tk::solve(chase, s), Catch::Contains("chase2"));
  CHECK_ERROR(tk::solve(tk::task_spec("copy_first"), {tk::kCls, tk::kDigit + 3, tk::kDigit + 2}),
              Catch::Contains("unexpected token"));
}

TEST_CASE("tasks: a batch pads to its longest with PAD and a key mask", "[tasks]") {
  const tk::TaskSpec t = tk::task_spec("count_word_sep");
  const std::vector<int64_t> lengths = {5, 12, 9};
  const tk::Batch b = tk::make_batch(t, 11, tk::Split::train, lengths, 30);
  REQUIRE(b.ids.shape() == Shape{3, 12});
  REQUIRE(b.key_mask.shape() == Shape{3, 12});
  CHECK(b.key_mask.dtype() == DType::u8);
  const std::vector<int32_t> ids = b.ids.to_vector<int32_t>();
  const std::vector<uint8_t> mask = b.key_mask.to_vector<uint8_t>();
  for (size_t i = 0; i < 3; ++i) {
    const tk::Example e = tk::generate(t, 11, tk::Split::train, lengths[i], 30 + i);
    CHECK(b.labels[i] == e.label);
    for (size_t j = 0; j < 12; ++j) {
      const bool real = static_cast<int64_t>(j) < lengths[i];
      CHECK(mask[i * 12 + j] == (real ? 1 : 0));
      CHECK(ids[i * 12 + j] == (real ? e.tokens[j] : tk::kPad));
    }
  }
}

TEST_CASE("tasks: the classification task has the HF head and config of each family", "[tasks]") {
  const std::string dir = temp_dir("cls-heads");
  {
    const std::unique_ptr<Task> task = make_task(tiny_task("count_word_sep", dir));
    std::set<std::string> names;
    for (const Var& p : task->params().all()) names.insert(p.name());
    CHECK(names.count("bert.pooler.dense.weight") == 1);
    CHECK(names.count("classifier.bias") == 1);
    CHECK(task->params().get("classifier.weight").shape() == Shape{tk::kMaxLength, 32});
    for (const std::string& n : names) CHECK(n.rfind("cls.", 0) == std::string::npos);  // no MLM head
    const nlohmann::json c = task->hf_config();
    CHECK(c["architectures"][0] == "BertForSequenceClassification");
    CHECK(c["id2label"].size() == static_cast<size_t>(tk::kMaxLength));
    CHECK(c["label2id"]["17"] == 17);
    // Every parameter gets a gradient.
    task->train_loss(0, 0, nullptr, nullptr).backward();
    for (const Var& p : task->params().all()) {
      INFO(p.name());
      CHECK(p.grad().defined());
    }
  }
  {
    const std::unique_ptr<Task> task = make_task(tiny_task("chase2", dir, {"model.family=gpt2"}));
    CHECK(task->params().get("score.weight").shape() == Shape{16, 32});
    const nlohmann::json c = task->hf_config();
    CHECK(c["architectures"][0] == "GPT2ForSequenceClassification");
    CHECK(c["id2label"]["1"] == "b");
    CHECK(c["pad_token_id"] == tk::kPad);
    std::vector<AttentionMaps> maps;
    Tensor mask;
    const Var loss = task->train_loss(3, 0, &maps, &mask);
    CHECK(std::isfinite(loss.data().item()));
    CHECK(maps.size() == 2);
    CHECK(mask.size(1) <= 16);
  }
  CHECK_ERROR(make_task(tiny_task("copy_first", dir, {"model.vocab_size=20"})),
              Catch::Contains("vocab_size"));
  CHECK_ERROR(make_task(tiny_task("nope", dir)), Catch::Contains("unknown task"));
  fs::remove_all(dir);
}

TEST_CASE("tasks: a tiny BERT learns copy_first and reports accuracy per length", "[tasks]") {
  const std::string dir = temp_dir("cls-learns");
  TrainOptions quiet;
  quiet.quiet = true;
  const RunConfig cfg =
      tiny_task("copy_first", dir, {"train.max_steps=150", "train.warmup_steps=20", "train.threads=2"});
  const TrainSummary s = train(cfg, quiet);
  CHECK(s.steps == 150);
  const EvalResult e = evaluate_checkpoint(s.final_checkpoint, {});
  CHECK(e.accuracy > 0.9);  // chance: 1/8
  const nlohmann::json j =
      nlohmann::json::parse(read_file((fs::path(s.final_checkpoint) / "task_eval.json").string()));
  REQUIRE(j["results"].size() == 4);
  CHECK(j["results"][0]["length"] == 8);
  CHECK(j["results"][1]["accuracy"].get<double>() > 0.9);  // the training length
  CHECK(j["results"][3]["skipped"].get<std::string>().find("max_positions") != std::string::npos);
  CHECK(fs::exists(fs::path(s.final_checkpoint) / "task_eval.csv"));
  fs::remove_all(dir);
}

// A model without a position table (RoPE, none) holds n_positions as a limit: eval and the other
// read-only commands read its checkpoint with a larger model.max_positions, at lengths past the
// one it was trained with, and its scores at the trained lengths stay bitwise the same. A learned
// table's size is a weight's shape: another one is still refused, naming both values.
TEST_CASE("tasks: a RoPE checkpoint is evaluated past its max_positions, a learned one is refused",
          "[tasks][checkpoint]") {
  const std::string dir = temp_dir("longer-positions");
  TrainOptions quiet;
  quiet.quiet = true;
  for (const std::string positions : {"rope", "none", "learned"}) {
    INFO(positions);
    const TrainSummary s =
        train(tiny_task("count_ones", dir + "/" + positions,
                        {"model.family=gpt2", "model.positions=" + positions, "model.max_positions=16",
                         "train.seq_len=12", "data.eval_lengths=[8, 12, 32]", "train.eval_batches=1"}),
              quiet);
    const nlohmann::json trained = nlohmann::json::parse(read_file(s.final_checkpoint + "/task_eval.json"));
    REQUIRE(trained["results"].size() == 3);
    CHECK(trained["results"][2]["skipped"] == "above model.max_positions 16");
    const std::vector<std::string> longer = {"model.max_positions=64"};
    if (positions == "learned") {
      const auto refused =
          Catch::Contains("'n_positions' is 16 but config.toml (with the overrides) gives 64");
      CHECK_ERROR(evaluate_checkpoint(s.final_checkpoint, longer), refused);
      RunConfig cfg;
      CHECK_ERROR(load_checkpoint_task(s.final_checkpoint, longer, cfg, "test"), refused);
      continue;
    }
    RunConfig cfg;
    const std::unique_ptr<Task> task = load_checkpoint_task(s.final_checkpoint, longer, cfg, "test");
    const nlohmann::json j = task->final_evaluation("", false);
    REQUIRE(j["results"].size() == 3);
    CHECK(j["results"][0] == trained["results"][0]);  // the same bits at the trained lengths
    CHECK(j["results"][1] == trained["results"][1]);
    CHECK(j["results"][2]["length"] == 32);
    CHECK(j["results"][2]["examples"] == 16);
    CHECK(!j["results"][2].contains("skipped"));
    CHECK_NOTHROW(evaluate_checkpoint(s.final_checkpoint, longer));
  }
  fs::remove_all(dir);
}

TEST_CASE("tasks: every configs/tasks file loads and builds its task", "[tasks]") {
  const fs::path dir = fs::path(SAOBP_SOURCE_DIR) / "configs" / "tasks";
  if (!fs::exists(dir)) return;  // built outside the source tree
  std::set<std::string> seen;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".toml") continue;
    INFO(f.path().string());
    const RunConfig cfg = load_config(f.path().string(), {"train.run_dir=" + temp_dir("cfg")});
    CHECK(cfg.data.kind == "task");
    // <task>.toml, or <task>_<answer>.toml for a decoder's written answer (data.answer).
    const std::string stem = f.path().stem().string();
    CHECK((cfg.data.task == stem || cfg.data.task + "_" + cfg.data.answer == stem));
    CHECK(make_task(cfg)->hf_config()["saobp_task"] == cfg.data.task);
    seen.insert(cfg.data.task);
  }
  CHECK(seen.size() == tk::task_names().size());
}

TEST_CASE("tasks: running counts and the answers a decoder writes, by hand", "[tasks]") {
  const int32_t d0 = tk::kDigit, d1 = tk::kDigit + 1, a = tk::kLetter, b = tk::kLetter + 1;
  const auto counts = [](std::vector<int32_t> c) {
    for (int32_t& x : c) x += tk::kCount;
    return c;
  };
  // count_random: the bits are the items, the ones add one.
  const std::vector<int32_t> bits = {tk::kCls, d1, d0, d1, d1};
  CHECK(tk::running_counts(tk::task_spec("count_random"), bits) == std::vector<int32_t>{1, 1, 2, 3});
  std::vector<int32_t> chain = counts({1, 1, 2, 3});
  chain.insert(chain.end(), {tk::kAnswer, tk::kCount + 3});
  CHECK(tk::answer_tokens(tk::task_spec("count_random"), bits, true) == chain);
  CHECK(tk::answer_tokens(tk::task_spec("count_random"), bits, false) ==
        std::vector<int32_t>{tk::kAnswer, tk::kCount + 3});
  CHECK(tk::render(chain) == "#1 #1 #2 #3 => #3");
  // The separator is not an item.
  CHECK(tk::running_counts(tk::task_spec("count_random_sep"), {tk::kCls, d1, d0, d1, d1, d0, tk::kSep, d1}) ==
        std::vector<int32_t>{1, 1, 2, 3, 3, 4});
  // count_word: the words before '? q', counting q.
  CHECK(tk::running_counts(tk::task_spec("count_word"), {tk::kCls, a, b, a, tk::kQuery, a}) ==
        std::vector<int32_t>{1, 1, 2});
  // count_sum: the terms, whatever the operator after the last.
  CHECK(tk::running_counts(tk::task_spec("count_sum"), {tk::kCls, d1, tk::kPlus, d1, tk::kPlus, d1}) ==
        std::vector<int32_t>{1, 2, 3});
  CHECK(tk::running_counts(tk::task_spec("count_sum"), {tk::kCls, d1, tk::kPlus, d1, tk::kEquals}) ==
        std::vector<int32_t>{1, 2});
  CHECK(tk::running_counts(tk::task_spec("count_ones"), {tk::kCls, d1, d1}) == std::vector<int32_t>{1, 2});
  // Over generated examples: the chain ends at the label and has one count per item.
  for (const std::string& name : tk::task_names()) {
    const tk::TaskSpec t = tk::task_spec(name);
    if (name.rfind("count_", 0) != 0) {
      CHECK_ERROR(tk::running_counts(t, tk::generate(t, 42, tk::Split::train, 16, 0).tokens),
                  Catch::Contains("not a counting task"));
      continue;
    }
    for (const int64_t L : {4, 17, 64, 1024})
      for (uint64_t i = 0; i < 3; ++i) {
        const tk::Example e = tk::generate(t, 42, tk::Split::test, L, i);
        const std::vector<int32_t> r = tk::running_counts(t, e.tokens);
        INFO(name << " L " << L << " " << tk::render(e.tokens));
        REQUIRE(!r.empty());
        CHECK(r.back() == e.label);
        CHECK(r.front() <= 1);
        for (size_t k = 1; k < r.size(); ++k) CHECK((r[k] == r[k - 1] || r[k] == r[k - 1] + 1));
      }
  }
  CHECK_ERROR(tk::running_counts(tk::task_spec("count_ones"), {tk::kCls, d1, d0}),
              Catch::Contains("[tasks]"));
}

// The answer form: the labels are the answer's tokens only; final_evaluation's generated answers
// equal those of saobp generate's decoding of each test example alone.
TEST_CASE("tasks: a decoder writes the count, directly or with a chain of thought", "[tasks]") {
  const std::string dir = temp_dir("answer-form");
  TrainOptions quiet;
  quiet.quiet = true;
  for (const std::string answer : {"direct", "chain"}) {
    INFO(answer);
    const RunConfig cfg = tiny_task(
        "count_ones", dir + "/" + answer,
        {"model.family=gpt2", "data.answer=" + answer, "model.vocab_size=1058", "model.max_positions=64",
         "train.seq_len=12", "train.max_steps=200", "train.warmup_steps=20", "train.threads=2",
         "data.eval_lengths=[8, 12, 40]", "train.eval_batches=2"});
    {
      const std::unique_ptr<Task> task = make_task(cfg);
      CHECK(task->hf_config()["architectures"][0] == "GPT2LMHeadModel");
      CHECK(task->hf_config()["saobp_answer"] == answer);
    }
    const TrainSummary s = train(cfg, quiet);
    const nlohmann::json j =
        nlohmann::json::parse(read_file((fs::path(s.final_checkpoint) / "task_eval.json").string()));
    REQUIRE(j["results"].size() == 3);
    CHECK(j["evaluated_by"] == "greedy generation");
    // 40 ones with a chain of 39 counts and "=> #39" is 81 tokens: past max_positions 64.
    if (answer == "chain")
      CHECK(j["results"][2]["skipped"].get<std::string>().find("with the answer") != std::string::npos);
    // Each test example alone through saobp generate's decoding, its answer read the same way.
    RunConfig loaded;
    const std::unique_ptr<Task> task = load_checkpoint_task(s.final_checkpoint, {}, loaded, "test");
    const tk::TaskSpec spec = tk::task_spec("count_ones");
    for (size_t row = 0; row < 2; ++row) {
      const int64_t L = j["results"][row]["length"].get<int64_t>();
      int64_t correct = 0, chain_ok = 0, n = 0;
      for (uint64_t i = 0; i < 2 * 16; ++i) {
        const tk::Example e = tk::generate(spec, 42, tk::Split::test, L, i);
        const std::vector<int32_t> want = tk::answer_tokens(spec, e.tokens, answer == "chain");
        GenerateOptions g;
        g.sampling.greedy = true;
        g.max_new_tokens = static_cast<int64_t>(want.size()) + 8;
        const Generation out = generate(*task->lm_body(), *task->lm_head(), e.tokens, g);
        const auto arrow = std::find(out.tokens.begin(), out.tokens.end(), tk::kAnswer);
        const bool right =
            arrow != out.tokens.end() && arrow + 1 != out.tokens.end() && *(arrow + 1) == want.back();
        correct += right;
        chain_ok += right && std::equal(out.tokens.begin(), arrow + 2, want.begin(), want.end());
        ++n;
      }
      INFO("length " << L);
      CHECK(j["results"][row]["accuracy"].get<double>() ==
            static_cast<double>(correct) / static_cast<double>(n));
      if (answer == "chain")
        CHECK(j["results"][row]["chain_exact"].get<double>() ==
              static_cast<double>(chain_ok) / static_cast<double>(n));
    }
    // At a trained length the direct answer is learned (count_ones is a function of the length).
    if (answer == "direct") CHECK(j["results"][1]["accuracy"].get<double>() > 0.5);
  }
  // Refused: an encoder, a task that does not count, a vocabulary without the counts.
  CHECK_ERROR(load_config("", {"data.kind=task", "data.task=count_ones", "data.answer=chain"}),
              Catch::Contains("model.family = \"gpt2\""));
  CHECK_ERROR(make_task(tiny_task("copy_first", dir,
                                  {"model.family=gpt2", "data.answer=direct", "model.vocab_size=1058"})),
              Catch::Contains("not a counting task"));
  CHECK_ERROR(make_task(tiny_task("count_ones", dir, {"model.family=gpt2", "data.answer=direct"})),
              Catch::Contains("model.vocab_size 33"));
  fs::remove_all(dir);
}
