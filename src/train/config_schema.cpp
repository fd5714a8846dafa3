// The run config's schema and reader: each key is one row of schema() (section, key, member
// pointer); reading and writing are overloads on the member's type, so adding a key is one line
// here and one in config.h. load_config reads TOML with overrides and resolves it (defaults,
// family, preset, the keys given, derived values), then config_checks.cpp checks it; to_toml and
// config_hash write it back.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "data/unicode.h"
#include "model/sizes.h"
#include "train/config.h"
#include "train/config_checks.h"

namespace saobp {
namespace {

// ---- values: reading a toml::node into a typed member, writing a member as TOML text -------

const char* node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

// Shortest text that reads back to the same double, always a TOML float ("1.0", not "1").
std::string toml_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// What was found, for type errors: the type and a short rendering of scalars.
std::string found(const toml::node& n) {
  std::string what = node_type_name(n);
  if (auto s = n.value_exact<std::string>()) return what + " " + toml_string(*s);
  if (auto i = n.value_exact<int64_t>()) return what + " " + std::to_string(*i);
  if (auto d = n.value_exact<double>()) return what + " " + toml_float(*d);
  if (auto b = n.value_exact<bool>()) return what + (*b ? " true" : " false");
  return what;
}

struct Ctx {
  std::string key;    // "model.hidden"
  std::string where;  // "file.toml:3:1: " or "override 'model.hidden=64': "
};

[[noreturn]] void type_error(const Ctx& c, const char* expected, const toml::node& n) {
  fail("config", "{}{}: expected {}, found {}", c.where, c.key, expected, found(n));
}

int64_t read_int(const toml::node& n, const Ctx& c, const char* expected = "an integer") {
  if (auto i = n.value_exact<int64_t>()) return *i;
  type_error(c, expected, n);
}

void read_value(const toml::node& n, int64_t& out, const Ctx& c) { out = read_int(n, c); }
void read_value(const toml::node& n, int& out, const Ctx& c) {
  const int64_t v = read_int(n, c);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail("config", "{}{}: {} is out of range for a 32-bit integer", c.where, c.key, v);
  out = static_cast<int>(v);
}
void read_value(const toml::node& n, uint64_t& out, const Ctx& c) {
  const int64_t v = read_int(n, c, "a non-negative integer");
  if (v < 0) fail("config", "{}{}: must be >= 0, got {}", c.where, c.key, v);
  out = static_cast<uint64_t>(v);
}
double read_number(const toml::node& n, const Ctx& c, const char* expected) {
  if (auto d = n.value_exact<double>()) return *d;
  if (auto i = n.value_exact<int64_t>()) return static_cast<double>(*i);
  type_error(c, expected, n);
}
void read_value(const toml::node& n, double& out, const Ctx& c) { out = read_number(n, c, "a number"); }
void read_value(const toml::node& n, bool& out, const Ctx& c) {
  if (auto b = n.value_exact<bool>())
    out = *b;
  else
    type_error(c, "a boolean (true or false)", n);
}
void read_value(const toml::node& n, std::string& out, const Ctx& c) {
  if (auto s = n.value_exact<std::string>())
    out = *s;
  else
    type_error(c, "a string", n);
}
void read_value(const toml::node& n, std::vector<double>& out, const Ctx& c) {
  const toml::array* a = n.as_array();
  if (!a) type_error(c, "an array of numbers", n);
  out.clear();
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    if (!e.is_number())
      fail("config", "{}{}: expected an array of numbers, element {} is {}", c.where, c.key, i, found(e));
    out.push_back(read_number(e, c, "a number"));
  }
}
void read_value(const toml::node& n, std::vector<int64_t>& out, const Ctx& c) {
  const toml::array* a = n.as_array();
  if (!a) type_error(c, "an array of integers", n);
  out.clear();
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    if (!e.is_integer())
      fail("config", "{}{}: expected an array of integers, element {} is {}", c.where, c.key, i, found(e));
    out.push_back(read_int(e, c));
  }
}
void read_value(const toml::node& n, AttnVariant& out, const Ctx& c) {
  std::string s;
  read_value(n, s, c);
  try {
    out = parse_variant(s);
  } catch (const Error& e) {  // "[attention] unknown variant 'x' (allowed: ...)"
    std::string msg = e.what();
    if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
    fail("config", "{}{}: {}", c.where, c.key, msg);
  }
}

