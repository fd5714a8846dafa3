// Pretrained model folders: the config (ours from config.toml, Hugging Face's from config.json)
// and the weights, looked up by name with the fallbacks of pretrained.h.
//
// config.json keys are read as Hugging Face reads them: an absent key takes BertConfig's /
// GPT2Config's default, and keys that change nothing in our models are ignored (architectures,
// initializer_range, pad/bos/eos ids, torch_dtype, transformers_version, summary_*, n_ctx, ...).
// Dropout: our models have one rate, taken from hidden_dropout_prob / resid_pdrop; the attention
// dropout (attention_probs_dropout_prob, attn_pdrop) and GPT-2's embd_pdrop are not separate
// settings here and are ignored. Every key whose value would make the model compute something we
// do not implement is checked, and an error names the file, the key and the value.
#include "train/pretrained.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "model/positions.h"
#include "model/safetensors.h"
#include "train/checkpoint.h"

namespace saobp {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// ---- config.json ------------------------------------------------------------------------------

// Typed access to one config.json (core/json.h's JsonFields), with Hugging Face's default for an
// absent key.
struct HfKeys : JsonFields {
  HfKeys(const json& cfg, const std::string& file) : JsonFields(cfg, file, "pretrained") {}

  // The key must hold `want` (its default when absent); `what` says what we implement instead.
  void require_string(const char* key, const std::string& dflt, std::initializer_list<const char*> allowed,
                      const char* what) const {
    const std::string v = string(key, dflt);
    for (const char* a : allowed)
      if (v == a) return;
    fail("pretrained", "{}: {} is \"{}\", which saobp does not implement ({})", where(), key, v, what);
  }
  void require_number(const char* key, double want, const char* what) const {
    const double v = number(key, want);
    if (std::abs(v - want) > 1e-9 * std::abs(want))
      fail("pretrained", "{}: {} is {}, which saobp does not implement ({})", where(), key, find(key)->dump(),
           what);
  }
  void require_integer(const char* key, int64_t want, const char* what) const {
    if (integer(key, want) != want)
      fail("pretrained", "{}: {} is {}, which saobp does not implement ({})", where(), key, find(key)->dump(),
           what);
  }
  void require_bool(const char* key, bool want, const char* what) const {
    if (boolean(key, want) != want)
      fail("pretrained", "{}: {} is {}, which saobp does not implement ({})", where(), key, find(key)->dump(),
           what);
  }
};

// Our fields (train/task.cpp's saobp_config_fields), honoured when present. saobp_task (the task
// a checkpoint was trained on, written by the task heads) and saobp_tokenizer_fingerprint (the
// tokenizer a checkpoint was saved with, checkpoint.cpp) say nothing about the body: ignored, so a
// checkpoint's own config.json reads as a Hugging Face folder.
void read_saobp_fields(const HfKeys& k, ModelSection& m) {
  static const std::set<std::string> known = {"saobp_attention",
                                              "saobp_lambda",
                                              "saobp_layer_lambdas",
                                              "saobp_learnable_lambda",
                                              "saobp_bp_steps",
                                              "saobp_positions",
                                              "saobp_rope_base",
                                              "saobp_skip_sinky_heads",
                                              "saobp_skip_peak_tau",
                                              "saobp_skip_head_fraction",
                                              "saobp_leaky_bp",
                                              "saobp_task",
                                              "saobp_tokenizer_fingerprint"};
  for (const auto& [key, v] : k.value().items()) {
    if (key.rfind("saobp_", 0) != 0 || known.count(key)) continue;
    std::string allowed;
    for (const std::string& n : known) allowed += (allowed.empty() ? "" : ", ") + n;
    fail("pretrained", "{}: unknown key {} = {} (saobp reads {})", k.where(), key, json_excerpt(v), allowed);
  }
  if (const json* v = k.find("saobp_attention")) {
    const std::string name = k.string("saobp_attention", "");
    try {
      m.attention.variant = parse_variant(name);
    } catch (const Error&) {
      fail("pretrained", "{}: saobp_attention is {}; allowed: original, bp_high, bp_low, bp_elemmul",
           k.where(), json_excerpt(*v));
    }
  }
  m.attention.lambda = k.number("saobp_lambda", m.attention.lambda);
  if (const json* v = k.find("saobp_layer_lambdas")) {
    if (!v->is_array()) k.type_error("saobp_layer_lambdas", "an array of numbers", *v);
    m.attention.layer_lambdas.clear();
    for (const json& x : *v) {
      if (!x.is_number()) k.type_error("saobp_layer_lambdas", "an array of numbers", *v);
      m.attention.layer_lambdas.push_back(x.get<double>());
    }
  }
  m.attention.learnable_lambda = k.boolean("saobp_learnable_lambda", m.attention.learnable_lambda);
  const int64_t steps = k.integer("saobp_bp_steps", m.attention.bp_steps);
  if (steps < 1 || steps > std::numeric_limits<int>::max())
    fail("pretrained", "{}: saobp_bp_steps is {}; expected an integer >= 1", k.where(), steps);
  m.attention.bp_steps = static_cast<int>(steps);
  m.positions = k.string("saobp_positions", m.positions);
  if (m.positions != "learned" && m.positions != "rope" && m.positions != "none")
    fail("pretrained", "{}: saobp_positions is \"{}\"; allowed: learned, rope, none", k.where(), m.positions);
  m.rope_base = k.number("saobp_rope_base", m.rope_base);
  m.attention.skip_sinky_heads = k.boolean("saobp_skip_sinky_heads", m.attention.skip_sinky_heads);
  m.attention.skip_peak_tau = k.number("saobp_skip_peak_tau", m.attention.skip_peak_tau);
  m.attention.skip_head_fraction = k.number("saobp_skip_head_fraction", m.attention.skip_head_fraction);
  m.attention.leaky_bp = k.boolean("saobp_leaky_bp", m.attention.leaky_bp);
}

// The config.json key a model.* key comes from, for validation errors.
std::string hf_key_of(const std::string& family, const std::string& model_key) {
  static const std::map<std::string, std::pair<const char*, const char*>> keys = {
      {"model.vocab_size", {"vocab_size", "vocab_size"}},
      {"model.hidden", {"hidden_size", "n_embd"}},
      {"model.layers", {"num_hidden_layers", "n_layer"}},
      {"model.heads", {"num_attention_heads", "n_head"}},
      {"model.intermediate", {"intermediate_size", "n_inner"}},
      {"model.max_positions", {"max_position_embeddings", "n_positions"}},
      {"model.dropout", {"hidden_dropout_prob", "resid_pdrop"}},
      {"model.attention", {"saobp_attention", "saobp_attention"}},
      {"model.lambda", {"saobp_lambda", "saobp_lambda"}},
      {"model.layer_lambdas", {"saobp_layer_lambdas", "saobp_layer_lambdas"}},
      {"model.learnable_lambda", {"saobp_learnable_lambda", "saobp_learnable_lambda"}},
      {"model.bp_steps", {"saobp_bp_steps", "saobp_bp_steps"}},
      {"model.positions", {"saobp_positions", "saobp_positions"}},
      {"model.rope_base", {"saobp_rope_base", "saobp_rope_base"}},
  };
  const auto it = keys.find(model_key);
  if (it == keys.end()) return "";
  return family == "gpt2" ? it->second.second : it->second.first;
}

// validate_config on a run config holding `m`, its errors restated for the config.json.
void validate_section(const ModelSection& m, const std::string& file) {
  RunConfig rc;
  rc.model = m;
  rc.train.seq_len = 1;  // only the model section is being checked
  rc.data.vocab_size = m.vocab_size;
  try {
    validate_config(rc);
  } catch (const Error& e) {
    std::string msg = e.what();  // "[config] model.heads: 3 heads do not divide ..."
    if (msg.rfind('[', 0) == 0 && msg.find("] ") != std::string::npos) msg = msg.substr(msg.find("] ") + 2);
    const size_t colon = msg.find(": ");
    const std::string model_key = colon == std::string::npos ? "" : msg.substr(0, colon);
    const std::string key = hf_key_of(m.family, model_key);
    if (key.empty()) fail("pretrained", "{}: {}", file, msg);
    fail("pretrained", "{}: {}: {} (saobp's {})", file, key, msg.substr(colon + 2), model_key);
  }
}

// ---- weights ----------------------------------------------------------------------------------

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file names to try for model tensor `name`, in order (pretrained.h).
std::vector<std::string> candidates(const std::string& name) {
  std::vector<std::string> out = {name};
  for (const char* prefix : {"bert.", "transformer."})
    if (starts_with(name, prefix)) out.push_back(name.substr(std::string(prefix).size()));
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string c = out[i];  // a copy: push_back below may reallocate
    if (c.find("LayerNorm.") == std::string::npos) continue;
    if (ends_with(c, ".weight")) out.push_back(c.substr(0, c.size() - 7) + ".gamma");
    if (ends_with(c, ".bias")) out.push_back(c.substr(0, c.size() - 5) + ".beta");
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return s;
}

// "a, b, c" or "a, b, c, ... and 7 more".
std::string abbreviated(const std::vector<std::string>& v, size_t show = 6) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < show; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > show) s += fmt::format(", ... and {} more", v.size() - show);
  return s;
}

}  // namespace

