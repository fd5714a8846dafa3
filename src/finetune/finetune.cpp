// `saobp finetune` and `saobp eval --task`: configs from a pretrained folder and a recipe, the
// run, and results.json (finetune.h).
#include "finetune/finetune.h"

#include <omp.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/fs.h"
#include "dist/comm.h"
#include "finetune/benchmark.h"
#include "finetune/inputs.h"
#include "finetune/lm_scoring.h"
#include "finetune/predictions.h"
#include "model/gpt2.h"
#include "train/pretrained.h"
#include "train/trainer.h"

namespace saobp::finetune {

namespace fs = std::filesystem;

namespace {

// "model.key=value" for every key of a model section (the pretrained body's architecture).
std::vector<std::string> model_overrides(const ModelSection& m) {
  RunConfig c;
  c.model = m;
  std::vector<std::string> out;
  std::istringstream in(to_toml(c));
  bool in_model = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[')
      in_model = line == "[model]";
    else if (in_model && line.find(" = ") != std::string::npos)
      out.push_back("model." + line.substr(0, line.find(" = ")) + "=" + line.substr(line.find(" = ") + 3));
  }
  return out;
}

bool overridden(const std::vector<std::string>& overrides, const std::string& key) {
  for (const std::string& o : overrides)
    if (o.rfind(key + "=", 0) == 0 || o.rfind(key + " ", 0) == 0) return true;
  return false;
}

// train.seq_len of a recipe (the schema default 128 when it sets none).
int64_t recipe_seq_len(const std::string& text, const std::string& name) {
  try {
    return toml::parse(text, name).at_path("train.seq_len").value_or<int64_t>(TrainSection{}.seq_len);
  } catch (const toml::parse_error& e) {
    fail("finetune", "{}:{}:{}: TOML syntax error: {}", name, e.source().begin.line, e.source().begin.column,
         e.description());
  }
}

std::string task_slug(const std::string& task) {
  std::string s = task;
  for (char& c : s)
    if (c == '/') c = '-';
  return s;
}

// The recipe's text and the name its messages use.
std::pair<std::string, std::string> recipe_of(const BenchmarkSpec& spec, const std::string& file) {
  if (!file.empty()) return {read_file(file), file};
  return {recipe_text(spec.recipe), "configs/finetune/" + spec.recipe + ".toml"};
}

// The recipe's lengths in tokens that the task reads, scaled by train.seq_len / the recipe's
// seq_len when the input is shorter than the recipe's (a model of fewer positions, or the user's
// train.seq_len): SQuAD's question cut to max_query_length leaves room for a context chunk, and
// the chunk stride (SQuAD) and window stride (WikiText) keep their share of the window. A key the
// user sets is kept as given.
void fit_lengths(RunConfig& cfg, Kind kind, int64_t recipe_seq, const std::vector<std::string>& user,
                 std::vector<std::string>& notes) {
  const int64_t L = cfg.train.seq_len;
  if (L >= recipe_seq) return;
  const auto scale = [&](const char* key, int64_t& v, int64_t most) {
    if (overridden(user, key)) return;
    const int64_t was = v;
    // v > recipe_seq scales past L >= most (and v * L could overflow): clamped either way.
    v = std::clamp<int64_t>(v > recipe_seq ? most : v * L / recipe_seq, 1, std::max<int64_t>(1, most));
    if (v != was)
      notes.push_back(fmt::format("{} {} of the recipe scaled to {} (train.seq_len {} of the recipe's {})",
                                  key, was, v, L, recipe_seq));
  };
  if (kind == Kind::span) {
    scale("data.max_query_length", cfg.data.max_query_length, L - 4);  // [CLS] q [SEP] >= 1 token [SEP]
    scale("data.doc_stride", cfg.data.doc_stride, L);
  }
  if (kind == Kind::lm && cfg.data.window_stride > 0)  // 0: seq_len / 2, fitted already
    scale("data.window_stride", cfg.data.window_stride, L);
}

// Recipe + pretrained model + task keys + user overrides, every length fitted to the model; the
// adjustments made are appended to `notes`. The paths (--data, and the pretrained folder, named
// by `init_option`) are set byte for byte.
RunConfig config_for(const BenchmarkSpec& spec, const PretrainedInfo& pre, const std::string& data,
                     const std::string& recipe_file, const std::vector<std::string>& user,
                     const char* init_option, std::vector<std::string>& notes) {
  const auto [text, name] = recipe_of(spec, recipe_file);
  std::vector<std::string> o = model_overrides(pre.model);
  o.push_back("data.kind=\"benchmark\"");
  o.push_back(fmt::format("data.task=\"{}\"", spec.name));
  o.push_back(exact_string_override("data.path", data, "--data"));
  if (pre.has_tokenizer) o.push_back(exact_string_override("data.vocab", pre.dir, init_option));
  o.push_back("train.run_dir=runs/finetune/" + task_slug(spec.name));
  const int64_t seq = recipe_seq_len(text, name);
  if (pre.model.positions == "learned" && seq > pre.model.max_positions &&
      !overridden(user, "train.seq_len")) {
    o.push_back(fmt::format("train.seq_len={}", pre.model.max_positions));
    notes.push_back(fmt::format("train.seq_len {} of the recipe lowered to the model's max_positions {}", seq,
                                pre.model.max_positions));
  }
  o.insert(o.end(), user.begin(), user.end());
  RunConfig cfg = load_config_text(text, name, o);
  fit_lengths(cfg, spec.kind, seq, user, notes);
  validate_config(cfg);
  return cfg;
}

}  // namespace

const std::string& recipe_text(const std::string& stem) {
  std::string all;
  for (const auto& [name, text] : recipes()) {
    if (name == stem) return text;
    all += (all.empty() ? "" : ", ") + name;
  }
  fail("finetune", "no recipe configs/finetune/{}.toml compiled in (recipes: {})", stem, all);
}

RunConfig finetune_config(const FinetuneOptions& o) {
  const BenchmarkSpec spec = benchmark_spec(o.task);
  if (spec.train_split.empty())
    fail("finetune", "--task {} is evaluation-only: saobp eval --checkpoint DIR --task {} --data DIR", o.task,
         o.task);
  if (o.init.empty()) fail("finetune", "--init: name the pretrained model folder to start from");
  const PretrainedInfo pre = read_pretrained(o.init);
  if (!pre.has_tokenizer)
    fail("finetune", "--init {}: no tokenizer files (tokenizer.json, vocab.txt, or vocab.json + merges.txt)",
         o.init);
  std::vector<std::string> notes;
  RunConfig cfg = config_for(spec, pre, o.data, o.recipe, o.overrides, "--init", notes);
  if (!o.quiet)
    for (const std::string& n : notes) fmt::print("{}\n", n);
  return cfg;
}

std::vector<std::string> write_predictions(nlohmann::json& r, const std::string& dir) {
  std::vector<std::string> written;
  const auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (fs::path(dir) / name).string();
    try {
      write_file_atomic(path, text);
    } catch (const Error&) {
      // All of the set or none: the files written before this one go.
      std::error_code ec;
      for (const std::string& f : written) fs::remove(f, ec);
      throw;
    }
    written.push_back(path);
  };
  for (const char* key : {"predictions", "null_odds"}) {
    if (!r.contains(key)) continue;
    const nlohmann::json splits = r[key];
    r.erase(key);
    for (const auto& [split, table] : splits.items())
      write(splits.size() == 1 ? fmt::format("{}.json", key) : fmt::format("{}_{}.json", key, split),
            table.dump(2) + "\n");
  }
  // The texts of finetune/predictions.h: one JSON line per example, and the GLUE leaderboard's
  // files under their own names.
  if (r.contains("example_predictions")) {
    for (const auto& [split, text] : r["example_predictions"].items())
      write(fmt::format("predictions_{}.jsonl", split), text.get<std::string>());
    r.erase("example_predictions");
  }
  if (r.contains("glue_submission")) {
    for (const auto& [file, text] : r["glue_submission"].items()) write(file, text.get<std::string>());
    r.erase("glue_submission");
  }
  if (!written.empty()) r["prediction_files"] = written;
  return written;
}

