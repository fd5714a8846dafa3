// The semantic checks of a resolved run config, each naming its key and where the key was given,
// and the memory estimate that refuses a run too large for this machine.
#include "train/config_checks.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/checked.h"
#include "core/error.h"
#include "tensor/device_info.h"
#include "tensor/dtype.h"

namespace saobp {
namespace {

std::string list(std::initializer_list<const char*> allowed) {
  std::string s;
  for (const char* a : allowed) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Of `keys`, the one a user most likely meant: the given one with the largest value, else the
// first (an over-large product is reported at the key that made it large).
std::string blame(const ConfigOrigins& origins, std::initializer_list<std::pair<const char*, int64_t>> keys) {
  const char* best = keys.begin()->first;
  int64_t best_v = -1;
  for (auto [k, v] : keys)
    if (origins.count(k) && v > best_v) best = k, best_v = v;
  return best;
}

// Refuses a run whose sizes overflow 64-bit products or (FitCheck::yes) whose memory estimate exceeds the
// memory of the device it trains on (run_memory_estimate): this machine's physical memory, or the GPU's of
// train.device = "cuda[:N]" (where no such GPU is seen, run_device refuses the run instead), naming the key
// and the estimate in GiB.
void check_run_size(const RunConfig& c, const ConfigOrigins& origins, FitCheck fit) {
  const ModelSection& m = c.model;
  const TrainSection& t = c.train;
  const auto at = [&](const std::string& key) { return origin_of(origins, key); };
  // Blamed: the given size key with the largest value, else the largest term's usual cause.
  const std::string given = blame(origins, {{"model.layers", m.layers},
                                            {"model.hidden", m.hidden},
                                            {"model.intermediate", m.intermediate},
                                            {"model.vocab_size", m.vocab_size},
                                            {"model.max_positions", m.max_positions},
                                            {"model.heads", m.heads},
                                            {"model.bp_steps", m.attention.bp_steps},
                                            {"train.batch_size", t.batch_size},
                                            {"train.seq_len", t.seq_len},
                                            {"data.eval_lengths", 0}});
  const bool any_given = origins.count(given) > 0;
  const std::string model_key = any_given ? given : "model.layers";
  const std::string batch_key = any_given ? given : "train.batch_size";
  const RunMemory r = run_memory_estimate(c);
  const std::string sizes = fmt::format(
      "model.vocab_size={} hidden={} layers={} heads={} intermediate={} max_positions={}, "
      "train.batch_size={} "
      "seq_len={}",
      m.vocab_size, m.hidden, m.layers, m.heads, m.intermediate, m.max_positions, t.batch_size, t.seq_len);
  if (r.param_bytes < 0)
    fail("config", "{}{}: the parameter count overflows 64 bits ({})", at(model_key), model_key, sizes);
  if (r.activation_bytes < 0)
    fail("config", "{}{}: the activations of one batch overflow 64 bits ({})", at(batch_key), batch_key,
         sizes);
  if (fit == FitCheck::no) return;
  double phys = static_cast<double>(physical_memory_bytes());
  std::string where = "this machine's";
  if (t.device == "cuda" || t.device.rfind("cuda:", 0) == 0) {  // a malformed name is refused by its check
    Device d;
    try {
      d = Device::parse(t.device);
    } catch (const Error&) {
    }
    phys = 0;
    if (d.is_cuda() && cuda::available() && d.index >= 0 && d.index < cuda::device_count()) {
      phys = static_cast<double>(cuda::device_properties(d.index).total_bytes);
      where = fmt::format("{}'s", d.str());
    }
  }
  if (t.memory_limit_gib > 0 && (phys == 0 || t.memory_limit_gib * kGiB < phys)) {
    phys = t.memory_limit_gib * kGiB;
    where = "train.memory_limit_gib's";
  }
  const double params = static_cast<double>(r.param_bytes), acts = static_cast<double>(r.activation_bytes);
  if (phys > 0 && params + acts > phys) {
    // Where the attention maps are what does not fit, the tiled kernels may: say so, with their estimate.
    std::string hint;
    const AttentionSpec& a = m.attention;
    if (!a.tiled && a.variant != AttnVariant::bp_elemmul && !a.skip_sinky_heads) {
      RunConfig tiled = c;
      tiled.model.attention.tiled = true;
      const RunMemory rt = run_memory_estimate(tiled);
      if (rt.activation_bytes >= 0 && params + static_cast<double>(rt.activation_bytes) <= phys)
        hint = fmt::format(
            "; with model.tiled=true (the attention kernels in O(T) memory per head) it needs about {:.1f} "
            "GiB",
            (params + static_cast<double>(rt.activation_bytes)) / kGiB);
    }
    fail("config",
         "{}{}: this run needs about {:.1f} GiB ({:.1f} GiB of parameters, gradients and AdamW moments, "
         "{:.1f} GiB of activations of one micro-batch), more than {} {:.1f} GiB of memory ({}){}",
         at(params > acts ? model_key : batch_key), params > acts ? model_key : batch_key,
         (params + acts) / kGiB, params / kGiB, acts / kGiB, where, phys / kGiB, sizes, hint);
  }
}

}  // namespace

void check_config(const RunConfig& c, const ConfigOrigins& origins, FitCheck fit) {
  const auto at = [&](const std::string& key) { return origin_of(origins, key); };
#define CFG_CHECK(cond, key, ...) \
  if (!(cond)) fail("config", "{}{}: {}", at(key), key, fmt::format(__VA_ARGS__))
  const auto enum_check = [&](const std::string& key, const std::string& v,
                              std::initializer_list<const char*> allowed) {
    CFG_CHECK(one_of(v, allowed), key, "unknown value \"{}\" (allowed: {})", v, list(allowed));
  };
  const ModelSection& m = c.model;
  enum_check("model.family", m.family, {"bert", "gpt2"});
  enum_check("model.preset", m.preset, {"mini", "small", "medium", "custom"});
  enum_check("model.positions", m.positions, {"learned", "rope", "none"});
  for (auto [key, v] : {std::pair<const char*, int64_t>{"model.vocab_size", m.vocab_size},
                        {"model.hidden", m.hidden},
                        {"model.layers", m.layers},
                        {"model.heads", m.heads},
                        {"model.intermediate", m.intermediate},
                        {"model.max_positions", m.max_positions}})
    CFG_CHECK(v > 0, key, "must be > 0, got {}", v);
  CFG_CHECK(m.hidden % m.heads == 0, "model.heads", "{} heads do not divide model.hidden = {}", m.heads,
            m.hidden);
  CFG_CHECK(m.dropout >= 0 && m.dropout < 1, "model.dropout", "must be in [0, 1), got {}", m.dropout);
  // The attention keys: the spec's own rules, reported at the key (each field is named as its key).
  if (const auto p = m.attention.problem(m.layers)) {
    const std::string key = "model." + p->field;
    fail("config", "{}{}: {}", at(key), key, p->what);
  }
  CFG_CHECK(
      !m.attention.leaky_bp || m.family == "gpt2", "model.leaky_bp",
      "is a decoder setting (model.family = \"gpt2\"): an encoder's messages already come from every row");
  CFG_CHECK(m.rope_base > 0, "model.rope_base", "must be > 0, got {}", m.rope_base);
  CFG_CHECK(m.positions != "rope" || (m.hidden / m.heads) % 2 == 0, "model.positions",
            "rope needs an even head size, got model.hidden / model.heads = {}", m.hidden / m.heads);

  const TrainSection& t = c.train;
  CFG_CHECK(
      t.device == "cpu" || t.device == "cuda" ||
          (t.device.rfind("cuda:", 0) == 0 && t.device.size() > 5 &&
           std::all_of(t.device.begin() + 5, t.device.end(), [](char ch) { return ch >= '0' && ch <= '9'; })),
      "train.device", "unknown device \"{}\" (allowed: cpu, cuda, cuda:N)", t.device);
  enum_check("train.precision", t.precision, {"f32", "bf16"});
  CFG_CHECK(std::isfinite(t.memory_limit_gib) && t.memory_limit_gib >= 0 && t.memory_limit_gib <= 1 << 30,
            "train.memory_limit_gib",
            "must be a number of GiB in [0, 1073741824] (0: all of the device's memory), got {}",
            t.memory_limit_gib);
  CFG_CHECK(t.precision != "bf16" || t.device.rfind("cuda", 0) == 0, "train.precision",
            "bf16 runs on a GPU (train.device = \"cuda\"), not on \"{}\": the CPU trains in f32, the "
            "reference (set train.precision = \"f32\")",
            t.device);
  CFG_CHECK(t.batch_size > 0, "train.batch_size", "must be > 0, got {}", t.batch_size);
  CFG_CHECK(t.seq_len > 0, "train.seq_len", "must be > 0, got {}", t.seq_len);
  CFG_CHECK(m.positions != "learned" || t.seq_len <= m.max_positions, "train.seq_len",
            "{} exceeds model.max_positions = {}", t.seq_len, m.max_positions);
  CFG_CHECK(t.epochs >= 0, "train.epochs", "must be >= 0 (0 = train.max_steps steps), got {}", t.epochs);
  CFG_CHECK(t.warmup_ratio >= 0 && t.warmup_ratio < 1, "train.warmup_ratio", "must be in [0, 1), got {}",
            t.warmup_ratio);
  try {
    // With train.epochs the step count comes from the data (resolve_epochs); check the rest.
    Schedule s = schedule_of(c);
    if (t.epochs > 0) s.warmup_steps = 0, s.max_steps = 1;
    validate_schedule(s);
  } catch (const Error& e) {  // "[schedule] train.max_steps ...": prefix the key's origin
    std::string msg = e.what();
    msg = msg.substr(msg.find("] ") + 2);
    const std::string key = msg.substr(0, msg.find(' '));
    fail("config", "{}{}", at(key), msg);
  }
  CFG_CHECK(t.weight_decay >= 0, "train.weight_decay", "must be >= 0, got {}", t.weight_decay);
  CFG_CHECK(t.beta1 >= 0 && t.beta1 < 1, "train.beta1", "must be in [0, 1), got {}", t.beta1);
  CFG_CHECK(t.beta2 >= 0 && t.beta2 < 1, "train.beta2", "must be in [0, 1), got {}", t.beta2);
  CFG_CHECK(t.eps > 0, "train.eps", "must be > 0, got {}", t.eps);
  CFG_CHECK(t.grad_clip >= 0, "train.grad_clip", "must be >= 0 (0 = no clipping), got {}", t.grad_clip);
  CFG_CHECK(t.grad_accum >= 1, "train.grad_accum", "must be >= 1, got {}", t.grad_accum);
  enum_check("train.reduce", t.reduce, {"ordered", "fast"});
  CFG_CHECK(t.bucket_mb > 0 && t.bucket_mb <= 4096, "train.bucket_mb", "must be in (0, 4096], got {}",
            t.bucket_mb);
  // An evaluation over no batches would report loss 0 and perplexity 0 (train.eval_every = 0
  // turns the periodic evaluation off; the final one always runs).
  CFG_CHECK(t.eval_batches >= 1, "train.eval_batches", "must be >= 1, got {}", t.eval_batches);
  for (auto [key, v] : {std::pair<const char*, int64_t>{"train.eval_every", t.eval_every},
                        {"train.log_every", t.log_every},
                        {"train.save_every", t.save_every}})
    CFG_CHECK(v >= 0, key, "must be >= 0, got {}", v);
  CFG_CHECK(!t.run_dir.empty(), "train.run_dir", "must not be empty");
  CFG_CHECK(t.threads >= 0 && t.threads <= kMaxThreads, "train.threads",
            "must be in [0, {}] (0 = OpenMP's default), got {}", kMaxThreads, t.threads);
  // The baseline regularizers (docs/baselines.md).
  enum_check("train.regularizer", t.regularizer, {"none", "entropy", "eigen"});
  CFG_CHECK(std::isfinite(t.regularizer_coef) && t.regularizer_coef >= 0, "train.regularizer_coef",
            "must be a finite number >= 0, got {}", t.regularizer_coef);
  CFG_CHECK(std::isfinite(t.entropy_reg_gamma) && t.entropy_reg_gamma >= 0, "train.entropy_reg_gamma",
            "must be a finite number >= 0, got {}", t.entropy_reg_gamma);

  const DataSection& d = c.data;
  enum_check("data.kind", d.kind, {"synthetic", "text", "fortune", "wikitext", "jsonl", "task", "benchmark"});
  CFG_CHECK(d.kind == "synthetic" || d.kind == "task" || !d.path.empty(), "data.path",
            "must name a corpus file or folder when data.kind = \"{}\"", d.kind);
  CFG_CHECK(d.kind != "benchmark" || !d.task.empty(), "data.task",
            "must name a benchmark (glue/sst2, squad/v1.1, ...) when data.kind = \"benchmark\"");
  CFG_CHECK(d.max_examples >= 0, "data.max_examples", "must be >= 0 (0 = all), got {}", d.max_examples);
  for (auto [key, v] : {std::pair<const char*, int64_t>{"data.doc_stride", d.doc_stride},
                        {"data.max_query_length", d.max_query_length},
                        {"data.max_answer_length", d.max_answer_length},
                        {"data.n_best", d.n_best}})
    CFG_CHECK(v > 0, key, "must be > 0, got {}", v);
  CFG_CHECK(d.window_stride >= 0, "data.window_stride", "must be >= 0 (0 = train.seq_len / 2), got {}",
            d.window_stride);
  CFG_CHECK(!d.eval_lengths.empty() &&
                std::all_of(d.eval_lengths.begin(), d.eval_lengths.end(), [](int64_t v) { return v >= 2; }),
            "data.eval_lengths", "must be a non-empty array of lengths >= 2");
  CFG_CHECK(d.kind != "task" || !d.task.empty(), "data.task", "must name a task when data.kind = \"task\"");
  enum_check("data.answer", d.answer, {"class", "direct", "chain"});
  CFG_CHECK(d.answer == "class" || (d.kind == "task" && m.family == "gpt2"), "data.answer",
            "\"{}\" is written by a decoder after a task's example: it needs data.kind = \"task\" and "
            "model.family = \"gpt2\" (got \"{}\" and \"{}\")",
            d.answer, d.kind, m.family);
  CFG_CHECK(d.vocab_size > 0 && d.vocab_size <= m.vocab_size, "data.vocab_size",
            "must be in [1, model.vocab_size = {}], got {}", m.vocab_size, d.vocab_size);
  CFG_CHECK(d.mlm_probability > 0 && d.mlm_probability < 1, "data.mlm_probability",
            "must be in (0, 1), got {}", d.mlm_probability);
  CFG_CHECK(d.valid_fraction >= 0 && d.valid_fraction < 1, "data.valid_fraction", "must be in [0, 1), got {}",
            d.valid_fraction);
#undef CFG_CHECK
  check_run_size(c, origins, fit);
}

void validate_config(const RunConfig& cfg) { check_config(cfg, {}); }

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return checked_mul(pages, page).value_or(std::numeric_limits<int64_t>::max());
}

// Parameters P (f32) of either family, an upper bound: embeddings (V + positions) x H, per layer
// the attention projections 4 H^2 + 4 H, the MLP 2 H I + I + H and two LayerNorms 4 H, and the
// embedding LayerNorm, a pooler or head transform and the output bias, H^2 + 7 H + V. Training keeps the
// parameter, its gradient and two AdamW moments: 16 P bytes. Activations of one micro-batch of N = B x T
// tokens, kept for the backward pass: per layer and token about 16 H + 4 I values (projections, residuals,
// norms, MLP) and K NH T attention values, the maps each layer keeps for its backward (K = 1 for original:
// B; 2 for BP-ElemMul: A and B; 1 + S for S BP steps: the beliefs b^0 .. b^S), plus 3 V per token for the
// logits, their softmax and gradient; and once, the maps the attention works in for one layer at a time:
// on a GPU 4 + S maps of B NH T x T (s, dB, ds, dL, dP, the bf16 copies, a further step's dL), on the CPU
// 10 T x T for each thread that runs a head (the forward's and the backward's Scratch of
// src/attention/cpu/tile.h, kept by the thread), the larger of the two:
//   4 (N (L (16 H + 4 I + K NH T) + 3 V) + max((4 + S) B NH, 10 min(threads, B NH)) T^2) bytes.
// The tiled kernels (model.tiled) keep 2 + 2 S numbers per head and token instead of maps, and work in
// tiles. T is train.seq_len, or the longest of data.eval_lengths for a long-range task. Against measured
// peaks (tests/train/test_config.cpp): GPT2-Mini bp_high at T = 16384, batch 1, 53.78 GiB on an H200,
// estimated 63.5 GiB.
RunMemory run_memory_estimate(const RunConfig& cfg) {
  const ModelSection& m = cfg.model;
  int64_t T = cfg.train.seq_len;
  if (cfg.data.kind == "task")
    for (int64_t l : cfg.data.eval_lengths) T = std::max(T, l);
  const int64_t H = m.hidden, I = m.intermediate, L = m.layers, V = m.vocab_size, NH = m.heads;
  // Every product and sum checked: an overflow anywhere propagates as nullopt, reported as -1.
  using I64 = std::optional<int64_t>;
  const auto fold = [](std::initializer_list<I64> terms, int64_t init, auto op) -> I64 {
    I64 acc = init;
    for (const I64& x : terms) acc = acc && x ? op(*acc, *x) : std::nullopt;
    return acc;
  };
  const auto mul = [&](std::initializer_list<I64> f) { return fold(f, 1, checked_mul); };
  const auto add = [&](std::initializer_list<I64> t) { return fold(t, 0, checked_add); };
  const I64 per_layer_params = add({mul({4, H, H}), mul({2, H, I}), mul({9, H}), I});
  const I64 params =
      add({mul({add({V, m.max_positions}), H}), mul({L, per_layer_params}), mul({H, H}), mul({7, H}), V});
  // Per token and layer: the attention maps kept for the backward, a row of T per head each, or
  // with the tiled kernels (model.tiled) a few numbers per head; and once, the working maps.
  const int64_t S = m.attention.bp_steps, B = cfg.train.batch_size;
  const AttnVariant variant = m.attention.variant;
  const int64_t kept = variant == AttnVariant::original ? 1 : variant == AttnVariant::bp_elemmul ? 2 : S + 1;
  const I64 attn = m.attention.tiled ? mul({add({2, mul({2, S})}), NH}) : mul({kept, NH, T});
  const int64_t threads = cfg.train.threads > 0 ? cfg.train.threads : omp_get_max_threads();
  const I64 busy = fold({mul({B, NH}), I64{threads}}, std::numeric_limits<int64_t>::max(),
                        [](int64_t a, int64_t b) { return I64{std::min(a, b)}; });
  const I64 work_maps = m.attention.tiled ? I64{0}
                                          : fold({mul({add({4, S}), B, NH}), mul({10, busy})}, 0,
                                                 [](int64_t a, int64_t b) { return I64{std::max(a, b)}; });
  const I64 per_token = add({mul({L, add({mul({16, H}), mul({4, I}), attn})}), mul({3, V})});
  RunMemory r;
  r.param_bytes = mul({16, params}).value_or(-1);
  r.activation_bytes = mul({4, add({mul({B, T, per_token}), mul({work_maps, T, T})})}).value_or(-1);
  return r;
}

}  // namespace saobp