// ---- read_pretrained --------------------------------------------------------------------------

ModelSection model_section_from_hf(const json& cfg, const std::string& file) {
  if (!cfg.is_object()) fail("pretrained", "{}: not a JSON object (it is {})", file, cfg.type_name());
  const HfKeys k{cfg, file};
  if (!k.find("model_type")) fail("pretrained", "{}: no model_type (saobp reads bert and gpt2)", file);
  const std::string type = k.string("model_type", "");
  ModelSection m;
  m.preset = "custom";
  if (type == "bert") {
    m.family = "bert";
    m.vocab_size = k.integer("vocab_size", 30522);
    m.hidden = k.integer("hidden_size", 768);
    m.layers = k.integer("num_hidden_layers", 12);
    m.heads = k.integer("num_attention_heads", 12);
    m.intermediate = k.integer("intermediate_size", 3072);
    m.max_positions = k.integer("max_position_embeddings", 512);
    m.dropout = k.number("hidden_dropout_prob", 0.1);
    k.require_string("hidden_act", "gelu", {"gelu"}, "BERT's GELU is the exact erf form, \"gelu\"");
    k.require_number("layer_norm_eps", 1e-12, "BERT's LayerNorm eps is 1e-12");
    k.require_integer("type_vocab_size", 2, "BERT has 2 token types");
    k.require_string("position_embedding_type", "absolute", {"absolute"},
                     "learned absolute positions, or saobp_positions");
    k.require_bool("is_decoder", false, "BERT is a bidirectional encoder");
    k.require_bool("add_cross_attention", false, "no cross-attention");
  } else if (type == "gpt2") {
    m.family = "gpt2";
    m.vocab_size = k.integer("vocab_size", 50257);
    m.max_positions = k.integer("n_positions", 1024);
    m.hidden = k.integer("n_embd", 768);
    m.layers = k.integer("n_layer", 12);
    m.heads = k.integer("n_head", 12);
    const json* inner = k.find("n_inner");
    m.intermediate = inner && !inner->is_null() ? k.integer("n_inner", 0) : 4 * m.hidden;
    m.dropout = k.number("resid_pdrop", 0.1);
    k.require_string("activation_function", "gelu_new", {"gelu_new", "gelu_pytorch_tanh"},
                     "GPT-2's GELU is the tanh approximation, \"gelu_new\"");
    k.require_number("layer_norm_epsilon", 1e-5, "GPT-2's LayerNorm eps is 1e-5");
    k.require_bool("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head size)");
    k.require_bool("scale_attn_by_inverse_layer_idx", false, "no per-layer score scaling");
    k.require_bool("add_cross_attention", false, "no cross-attention");
  } else {
    fail("pretrained", "{}: model_type is \"{}\"; saobp reads bert and gpt2", file, type);
  }
  k.require_bool("tie_word_embeddings", true, "the LM head is tied to the word embeddings");
  read_saobp_fields(k, m);
  validate_section(m, file);
  return m;
}