nlohmann::json run_finetune(const FinetuneOptions& o) {
  const RunConfig cfg = finetune_config(o);
  if (!o.quiet) fmt::print("# resolved config ({} from {})\n{}\n", o.task, o.init, to_toml(cfg));
  TrainOptions t;
  t.resume_dir = o.resume;
  t.resume_latest = o.resume_latest, t.overwrite = o.overwrite;
  if (o.resume.empty() && !o.resume_latest) t.init_dir = o.init;
  t.progress = true, t.quiet = o.quiet;
  const TrainSummary s = train(cfg, t);
  nlohmann::json r = s.final_eval.is_null() ? nlohmann::json::object() : s.final_eval;
  r["task"] = o.task;
  r["init"] = o.init;
  r["data"] = o.data;
  r["run_dir"] = cfg.train.run_dir;
  r["checkpoint"] = s.final_checkpoint;
  r["steps"] = s.steps;
  r["final_train_loss"] = s.last_loss;
  nlohmann::json epochs = nlohmann::json::array();
  for (const nlohmann::json& e : s.evals)
    if (e.contains("eval_metrics"))
      epochs.push_back({{"step", e["step"]}, {"epoch", e.value("epoch", 0)}, {"metrics", e["eval_metrics"]}});
  r["evaluations"] = epochs;
  if (!s.init_report.is_null())
    r["init_report"] = {{"loaded", s.init_report["loaded"].size()},
                        {"initialized", s.init_report["initialized"]},
                        {"unused", s.init_report["unused"]}};
  // Under mpirun the results (and every evaluation) are rank 0's.
  if (dist::root()) {
    write_predictions(r, cfg.train.run_dir);
    write_file_atomic((fs::path(cfg.train.run_dir) / "results.json").string(), r.dump(2) + "\n");
  }
  return r;
}