std::string write_value(int64_t v) { return std::to_string(v); }
std::string write_value(int v) { return std::to_string(v); }
std::string write_value(uint64_t v) { return std::to_string(v); }
std::string write_value(double v) { return toml_float(v); }
std::string write_value(bool v) { return v ? "true" : "false"; }
std::string write_value(const std::string& v) { return toml_string(v); }
std::string write_value(AttnVariant v) { return toml_string(variant_name(v)); }
std::string write_value(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
std::string write_value(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + toml_float(v[i]);
  return s + "]";
}

template <class T>
constexpr bool is_string_key = std::is_same_v<T, std::string> || std::is_same_v<T, AttnVariant>;

// ---- the schema -----------------------------------------------------------------------------

struct Field {
  const char* section;
  const char* key;
  bool string_typed;  // overrides of string keys keep their raw text when it is not a TOML string
  std::function<void(RunConfig&, const toml::node&, const Ctx&)> read;
  std::function<std::string(const RunConfig&)> write;
};

// The row of a key whose value member(config) is (a reference to a T of a RunConfig).
template <class T, class Member>
Field make_field(const char* section, const char* key, Member member) {
  return {section, key, is_string_key<T>,
          [=](RunConfig& c, const toml::node& n, const Ctx& ctx) { read_value(n, member(c), ctx); },
          [=](const RunConfig& c) { return write_value(member(c)); }};
}
template <class S, class T>
Field field(const char* section, const char* key, S RunConfig::*sec, T S::*mem) {
  return make_field<T>(
      section, key, [=](auto& c) -> auto& { return (c.*sec).*mem; });
}
// A key of [model] held by the model's AttentionSpec.
template <class T>
Field attention_field(const char* key, T AttentionSpec::*mem) {
  return make_field<T>(
      "model", key, [=](auto& c) -> auto& { return c.model.attention.*mem; });
}

const std::vector<Field>& schema() {
  using R = RunConfig;
  using M = ModelSection;
  using T = TrainSection;
  using D = DataSection;
  using A = AttentionSpec;
  static const std::vector<Field> f = {
      field("model", "family", &R::model, &M::family),
      field("model", "preset", &R::model, &M::preset),
      field("model", "vocab_size", &R::model, &M::vocab_size),
      field("model", "hidden", &R::model, &M::hidden),
      field("model", "layers", &R::model, &M::layers),
      field("model", "heads", &R::model, &M::heads),
      field("model", "intermediate", &R::model, &M::intermediate),
      field("model", "max_positions", &R::model, &M::max_positions),
      field("model", "dropout", &R::model, &M::dropout),
      attention_field("attention", &A::variant),
      attention_field("lambda", &A::lambda),
      attention_field("layer_lambdas", &A::layer_lambdas),
      attention_field("learnable_lambda", &A::learnable_lambda),
      attention_field("bp_steps", &A::bp_steps),
      field("model", "positions", &R::model, &M::positions),
      field("model", "rope_base", &R::model, &M::rope_base),
      attention_field("skip_sinky_heads", &A::skip_sinky_heads),
      attention_field("skip_peak_tau", &A::skip_peak_tau),
      attention_field("skip_head_fraction", &A::skip_head_fraction),
      attention_field("leaky_bp", &A::leaky_bp),
      attention_field("tiled", &A::tiled),
      field("train", "seed", &R::train, &T::seed),
      field("train", "device", &R::train, &T::device),
      field("train", "precision", &R::train, &T::precision),
      field("train", "memory_limit_gib", &R::train, &T::memory_limit_gib),
      field("train", "batch_size", &R::train, &T::batch_size),
      field("train", "seq_len", &R::train, &T::seq_len),
      field("train", "lr", &R::train, &T::lr),
      field("train", "min_lr", &R::train, &T::min_lr),
      field("train", "warmup_steps", &R::train, &T::warmup_steps),
      field("train", "max_steps", &R::train, &T::max_steps),
      field("train", "weight_decay", &R::train, &T::weight_decay),
      field("train", "beta1", &R::train, &T::beta1),
      field("train", "beta2", &R::train, &T::beta2),
      field("train", "eps", &R::train, &T::eps),
      field("train", "grad_clip", &R::train, &T::grad_clip),
      field("train", "grad_accum", &R::train, &T::grad_accum),
      field("train", "reduce", &R::train, &T::reduce),
      field("train", "bucket_mb", &R::train, &T::bucket_mb),
      field("train", "epochs", &R::train, &T::epochs),
      field("train", "warmup_ratio", &R::train, &T::warmup_ratio),
      field("train", "eval_each_epoch", &R::train, &T::eval_each_epoch),
      field("train", "eval_every", &R::train, &T::eval_every),
      field("train", "eval_batches", &R::train, &T::eval_batches),
      field("train", "log_every", &R::train, &T::log_every),
      field("train", "save_every", &R::train, &T::save_every),
      field("train", "run_dir", &R::train, &T::run_dir),
      field("train", "threads", &R::train, &T::threads),
      field("train", "regularizer", &R::train, &T::regularizer),
      field("train", "regularizer_coef", &R::train, &T::regularizer_coef),
      field("train", "entropy_reg_gamma", &R::train, &T::entropy_reg_gamma),
      field("data", "kind", &R::data, &D::kind),
      field("data", "path", &R::data, &D::path),
      field("data", "text_field", &R::data, &D::text_field),
      field("data", "vocab", &R::data, &D::vocab),
      field("data", "vocab_size", &R::data, &D::vocab_size),
      field("data", "mlm_probability", &R::data, &D::mlm_probability),
      field("data", "task", &R::data, &D::task),
      field("data", "valid_fraction", &R::data, &D::valid_fraction),
      field("data", "eval_lengths", &R::data, &D::eval_lengths),
      field("data", "answer", &R::data, &D::answer),
      field("data", "skip_bad_rows", &R::data, &D::skip_bad_rows),
      field("data", "max_examples", &R::data, &D::max_examples),
      field("data", "doc_stride", &R::data, &D::doc_stride),
      field("data", "max_query_length", &R::data, &D::max_query_length),
      field("data", "max_answer_length", &R::data, &D::max_answer_length),
      field("data", "n_best", &R::data, &D::n_best),
      field("data", "window_stride", &R::data, &D::window_stride),
      field("data", "zero_shot", &R::data, &D::zero_shot),
  };
  return f;
}

const char* const kSections[] = {"model", "train", "data"};

const Field* find_field(const std::string& section, const std::string& key) {
  for (const Field& f : schema())
    if (section == f.section && key == f.key) return &f;
  return nullptr;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string location(const toml::source_region& r) {
  if (!r.path || r.begin.line == 0) return "";
  return fmt::format("{}:{}:{}: ", *r.path, r.begin.line, r.begin.column);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// ---- presets --------------------------------------------------------------------------------

void apply_family_defaults(ModelSection& m) {
  if (m.family == "gpt2")
    m.vocab_size = 50257, m.max_positions = 1024;  // GPT-2's tokenizer and context
  else
    m.vocab_size = EncoderConfig{}.vocab, m.max_positions = EncoderConfig{}.max_positions;
}

// The preset's sizes and λ (model/sizes.h), the same for both families.
void apply_preset(ModelSection& m) {
  if (m.preset == "custom") return;
  const ModelPreset p = model_preset(m.preset);
  m.hidden = p.hidden, m.layers = p.layers, m.heads = p.heads, m.intermediate = p.intermediate;
  m.attention.lambda = p.lambda;
}

}  // namespace

std::vector<std::string> config_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const Field& f : schema())
    if (section == f.section) keys.push_back(f.key);
  return keys;
}