PretrainedInfo read_pretrained(const std::string& dir) {
  if (!fs::is_directory(dir))
    fail("pretrained", "{}: not a folder (want a saobp checkpoint or a Hugging Face model folder)", dir);
  PretrainedInfo info;
  info.dir = dir;
  const fs::path root(dir);
  const std::string toml = (root / "config.toml").string(), js = (root / "config.json").string();
  if (fs::exists(js)) {
    try {
      info.hf_config = read_json_file(js, "pretrained");
    } catch (const json::exception& e) {
      fail("pretrained", "{}: not valid JSON ({})", js, e.what());
    }
    if (info.hf_config.is_object()) {
      const auto a = info.hf_config.find("architectures");
      if (a != info.hf_config.end() && a->is_array() && !a->empty() && a->front().is_string())
        info.architecture = a->front().get<std::string>();
    }
  }
  if (fs::exists(toml)) {
    info.format = "saobp";
    info.model = load_config(toml).model;
  } else if (fs::exists(js)) {
    info.format = "hf";
    info.model = model_section_from_hf(info.hf_config, js);
  } else {
    fail("pretrained",
         "{}: no config.toml or config.json; not a saobp checkpoint or Hugging Face model folder", dir);
  }
  info.has_tokenizer = has_tokenizer_files(root.string());
  return info;
}