InputRowsFn benchmark_rows(const std::string& checkpoint, const std::string& task, const std::string& dir,
                           const std::string& split, int64_t max_length) {
  const BenchmarkSpec spec = benchmark_spec(task);
  if (spec.kind == Kind::lm)
    fail("analyze", "--data {}:{}: WikiText is a corpus here: --data wikitext:FILE", task, dir);
  std::string name = split.empty() ? spec.eval_splits.front() : split;
  std::vector<std::string> splits = spec.eval_splits;
  if (!spec.train_split.empty()) splits.insert(splits.begin(), spec.train_split);
  if (std::find(splits.begin(), splits.end(), name) == splits.end())
    fail("analyze", "--split {}: {} has the splits {}", name, task, fmt::join(splits, ", "));
  return [=](const RunConfig& cfg, const Tokenizer& tok) {
    PretrainedInfo pre;
    pre.dir = checkpoint, pre.format = "saobp", pre.model = cfg.model;
    std::vector<std::string> user, notes;
    if (max_length > 0) user.push_back(fmt::format("train.seq_len={}", max_length));
    const RunConfig f = config_for(spec, pre, dir, "", user, "--checkpoint", notes);
    const SplitData d = read_split(spec, dir, name, bench::ReadOptions{f.data.skip_bad_rows});
    const InputEncoder enc(
        spec, tok,
        EncodeOptions{cfg.model.family, f.train.seq_len, f.data.doc_stride, f.data.max_query_length},
        "analyze", cfg.data.vocab);
    int64_t truncated = 0;
    const std::vector<Item> items = enc.encode(d, false, truncated);
    InputRows rows;
    rows.pad = enc.pad();
    for (const Item& it : items)
      for (size_t k = 0; k < it.ids.size(); ++k)
        rows.ids.push_back(it.ids[k]), rows.types.push_back(it.types[k]);
    rows.about = {{"task", task},
                  {"dir", dir},
                  {"split", name},
                  {"examples", d.size()},
                  {"rows", rows.ids.size()},
                  {"rows_per_example", items.empty() ? 0 : items.front().ids.size()},
                  {"max_length", f.train.seq_len},
                  {"truncated", truncated},
                  {"skipped_rows", d.stats().skipped},
                  {"notes", notes}};
    if (spec.kind == Kind::span)
      rows.about["doc_stride"] = f.data.doc_stride, rows.about["max_query_length"] = f.data.max_query_length;
    return rows;
  };
}

