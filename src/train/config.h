// The run configuration: a TOML file with three sections ([model], [train], [data]) plus
// "section.key=value" overrides from the command line, checked against a schema.
//
// Resolution, in order (later wins):
//   1. the defaults below;
//   2. the family's defaults (bert: vocab 30522, 512 positions; gpt2: vocab 50257, 1024);
//   3. the preset (mini | small | medium: the paper's Table 4 sizes and its λ; custom: nothing);
//   4. every key given in the file or an override (overrides are applied to the file first);
//   5. derived values: "<name>" in train.run_dir becomes the config file's stem ("default" with
//      no file), data.vocab_size 0 becomes model.vocab_size.
// Every error is a saobp::Error "[config] ..." naming the key, and the file:line:column (or the
// override) it came from when the key was given: unknown sections and keys (listing the allowed
// ones), wrong types (expected and found), TOML syntax errors, and bad values.
// to_toml writes the resolved config with every key, so a run is reproducible from that file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attention/attention.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

namespace saobp {

struct ModelSection {
  std::string family = "bert";  // bert | gpt2
  std::string preset = "mini";  // mini | small | medium | custom
  int64_t vocab_size = 30522, hidden = 256, layers = 4, heads = 4, intermediate = 1024;
  int64_t max_positions = 512;
  double dropout = 0.1;
  // The attention keys, one struct from here to both kernels (attention/attention.h): model.attention
  // (the variant: original | bp_high | bp_low | bp_elemmul), lambda, layer_lambdas (empty: model.lambda
  // in every layer), learnable_lambda, bp_steps, and the head skip (the head-skip note,
  // docs/references.md: per (sample, head), a head whose fraction of peaked rows, row max >
  // skip_peak_tau, exceeds skip_head_fraction contributes zero output and gets zero gradient):
  // skip_sinky_heads, skip_peak_tau, skip_head_fraction.
  AttentionSpec attention;
  std::string positions = "learned";  // learned | rope | none
  double rope_base = 10000;
  bool operator==(const ModelSection&) const = default;
};

struct TrainSection {
  uint64_t seed = 42;
  std::string device = "cpu";  // cpu | cuda | cuda:N
  // f32 | bf16: the operands of the linear layers' and the attention's GEMMs (autograd/ops.h
  // GemmInputs, docs/precision.md). bf16 runs on a GPU only; the CPU trains in f32, the reference.
  std::string precision = "f32";
  // The memory this run may use, in GiB (0: all of its device's): the run's memory estimate must
  // fit it (config_checks.cpp), and on a GPU the caching allocator holds no more than it from the
  // driver (cuda::set_memory_limit), as on a card of that size. For sharing a device, and for
  // seeing a smaller card's limits on a large one.
  double memory_limit_gib = 0;
  int64_t batch_size = 32, seq_len = 128;
  double lr = 5e-5, min_lr = 0;
  int64_t warmup_steps = 3000, max_steps = 60000;
  double weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, grad_clip = 1.0;  // clip 0: off
  int grad_accum = 1;  // micro-batches per step on each rank (docs/distributed.md)
  // How ranks sum their gradients under mpirun: ordered (in rank order, bitwise equal to one
  // process with grad_accum · ranks) | fast (MPI_Iallreduce overlapping the backward, no
  // bitwise guarantee beyond 2 ranks).
  std::string reduce = "ordered";
  // fast: the size of a bucket of gradients, in MB (2^20 bytes; docs/distributed.md). Small
  // buckets start early in the backward, large ones pay MPI's per-call latency fewer times.
  double bucket_mb = 4.0;
  // Fine-tuning: train.epochs > 0 trains that many passes over the task's training split
  // (max_steps is then derived: ceil(epochs · batches per epoch / grad_accum)); warmup_ratio > 0
  // sets warmup_steps to ceil(ratio · steps); eval_each_epoch evaluates after every epoch.
  int64_t epochs = 0;
  double warmup_ratio = 0;
  bool eval_each_epoch = false;
  int64_t eval_every = 1000, eval_batches = 50, log_every = 100, save_every = 5000;  // 0: never
  std::string run_dir = "runs/<name>";
  int threads = 0;  // 0: OpenMP's default
  // A baseline regularizer added to the training loss (docs/baselines.md): none | entropy
  // (Entropy-Reg, Jha & Reagen 2025) | eigen (Eigen-Reg, Bao et al. 2024); loss = task loss +
  // regularizer_coef · penalty; entropy_reg_gamma is Entropy-Reg's margin factor γ.
  std::string regularizer = "none";
  double regularizer_coef = 1e-5, entropy_reg_gamma = 0.2;
  bool operator==(const TrainSection&) const = default;
};

struct DataSection {
  // synthetic | text (files or a folder; blank lines separate documents) | fortune (strfile
  // format: a line "%" ends each entry) | wikitext (.raw, " = Title = " starts a document) |
  // jsonl (one JSON object per line, the text in text_field) | task (a long-range task)
  std::string kind = "synthetic";
  std::string path;                 // a file or a folder (every regular file under it, in path order)
  std::string text_field = "text";  // the field of a jsonl record that holds the text
  std::string vocab;                // a vocabulary file; "" = train one on the data
  int64_t vocab_size = 0;           // size of the vocabulary to train; 0 = model.vocab_size
  double mlm_probability = 0.15;
  std::string task;  // a long-range task name (kind = "task")
  double valid_fraction = 0.01;
  std::vector<int64_t> eval_lengths = {16, 32, 64, 128, 256, 512};  // tasks: accuracy per length
  // tasks: how the answer is given: "class" (a classification head), or written by a decoder's
  // language-model head after the example, "direct" (=> #count) or "chain" (the running counts,
  // then => #count: counting with a chain of thought), evaluated by generation (data/tasks.h).
  std::string answer = "class";
  // Benchmarks (kind = "benchmark", data.task a benchmark name, data.path its folder; see
  // docs/finetune.md): skip and count malformed rows instead of failing; use at most
  // max_examples examples of each split (0 = all); SQuAD's document stride, question and answer
  // lengths and n-best size; WikiText's sliding-window stride (0 = half of train.seq_len);
  // zero_shot: score the candidates by the LM's log-likelihood (decoders), no training.
  bool skip_bad_rows = false;
  int64_t max_examples = 0;
  int64_t doc_stride = 128, max_query_length = 64, max_answer_length = 30, n_best = 20;
  int64_t window_stride = 0;
  bool zero_shot = false;
  bool operator==(const DataSection&) const = default;
};

struct RunConfig {
  ModelSection model;
  TrainSection train;
  DataSection data;
  bool operator==(const RunConfig&) const = default;
};

// Loads `path` ("" = no file: defaults and overrides only), applies the overrides
// ("section.key=value", the value parsed as TOML; text that is not a TOML value, or any value of
// a string key that is not a TOML string, is taken as the raw string), resolves and checks it.
// `fit`: whether the run's memory estimate must fit the device it names (config_checks.cpp): yes for
// anything that runs it; no for a calculation over the config (`saobp cost`).
enum class FitCheck { yes, no };
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                      FitCheck fit = FitCheck::yes);

