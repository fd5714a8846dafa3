// Diagnostics of a trained checkpoint: `saobp analyze` (every metric of
// src/attention/diagnostics.h over N held-out samples) and `saobp inspect` (one input through the
// model: tokens, every layer's A and B, hidden states, logits). `saobp report` uses both.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/diagnostics.h"
#include "tensor/tensor.h"
#include "tokenizer/tokenizer.h"
#include "train/config.h"

namespace saobp {

class Task;

// The task of a checkpoint with its weights loaded (eval mode is the caller's: no training step
// runs), with the checkpoint's own tokenizer when it carries one (unless an override names
// data.vocab): the folder is all a single input needs. The corpus is read only when a batch is
// asked for (data_setup.h). `cfg` receives the checkpoint's config with the overrides applied;
// its train.threads (when > 0) sets the OpenMP threads.
// For analyze, inspect and generate; `op` names the command in errors.
// A Hugging Face model folder (config.json, model.safetensors and tokenizer files, no
// config.toml; e.g. the published gpt2) is read as it is, no conversion: the model section from
// config.json (train/pretrained.h: softmax attention unless saobp_* fields say otherwise), the
// weights by their names with or without the "transformer." / "bert." prefix, the folder's own
// tokenizer, data.kind "text". Such a folder holds no data: what analyze or inspect --sample
// measures must come from the overrides (data.kind and data.path: analyze --data KIND:PATH) or
// from rows (analyze --data TASK:DIR); a held-out batch asked of the folder itself is refused.
std::unique_ptr<Task> load_checkpoint_task(const std::string& dir, const std::vector<std::string>& overrides,
                                           RunConfig& cfg, const char* op = "analyze");

// Whether `dir` is a Hugging Face model folder: config.json without config.toml.
bool is_hf_model_folder(const std::string& dir);

// The most held-out sequences one analysis averages (generated data has no end of its own).
constexpr int64_t kMaxAnalyzeSamples = int64_t{1} << 20;

// Rows from outside the checkpoint's own data (`analyze --data TASK:DIR`: a benchmark's inputs),
// made once the checkpoint is loaded, from its config and tokenizer.
struct InputRows {
  std::vector<std::vector<int32_t>> ids, types;  // per row: token ids and token types
  int32_t pad = 0;                               // padding id (masked out)
  nlohmann::json about;                          // what was read, for analysis.json's "data"
};
using InputRowsFn = std::function<InputRows(const RunConfig& cfg, const Tokenizer& tok)>;

struct AnalysisOptions {
  int64_t samples = 1024;              // held-out sequences averaged
  std::vector<std::string> overrides;  // "section.key=value" on the checkpoint's config.toml
  bool graph_metrics = true;           // clustering and betweenness (the slow part)
  double graph_tau = 1e-4;             // the attention graph's edge threshold τ (Fig. 2)
  int graph_nodes = 40;                // and its node count: the first nodes tokens
  bool per_sample = false;             // also every (sample, layer, map, head): per_sample.csv
  int layer_group = 4;                 // layers per group of the sink statistics (sink_groups)
  // Set: the first `samples` of these rows, in batches of train.batch_size, through the model's
  // body instead of the held-out stream (a pretrained checkpoint's; not a fine-tuned one's).
  InputRowsFn inputs;
};

// Runs the checkpoint's model (eval mode) over the first `samples` sequences of its validation
// stream (at most its held-out set: report.samples says how many) and accumulates every diagnostic of both
// maps (A and B) per layer and head.
DiagnosticsReport analyze_checkpoint(const std::string& dir, const AnalysisOptions& opt);

// Writes analysis.json (the report, the options and the checkpoint) and the CSV tables
// layers.csv, heads.csv, positions.csv (and per_sample.csv when r.options.per_sample) into out_dir
// (created); files are written atomically.
void write_analysis(const DiagnosticsReport& r, const std::string& checkpoint, const std::string& out_dir);

struct Inspection {
  std::vector<int32_t> ids;         // the input (one sequence)
  std::vector<std::string> tokens;  // their strings (the checkpoint's tokenizer; "id:N" without one)
  std::vector<AttentionMaps> maps;  // per layer: attn A, probs B (1,NH,T,T), values, q, k (1,NH,T,HS)
  std::vector<Tensor> hidden;       // embeddings output, then every layer's output: (1,T,C)
  Tensor logits;                    // the model's output head: (1,T,V) (MLM / LM / classes (1,K))
};

// One input through the checkpoint's model in eval mode: `text` (tokenized with the
// checkpoint's tokenizer; BERT gets [CLS] ... [SEP]) or `ids` (used as given).
Inspection inspect_checkpoint(const std::string& dir, const std::string& text,
                              const std::vector<int32_t>& ids,
                              const std::vector<std::string>& overrides = {});
// Sample `index` of the checkpoint's validation stream (padding removed), for heatmaps.
Inspection inspect_sample(const std::string& dir, int64_t index,
                          const std::vector<std::string>& overrides = {});

// Writes an inspection as safetensors: "ids" (T) i32, "layer.{l}.attn" / ".probs" (NH,T,T),
// "layer.{l}.q" / ".k" (NH,T,HS) as attention read them (after RoPE), "layer.{l}.q_raw" / ".k_raw"
// before RoPE (models with rotary positions), "layer.{l}.values" (NH,T,HS), "hidden.{i}" (T,C),
// "logits"; the tokens in the metadata ("tokens": a JSON array).
void write_inspection(const Inspection& in, const std::string& path);

}  // namespace saobp