nlohmann::json evaluate_benchmark(const EvalOptions& o) {
  const BenchmarkSpec spec = benchmark_spec(o.task);
  const PretrainedInfo pre = read_pretrained(o.checkpoint);
  if (!pre.has_tokenizer) fail("eval", "--checkpoint {}: no tokenizer files", o.checkpoint);
  nlohmann::json r = {{"task", o.task}, {"checkpoint", o.checkpoint}, {"data", o.data}};
  if (spec.kind == Kind::lm || o.zero_shot) {
    if (pre.model.family != "gpt2")
      fail("eval", "{}{}: scoring by log-likelihood needs a decoder (model.family gpt2); {} is {}", o.task,
           o.zero_shot ? " --zero-shot" : "", o.checkpoint, pre.model.family);
    std::vector<std::string> notes;
    const RunConfig cfg = config_for(spec, pre, o.data, "", o.overrides, "--checkpoint", notes);
    if (o.print)
      for (const std::string& n : notes) fmt::print(stderr, "eval: {}\n", n);
    if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
    GPT2LMHeadModel model(decoder_config(cfg), cfg.train.seed);
    const InitReport rep = init_from_pretrained(o.checkpoint, model.params(), {});
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(o.checkpoint);
    r["family"] = "gpt2", r["attention"] = variant_name(cfg.model.attention.variant);
    if (spec.kind == Kind::lm) {
      const SplitData d = read_split(spec, o.data, "test", {}, 0);
      const int64_t stride = cfg.data.window_stride ? cfg.data.window_stride : cfg.train.seq_len / 2;
      nlohmann::json m =
          sliding_window_perplexity(model, *tok, d.lm_text, cfg.train.seq_len, stride, cfg.train.batch_size);
      m["file"] = d.lm_file;
      r["metrics"] = {{"test", m}};
    } else {
      r["zero_shot"] = true;
      r["metrics"] = nlohmann::json::object();
      r["example_predictions"] = nlohmann::json::object();
      for (const std::string& split : spec.eval_splits) {
        const SplitData d = read_split(spec, o.data, split, {cfg.data.skip_bad_rows}, cfg.data.max_examples);
        std::vector<ZeroShotExample> ex;
        if (spec.kind == Kind::choice) {
          const bool race = o.task.rfind("race/", 0) == 0;
          for (const bench::ChoiceExample& e : d.choice.examples) {
            ZeroShotExample z{e.id,
                              race ? "Article: " + e.context + "\n\nQuestion: " + e.question + "\n\nAnswer:"
                                   : e.full_context,
                              {},
                              e.label};
            for (const std::string& end : e.endings) z.candidates.push_back(" " + end);
            ex.push_back(std::move(z));
          }
        } else if (o.task == "boolq") {
          for (const bench::TextExample& e : d.text.examples)
            ex.push_back(
                {e.id, e.text_b + "\nQuestion: " + e.text_a + "?\nAnswer:", {" no", " yes"}, e.label});
        } else {
          fail("eval", "--zero-shot scores race/*, hellaswag and boolq; {} needs fine-tuning", o.task);
        }
        const ZeroShotResult z = zero_shot_choice(model, *tok, ex, cfg.train.seq_len, cfg.train.batch_size);
        r["metrics"][split] = z.metrics;
        r["example_predictions"][split] = zero_shot_lines(ex, z);
      }
    }
    r["init_report"] = {{"loaded", rep.loaded.size()}, {"unused", rep.unused}};
  } else {
    // A fine-tuned checkpoint: its own config (ours) or the task's recipe (a Hugging Face folder).
    RunConfig cfg;
    std::vector<std::string> ov = {"data.kind=\"benchmark\"", fmt::format("data.task=\"{}\"", o.task),
                                   exact_string_override("data.path", o.data, "--data"),
                                   exact_string_override("data.vocab", o.checkpoint, "--checkpoint")};
    ov.insert(ov.end(), o.overrides.begin(), o.overrides.end());
    std::vector<std::string> notes;
    const std::string file = (fs::path(o.checkpoint) / "config.toml").string();
    if (pre.format == "saobp")
      cfg = load_config(file, ov);
    else
      cfg = config_for(spec, pre, o.data, "", ov, "--checkpoint", notes);
    if (o.print)
      for (const std::string& n : notes) fmt::print(stderr, "eval: {}\n", n);
    if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
    const std::unique_ptr<Task> task = make_eval_task(cfg);
    if (pre.format == "saobp") {
      // A pretraining checkpoint has no head for the task: say so, not which tensor is missing.
      // (load_config above has read the file: it parses.)
      std::string kind = "benchmark";
      try {
        kind = toml::parse(read_file(file), file).at_path("data.kind").value_or<std::string>("benchmark");
      } catch (const toml::parse_error&) {
      }
      if (kind != "benchmark") {
        const bool zero_shot = pre.model.family == "gpt2" && (spec.kind == Kind::choice || o.task == "boolq");
        fail("eval",
             "--checkpoint {} is a pretraining checkpoint (data.kind = \"{}\"): it holds no head for {}; "
             "fine-tune it first (saobp finetune --init {} --task {} --data DIR){}",
             o.checkpoint, kind, o.task, o.checkpoint, o.task,
             zero_shot ? ", or score the candidates by its log-likelihood with --zero-shot" : "");
      }
    }
    init_from_pretrained(o.checkpoint, task->params(), {});
    const nlohmann::json f = task->final_evaluation("", o.print);
    for (auto& [k, v] : f.items()) r[k] = v;
    r["checkpoint"] = o.checkpoint;
  }
  if (o.print && r.contains("metrics")) fmt::print("{}\n", r["metrics"].dump(2));
  return r;
}

}  // namespace saobp::finetune