// load_config on TOML text; `name` stands for the file in messages and "<name>" (its stem).
RunConfig load_config_text(const std::string& text, const std::string& name,
                           const std::vector<std::string>& overrides = {});

// "section.key=VALUE", VALUE the TOML string of `value`: an override that sets a string key to
// exactly these bytes (spaces at either end, quotes, backslashes, '=' and line breaks kept, never
// read as a TOML value), for paths given on the command line. TOML holds UTF-8 text only, so a
// value that is not UTF-8 is refused, naming `option` (the command-line option it came from).
std::string exact_string_override(const std::string& key, const std::string& value, std::string_view option);

// The semantic checks of load_config on an already resolved config (throws naming the key).
void validate_config(const RunConfig& cfg);

// The fully resolved config as TOML, every key of every section, in schema order.
std::string to_toml(const RunConfig& cfg);
// FNV-1a (64-bit) of to_toml(cfg) with train.grad_accum taken as 1, train.device as "cpu" and
// without train.reduce and train.bucket_mb: the identity of a run, which --resume requires,
// independent of how its batch is split and summed and of the device it runs on.
uint64_t config_hash(const RunConfig& cfg);
// The keys config_hash covers whose values differ between a and b (as to_toml writes them), in
// schema order: why two configs hash apart.
struct ConfigDifference {
  std::string key, a, b;
};
std::vector<ConfigDifference> hashed_differences(const RunConfig& a, const RunConfig& b);
// Whether a key config_hash covers leaves what a run computes unchanged: how often it logs and
// saves, its thread count (results are bitwise the same for any count) and its folder. A run may
// be continued with these set apart (--resume; a study reusing a run of a copied folder).
bool leaves_results_unchanged(std::string_view key);

// The most OpenMP threads train.threads may ask for (libgomp fails on absurd counts).
constexpr int kMaxThreads = 1024;

// A simple upper estimate of the memory of a training run (formula above run_memory_estimate
// in config_checks.cpp); -1 where a product of sizes overflows 64 bits. load_config refuses a run whose
// estimate exceeds physical_memory_bytes(), naming the key that made it large.
struct RunMemory {
  int64_t param_bytes = 0;       // parameters, gradients and AdamW moments
  int64_t activation_bytes = 0;  // activations of one micro-batch
};
RunMemory run_memory_estimate(const RunConfig& cfg);
// This machine's physical memory in bytes (0 if unknown).
int64_t physical_memory_bytes();

// The allowed keys of a section ("model", "train", "data"), in schema order; empty if unknown.
std::vector<std::string> config_keys(const std::string& section);

// Builders for the parts. encoder_config throws unless model.family is "bert".
EncoderConfig encoder_config(const RunConfig& cfg);
// The decoder model config (throws unless model.family is "gpt2").
DecoderConfig decoder_config(const RunConfig& cfg);
Schedule schedule_of(const RunConfig& cfg);
// cfg with train.epochs turned into steps for a task of `batches_per_epoch` training batches:
// max_steps = ceil(epochs · batches / grad_accum), warmup_steps = ceil(warmup_ratio · max_steps)
// when warmup_ratio > 0 (and below max_steps). Unchanged when train.epochs is 0.
RunConfig resolve_epochs(const RunConfig& cfg, int64_t batches_per_epoch);
AdamWConfig adamw_config(const RunConfig& cfg);

}  // namespace saobp