namespace {
RunConfig resolve(toml::table doc, const std::string& path, const std::vector<std::string>& overrides,
                  FitCheck fit = FitCheck::yes);
}  // namespace

std::string exact_string_override(const std::string& key, const std::string& value, std::string_view option) {
  if (const size_t bad = uni::find_invalid_utf8(value); bad != std::string::npos)
    fail("config",
         "{} {}: byte {} (0x{:02x}) is not UTF-8; {} is recorded in the run's config.toml, which holds UTF-8 "
         "text only: rename it",
         option, toml_string(uni::utf8_lossy(value)), bad, static_cast<unsigned char>(value[bad]), key);
  return key + "=" + toml_string(value);
}

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides, FitCheck fit) {
  toml::table doc;
  if (!path.empty()) {
    require_regular_file(path, "config");
    try {
      doc = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      const auto& b = e.source().begin;
      fail("config", "{}:{}:{}: TOML syntax error: {}", path, b.line, b.column, e.description());
    }
  }
  // A config file says at least which model and which data: an empty or unrelated file is a
  // mistake, not a request for every default (BERT-Mini on synthetic data for 60000 steps).
  std::string unnamed;
  for (const char* key : {"model.family", "data.kind"})
    if (!path.empty() && unnamed.empty() && !doc.at_path(key).node() &&
        std::none_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
          return trim(std::string_view(o).substr(0, o.find('='))) == key;
        }))
      unnamed = key;
  RunConfig cfg = resolve(std::move(doc), path, overrides, fit);
  if (!unnamed.empty())
    fail("config", "{}: {} is not set; a config file names at least model.family (bert | gpt2) and data.kind",
         path, unnamed);
  return cfg;
}

