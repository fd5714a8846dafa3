#include "train/analysis.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/fs.h"
#include "data/batching.h"
#include "model/body.h"
#include "model/safetensors.h"
#include "train/checkpoint.h"
#include "train/pretrained.h"
#include "train/task.h"

namespace saobp {

namespace fs = std::filesystem;

bool is_hf_model_folder(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(fs::path(dir) / "config.toml", ec) && fs::exists(fs::path(dir) / "config.json", ec);
}

namespace {

bool sets_key(const std::vector<std::string>& overrides, const std::string& key) {
  return std::any_of(overrides.begin(), overrides.end(),
                     [&](const std::string& o) { return o.starts_with(key + "="); });
}

// A Hugging Face folder's task (load_checkpoint_task): its model section, data.kind "text" and,
// until an override names a corpus, data.path = the folder (a placeholder the config's checks
// need; analyze and inspect --sample refuse a held-out batch before reading it).
std::unique_ptr<Task> hf_folder_task(const std::string& dir, const std::vector<std::string>& overrides,
                                     RunConfig& cfg, const char* op) {
  const PretrainedInfo pre = read_pretrained(dir);
  RunConfig base;
  base.model = pre.model;
  base.data.kind = "text";
  base.data.path = dir;
  // The training length default (128) cut to the model's positions.
  if (pre.model.positions == "learned")
    base.train.seq_len = std::min(base.train.seq_len, pre.model.max_positions);
  cfg = load_config_text(to_toml(base), (fs::path(dir) / "config.json").string(), overrides);
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  use_checkpoint_tokenizer(dir, sets_key(overrides, "data.vocab"), cfg, op);
  std::unique_ptr<Task> task = make_task(cfg);
  // Every model tensor must be in the file (a missing one is an error naming it); the file's
  // others (GPT2LMHeadModel's tied lm_head.weight, the attn.bias buffers) are not used.
  init_from_pretrained(dir, task->params(), {});
  return task;
}

}  // namespace

std::unique_ptr<Task> load_checkpoint_task(const std::string& given_dir,
                                           const std::vector<std::string>& overrides, RunConfig& cfg,
                                           const char* op) {
  const std::string dir = readable_checkpoint(given_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(op, "{}: not a checkpoint directory", dir);
  if (is_hf_model_folder(dir)) return hf_folder_task(dir, overrides, cfg, op);
  cfg = load_config((fs::path(dir) / "config.toml").string(), overrides);
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);  // as training ran (or overridden)
  use_checkpoint_tokenizer(dir, sets_key(overrides, "data.vocab"), cfg, op);
  verify_checksums(dir, {"optimizer.safetensors", "model.safetensors"});  // load_weights checks that one
  std::unique_ptr<Task> task = make_task(cfg);
  check_checkpoint_config(dir, task->hf_config(), task->tokenizer());
  load_weights(dir, task->params());
  return task;
}

namespace {

// Rows [0, r) of every (B,...) tensor of the maps and of the mask.
void keep_rows(std::vector<AttentionMaps>& maps, Tensor& mask, int64_t r) {
  auto cut = [r](Tensor& t) {
    if (t.defined()) t = t.slice(0, 0, r).contiguous();
  };
  for (AttentionMaps& m : maps)
    cut(m.attn), cut(m.probs), cut(m.keep), cut(m.values), cut(m.queries), cut(m.keys);
  cut(mask);
}

// Rows [begin, begin + n) of `rows` (fewer at the end) through the task's body in eval mode:
// every layer's maps (with values) and the key mask.
void rows_through_body(Task& task, const InputRows& rows, int64_t begin, int64_t n,
                       std::vector<AttentionMaps>& maps, Tensor& mask) {
  NoGradGuard ng;
  std::vector<const std::vector<int32_t>*> ids, types;
  for (int64_t r = begin; r < std::min<int64_t>(begin + n, static_cast<int64_t>(rows.ids.size())); ++r)
    ids.push_back(&rows.ids[static_cast<size_t>(r)]), types.push_back(&rows.types[static_cast<size_t>(r)]);
  const PaddedRows b = pad_rows(ids, types, rows.pad);
  mask = b.mask;
  task.body()->hidden(b.ids, b.types, b.mask, false, 0, &maps);
}

}  // namespace

DiagnosticsReport analyze_checkpoint(const std::string& dir, const AnalysisOptions& opt) {
  if (opt.samples < 1 || opt.samples > kMaxAnalyzeSamples)
    fail("analyze", "--samples must be in [1, {}], got {}", kMaxAnalyzeSamples, opt.samples);
  if (is_hf_model_folder(readable_checkpoint(dir)) && !opt.inputs && !sets_key(opt.overrides, "data.path"))
    fail("analyze",
         "{} is a Hugging Face model folder, which holds no data: give --data TASK:DIR (a benchmark's rows) "
         "or "
         "--data KIND:PATH (a corpus)",
         dir);
  RunConfig cfg;
  const std::unique_ptr<Task> task = load_checkpoint_task(dir, opt.overrides, cfg);
  std::optional<InputRows> rows;
  if (opt.inputs) {
    if (cfg.data.kind == "benchmark")
      fail(
          "analyze",
          "{} is fine-tuned on {}: --data TASK:DIR measures a pretrained checkpoint's body; analyze this one "
          "on its own evaluation split (--data valid)",
          dir, cfg.data.task);
    if (!task->tokenizer() || !task->body())
      fail("analyze", "{}: --data TASK:DIR needs a checkpoint with a tokenizer and a model body", dir);
    rows = opt.inputs(cfg, *task->tokenizer());
    if (rows->ids.empty()) fail("analyze", "--data {}: no rows to analyze", rows->about.value("task", "?"));
  }
  // The held-out set is all there is: more samples would repeat its sequences.
  const int64_t n = rows ? static_cast<int64_t>(rows->ids.size()) : task->held_out_examples(),
                samples = n > 0 ? std::min(opt.samples, n) : opt.samples;
  DiagnosticsOptions d;
  d.causal = cfg.model.family == "gpt2";
  d.graph_metrics = opt.graph_metrics;
  d.graph_tau = opt.graph_tau, d.graph_nodes = opt.graph_nodes;
  d.per_sample = opt.per_sample;
  d.layer_group = opt.layer_group;
  DiagnosticsAccumulator acc(d);
  const ModelSection& ms = cfg.model;
  std::optional<RopePairNorms> pairs;  // a model with rotary positions: q and k per frequency
  if (ms.positions == "rope") pairs.emplace(ms.layers, ms.heads, ms.hidden / ms.heads);
  int64_t remaining = samples, longest = 0;
  std::vector<double> kept;  // per layer: (sample, head) pairs kept by the head skip
  for (int64_t index = 0; remaining > 0; ++index) {
    std::vector<AttentionMaps> maps;
    Tensor mask;
    if (rows)
      rows_through_body(*task, *rows, index * cfg.train.batch_size, cfg.train.batch_size, maps, mask);
    else
      task->attention_maps(Split::valid, index, maps, mask);
    const int64_t B = maps.front().probs.size(0), r = std::min(B, remaining);
    if (r < B) keep_rows(maps, mask, r);
    std::vector<Tensor> values;
    for (const AttentionMaps& m : maps) values.push_back(m.values);
    acc.add(maps, mask, &values);
    longest = std::max(longest, maps.front().probs.size(2));
    if (pairs)
      for (size_t l = 0; l < maps.size(); ++l)
        pairs->add(static_cast<int64_t>(l), maps[l].queries, maps[l].keys, mask);
    if (maps.front().keep.defined()) {
      kept.resize(maps.size());
      for (size_t l = 0; l < maps.size(); ++l)
        for (double k : maps[l].keep.to(DType::f64).to_vector<double>()) kept[l] += k;
    }
    remaining -= r;
  }
  DiagnosticsReport report = acc.report();
  for (double k : kept) report.skip_rate.push_back(1.0 - k / static_cast<double>(samples * report.heads));
  if (pairs) report.rope = pairs->report(ms.rope_base, longest, ms.max_positions - 1);
  if (rows) report.data = rows->about, report.data["rows_analyzed"] = samples;
  return report;
}

void write_analysis(const DiagnosticsReport& r, const std::string& checkpoint, const std::string& out_dir) {
  fs::create_directories(out_dir);
  nlohmann::json j = r.to_json();
  j["checkpoint"] = checkpoint;
  write_file_atomic((fs::path(out_dir) / "analysis.json").string(), j.dump(2) + "\n");
  write_file_atomic((fs::path(out_dir) / "layers.csv").string(), r.layers_csv());
  write_file_atomic((fs::path(out_dir) / "heads.csv").string(), r.heads_csv());
  write_file_atomic((fs::path(out_dir) / "positions.csv").string(), r.positions_csv());
  if (r.options.per_sample)
    write_file_atomic((fs::path(out_dir) / "per_sample.csv").string(), r.per_sample_csv());
  if (r.rope) {
    write_file_atomic((fs::path(out_dir) / "rope_bands.csv").string(), r.rope->bands_csv());
    write_file_atomic((fs::path(out_dir) / "rope_decay.csv").string(), r.rope->decay_csv());
  }
}

namespace {

Inspection run_inspection(Task& task, const std::vector<int32_t>& ids) {
  if (ids.empty()) fail("inspect", "the input has no tokens");
  Inspection in;
  in.ids = ids;
  const Tensor t = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  task.inspect(t, in.maps, in.hidden, in.logits);
  const Tokenizer* tok = task.tokenizer();
  for (int32_t id : ids) in.tokens.push_back(tok ? tok->id_to_token(id) : fmt::format("id:{}", id));
  return in;
}

}  // namespace

Inspection inspect_checkpoint(const std::string& dir, const std::string& text,
                              const std::vector<int32_t>& ids, const std::vector<std::string>& overrides) {
  RunConfig cfg;
  const std::unique_ptr<Task> task = load_checkpoint_task(dir, overrides, cfg);
  std::vector<int32_t> input = ids;
  if (!text.empty()) {
    const Tokenizer* tok = task->tokenizer();
    if (!tok)
      fail("inspect", "{} has no tokenizer (a synthetic-data run): pass --ids instead of --text", dir);
    input = tok->encode(text);
    if (cfg.model.family == "bert") {
      const SpecialTokens& sp = tok->special();
      input.insert(input.begin(), sp.cls);
      input.push_back(sp.sep);
    }
  }
  for (int32_t id : input)
    if (id < 0 || id >= cfg.model.vocab_size)
      fail("inspect", "token id {} is outside the model's vocabulary [0, {})", id, cfg.model.vocab_size);
  return run_inspection(*task, input);
}

Inspection inspect_sample(const std::string& dir, int64_t index, const std::vector<std::string>& overrides) {
  if (is_hf_model_folder(readable_checkpoint(dir)) && !sets_key(overrides, "data.path"))
    fail("inspect", "{} is a Hugging Face model folder, which holds no held-out set: give --text or --ids",
         dir);
  RunConfig cfg;
  const std::unique_ptr<Task> task = load_checkpoint_task(dir, overrides, cfg);
  const int64_t B = task->batch_size();
  if (B <= 0) fail("inspect", "this task does not expose its batches");
  if (index < 0) fail("inspect", "sample index {} is negative", index);
  if (const int64_t n = task->held_out_examples(); n > 0 && index >= n)
    fail("inspect", "sample index {} is out of range: {}'s held-out set has {} sequences (0 to {})", index,
         dir, n, n - 1);
  Tensor ids, mask;
  task->batch_inputs(Split::valid, index / B, ids, mask);
  const int64_t row = index % B, T = ids.size(1);
  const std::vector<int32_t> all = ids.to_vector<int32_t>();
  const std::vector<uint8_t> m = mask.to_vector<uint8_t>();
  std::vector<int32_t> seq;
  for (int64_t t = 0; t < T; ++t)
    if (m[static_cast<size_t>(row * T + t)]) seq.push_back(all[static_cast<size_t>(row * T + t)]);
  return run_inspection(*task, seq);
}

void write_inspection(const Inspection& in, const std::string& path) {
  std::vector<NamedTensor> out;
  const int64_t T = static_cast<int64_t>(in.ids.size());
  out.push_back({"ids", Tensor::from_vector(in.ids, {T})});
  auto first = [](const Tensor& t) { return t.slice(0, 0, 1).squeeze(0).contiguous(); };
  for (size_t l = 0; l < in.maps.size(); ++l) {
    out.push_back({fmt::format("layer.{}.attn", l), first(in.maps[l].attn)});
    out.push_back({fmt::format("layer.{}.probs", l), first(in.maps[l].probs)});
    // q and k as attention read them, and before RoPE when the model has rotary positions.
    for (const auto& [name, t] : {std::pair{"q", in.maps[l].queries},
                                  {"k", in.maps[l].keys},
                                  {"q_raw", in.maps[l].raw_queries},
                                  {"k_raw", in.maps[l].raw_keys}})
      if (t.defined()) out.push_back({fmt::format("layer.{}.{}", l, name), first(t)});
    if (in.maps[l].values.defined())
      out.push_back({fmt::format("layer.{}.values", l), first(in.maps[l].values)});
  }
  for (size_t i = 0; i < in.hidden.size(); ++i)
    out.push_back({fmt::format("hidden.{}", i), first(in.hidden[i])});
  out.push_back({"logits", first(in.logits)});
  save_safetensors(path, out, {{"tokens", nlohmann::json(in.tokens).dump()}, {"format", "saobp-inspect"}});
}

}  // namespace saobp