// ---- init_from_pretrained ---------------------------------------------------------------------

InitReport init_from_pretrained(const std::string& dir, ParamStore& params,
                                const std::vector<std::string>& head_prefixes) {
  const fs::path path = fs::path(dir) / "model.safetensors";
  if (!fs::exists(path)) {
    const bool bin = fs::exists(fs::path(dir) / "pytorch_model.bin");
    fail("pretrained", "{}: no such file{}", path.string(),
         bin ? "; only safetensors weights are read: convert pytorch_model.bin with "
               "safetensors.torch.save_file(torch.load(...)) into model.safetensors"
             : "");
  }
  verify_checksums(dir, {"optimizer.safetensors"});  // our checkpoints; Hugging Face folders have none
  const SafetensorsFile f = load_safetensors_widened(path.string());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < f.tensors.size(); ++i) index[f.tensors[i].name] = i;

  InitReport r;
  r.source = path.string();
  std::vector<std::pair<const Var*, size_t>> plan;  // model tensor <- file tensor
  std::vector<bool> used(f.tensors.size(), false);
  std::vector<std::string> missing;
  std::vector<std::string> missing_tried;
  for (const Var& p : params.all()) {
    const std::string& name = p.name();
    const std::vector<std::string> tried = candidates(name);
    const auto hit =
        std::find_if(tried.begin(), tried.end(), [&](const std::string& c) { return index.count(c); });
    if (hit == tried.end()) {
      const bool head = std::any_of(head_prefixes.begin(), head_prefixes.end(),
                                    [&](const std::string& h) { return starts_with(name, h); });
      // A learnable λ and Entropy-Reg's θ are ours: HF folders do not have them, and they start
      // from the config (λ) or the regularizer's initial threshold (θ).
      if (head || ends_with(name, "saobp_lambda_rho") || ends_with(name, "saobp_entropy_theta")) {
        r.initialized.push_back(name);
      } else {
        missing.push_back(name);
        if (missing_tried.empty()) missing_tried = tried;
      }
      continue;
    }
    const size_t i = index.at(*hit);
    const Tensor& src = f.tensors[i].tensor;
    if (src.shape() != p.data().shape())
      fail("pretrained", "{}: tensor '{}' is {} in the file but {} in the model ('{}')", r.source, *hit,
           shape_str(src.shape()), shape_str(p.data().shape()), name);
    if (!is_floating(src.dtype()))
      fail("pretrained", "{}: tensor '{}' is {} in the file; the model's '{}' is {}", r.source, *hit,
           dtype_name(src.dtype()), name, dtype_name(p.data().dtype()));
    check_finite(src, r.source, *hit);
    plan.emplace_back(&p, i);
    used[i] = true;
    r.loaded.push_back(name);
    if (*hit != name) r.renamed[name] = *hit;
  }
  if (!missing.empty())
    fail("pretrained", "{}: tensor '{}' is missing (tried {}){}; the file holds {} tensors, e.g. {}",
         r.source, missing.front(), quoted_list(missing_tried),
         missing.size() > 1
             ? fmt::format(", and {} more of the model's {}", missing.size() - 1, params.all().size())
             : std::string(),
         f.tensors.size(), quoted_list([&] {
           std::vector<std::string> e;
           for (size_t i = 0; i < f.tensors.size() && i < 4; ++i) e.push_back(f.tensors[i].name);
           return e;
         }()));
  // Every check passed: only now are the parameters written.
  for (const auto& [p, i] : plan) {
    Tensor d = p->data();
    d.copy_from(f.tensors[i].tensor);  // converts the dtype (f64 -> f32, ...) and the device
  }
  for (size_t i = 0; i < f.tensors.size(); ++i)
    if (!used[i]) r.unused.push_back(f.tensors[i].name);
  return r;
}

json InitReport::to_json() const {
  return {{"source", source},
          {"loaded", loaded},
          {"initialized", initialized},
          {"unused", unused},
          {"renamed", renamed}};
}

std::string InitReport::summary() const {
  std::string s = fmt::format("init from {}: {} tensors loaded ({} renamed), {} initialized, {} unused",
                              source, loaded.size(), renamed.size(), initialized.size(), unused.size());
  if (!initialized.empty()) s += "\n  initialized: " + abbreviated(initialized);
  if (!unused.empty()) s += "\n  unused: " + abbreviated(unused);
  if (!renamed.empty()) {
    const auto& [model, file] = *renamed.begin();
    s += fmt::format("\n  renamed: e.g. {} <- {}", model, file);
  }
  return s;
}

}  // namespace saobp