RunConfig load_config_text(const std::string& text, const std::string& name,
                           const std::vector<std::string>& overrides) {
  toml::table doc;
  try {
    doc = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    fail("config", "{}:{}:{}: TOML syntax error: {}", name, b.line, b.column, e.description());
  }
  return resolve(std::move(doc), name, overrides);
}

namespace {
RunConfig resolve(toml::table doc, const std::string& path, const std::vector<std::string>& overrides,
                  FitCheck fit) {
  ConfigOrigins origins;
  // Keys given in the file: where each came from.
  for (auto&& [sec, node] : doc) {
    const std::string s(sec.str());
    const std::string where = location(sec.source());
    if (!std::count(std::begin(kSections), std::end(kSections), s))
      fail("config", "{}unknown section [{}] (allowed: model, train, data)", where, s);
    const toml::table* t = node.as_table();
    if (!t) fail("config", "{}[{}] must be a table, found {}", where, s, found(node));
    for (auto&& [key, value] : *t) {
      const std::string k(key.str());
      if (!find_field(s, k))
        fail("config", "{}unknown key {}.{} (allowed in [{}]: {})", location(key.source()), s, k, s,
             join(config_keys(s)));
      origins[s + "." + k] = location(value.source());
    }
  }

  // Overrides replace (or add) keys of the document.
  for (const std::string& o : overrides) {
    const std::string where = fmt::format("override '{}': ", o);
    // One override is one line: a line break would smuggle a second key past the checks below.
    if (std::any_of(o.begin(), o.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
      fail("config",
           "override {}: contains a line break or control character; give one section.key=value per argument",
           toml_string(o));
    const auto eq = o.find('=');
    if (eq == std::string::npos) fail("config", "{}expected section.key=value", where);
    const std::string lhs(trim(std::string_view(o).substr(0, eq)));
    const std::string rhs(trim(std::string_view(o).substr(eq + 1)));
    const auto dot = lhs.find('.');
    if (dot == std::string::npos || lhs.find('.', dot + 1) != std::string::npos)
      fail("config", "{}expected section.key=value, got key '{}'", where, lhs);
    const std::string s = lhs.substr(0, dot), k = lhs.substr(dot + 1);
    if (!std::count(std::begin(kSections), std::end(kSections), s))
      fail("config", "{}unknown section [{}] (allowed: model, train, data)", where, s);
    const Field* f = find_field(s, k);
    if (!f) fail("config", "{}unknown key {} (allowed in [{}]: {})", where, lhs, s, join(config_keys(s)));
    toml::table* sec = doc.get_as<toml::table>(s);
    if (!sec) sec = doc.insert_or_assign(s, toml::table{}).first->second.as_table();
    bool set = false;
    try {
      toml::table v = toml::parse("v = " + rhs);
      if (const toml::node* n = v.get("v"); n && v.size() == 1 && (!f->string_typed || n->is_string())) {
        n->visit([&](auto&& x) { sec->insert_or_assign(k, x); });
        set = true;
      }
    } catch (const toml::parse_error& e) {
      // Digits that TOML refuses are an integer too large for 64 bits, not a string.
      const std::string_view digits =
          std::string_view(rhs).substr(rhs.starts_with('-') || rhs.starts_with('+'));
      if (!f->string_typed && !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) {
            return (ch >= '0' && ch <= '9') || ch == '_';
          }))
        fail("config", "{}{}: {} is out of range for an integer (at most {})", where, lhs, rhs,
             std::numeric_limits<int64_t>::max());
      // A number or an array that TOML refuses (1e400, [1, 1e400]) is that value, wrong, not a
      // string: say why. A bare word stays a string, for the key's own type error.
      const char c0 = digits.empty() ? '\0' : digits.front();
      if (!f->string_typed && ((c0 >= '0' && c0 <= '9') || c0 == '.' || rhs.starts_with('[')))
        fail("config", "{}{}: {} is not a valid TOML value: {}", where, lhs, rhs, e.description());
    }
    if (!set) sec->insert_or_assign(k, rhs);  // not a TOML value (bp_high, data/x.txt): a string
    origins[lhs] = where;
  }

  // Resolution: defaults, family, preset, then every given key.
  RunConfig cfg;
  const auto read = [&](const Field& f) {
    const std::string key = std::string(f.section) + "." + f.key;
    if (const toml::node* n = doc.at_path(key).node()) f.read(cfg, *n, Ctx{key, origins[key]});
  };
  read(*find_field("model", "family"));
  read(*find_field("model", "preset"));
  const auto at = [&](const char* key) { return origin_of(origins, key); };
  if (!one_of(cfg.model.family, {"bert", "gpt2"}))
    fail("config", "{}model.family: unknown value \"{}\" (allowed: bert, gpt2)", at("model.family"),
         cfg.model.family);
  if (!one_of(cfg.model.preset, {"mini", "small", "medium", "custom"}))
    fail("config", "{}model.preset: unknown value \"{}\" (allowed: mini, small, medium, custom)",
         at("model.preset"), cfg.model.preset);
  apply_family_defaults(cfg.model);
  apply_preset(cfg.model);
  for (const Field& f : schema()) read(f);

  // Derived values.
  const std::string name = path.empty() ? "default" : std::filesystem::path(path).stem().string();
  for (size_t p; (p = cfg.train.run_dir.find("<name>")) != std::string::npos;)
    cfg.train.run_dir.replace(p, 6, name);
  if (cfg.data.vocab_size == 0) cfg.data.vocab_size = cfg.model.vocab_size;

  check_config(cfg, origins, fit);
  return cfg;
}

// The TOML of every key of the schema, less those in `skip`.
std::string toml_of(const RunConfig& cfg, const std::vector<std::string_view>& skip) {
  std::string out =
      "# saobp run config, fully resolved: every key, so the run can be repeated from this file\n";
  const char* section = "";
  for (const Field& f : schema()) {
    if (std::find(skip.begin(), skip.end(), fmt::format("{}.{}", f.section, f.key)) != skip.end()) continue;
    if (std::string_view(section) != f.section) {
      out += fmt::format("\n[{}]\n", f.section);
      section = f.section;
    }
    out += fmt::format("{} = {}\n", f.key, f.write(cfg));
  }
  return out;
}

}  // namespace

std::string to_toml(const RunConfig& cfg) { return toml_of(cfg, {}); }

// How the global batch is split and summed may change on resume (docs/distributed.md): the
// hash sees train.grad_accum as 1 and not train.reduce or train.bucket_mb, so a run saved by 2
// ranks resumes on 1 with grad_accum doubled (and a config without those keys hashes as before
// they existed). The device may change too: the hash sees train.device as "cpu", so a run saved
// on a GPU resumes on the CPU and the other way round, and a CPU run hashes as it always did.
// model.tiled picks the attention kernels, not the function they compute: a run may resume with
// the other kernels (the tiled ones when the maps no longer fit, say). train.precision is left
// out for the same reason as the device: a bf16 run saved on a GPU resumes in f32 on the CPU, and
// so is train.memory_limit_gib, which bounds where a run fits, not what it computes.
namespace {

// What config_hash leaves out or normalizes (above): the keys that may differ between a run and
// its resumption without changing what it computes.
const std::vector<std::string_view> kNotHashed = {"train.reduce", "train.bucket_mb", "model.tiled",
                                                  "train.precision", "train.memory_limit_gib"};

RunConfig hashed_form(const RunConfig& cfg) {
  RunConfig c = cfg;
  c.train.grad_accum = 1;
  c.train.device = "cpu";
  return c;
}

}  // namespace

uint64_t config_hash(const RunConfig& cfg) { return fnv1a64(toml_of(hashed_form(cfg), kNotHashed)); }

bool leaves_results_unchanged(std::string_view key) {
  return key == "train.log_every" || key == "train.save_every" || key == "train.threads" ||
         key == "train.run_dir";
}

std::vector<ConfigDifference> hashed_differences(const RunConfig& a, const RunConfig& b) {
  const RunConfig ha = hashed_form(a), hb = hashed_form(b);
  std::vector<ConfigDifference> out;
  for (const Field& f : schema()) {
    const std::string key = fmt::format("{}.{}", f.section, f.key);
    if (std::find(kNotHashed.begin(), kNotHashed.end(), key) != kNotHashed.end()) continue;
    std::string va = f.write(ha), vb = f.write(hb);
    if (va != vb) out.push_back({key, std::move(va), std::move(vb)});
  }
  return out;
}

}  // namespace saobp
