#include "train/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
#include "model/safetensors.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kChecksums = "checksums.json";

void copy_into(const SafetensorsFile& f, const std::string& name, Tensor& dst) {
  if (!f.has(name))
    fail("checkpoint", "{}: tensor '{}' is missing; the checkpoint does not match this model", f.path, name);
  const Tensor& src = f.get(name);
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
    fail("checkpoint", "{}: tensor '{}' is {} but the model has {}", f.path, name, src.str(), dst.str());
  check_finite(src, f.path, name);
  dst.copy_from(src);
}

// copy_into found every expected name, so any further tensor is one the model does not have.
void check_no_extra(const SafetensorsFile& f, size_t expected) {
  if (f.tensors.size() > expected)
    fail("checkpoint", "{}: holds {} tensors, the model expects {}; it was saved from a different model",
         f.path, f.tensors.size(), expected);
}

std::string checksum_of(const std::string& path) { return fmt::format("{:016x}", fnv1a64(read_file(path))); }

// SAOBP_TEST_PAUSE_IN_SAVE=POINT:N: the Nth save of this process sleeps at POINT (the kill test).
void test_pause(const char* point, const fs::path& dir) {
  static const char* env = std::getenv("SAOBP_TEST_PAUSE_IN_SAVE");
  static std::map<std::string, int> hits;
  if (!env) return;
  const std::string spec(env);
  const size_t colon = spec.rfind(':');
  if (spec.substr(0, colon) != point) return;
  const int n = colon == std::string::npos ? 1 : std::atoi(spec.c_str() + colon + 1);
  if (++hits[point] != n) return;
  std::fprintf(stderr, "saobp: test pause at %s of save %d (%s)\n", point, n, dir.string().c_str());
  std::fflush(stderr);
  for (;;) ::pause();
}

// A pid that still runs (kill(pid, 0) reaches it, or exists but is not ours to signal).
bool alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// dir/checksums.json complete and verified.
bool complete(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / kChecksums, ec)) return false;
  try {
    verify_checksums(dir.string());
    return true;
  } catch (const Error&) {
    return false;
  }
}

// An interrupted swap's leftover beside NAME: NAME.tmp-PID or NAME.old-PID (a folder).
struct Leftover {
  fs::path path;
  std::string base;  // NAME
  bool tmp = false;  // NAME.tmp-PID (else NAME.old-PID)
  long pid = 0;
};

std::vector<Leftover> leftovers(const fs::path& dir) {
  static const std::regex re(R"((.+)\.(tmp|old)-([0-9]+))");
  std::vector<Leftover> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory(ec) || !std::regex_match(name, m, re)) continue;
    out.push_back({e.path(), m[1].str(), m[2].str() == "tmp", std::stol(m[3].str())});
  }
  std::sort(out.begin(), out.end(), [](const Leftover& a, const Leftover& b) { return a.path < b.path; });
  return out;
}

}  // namespace

bool lies_within(const std::string& inner, const std::string& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner), ec);
  const fs::path b = fs::weakly_canonical(fs::absolute(outer), ec);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) break;  // the empty last element of a path that ends in '/'
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

bool is_run_output(const std::string& name) {
  static const std::regex checkpoint(R"((final|checkpoint-[0-9]+)(\.(tmp|old)-[0-9]+)?)");
  static const std::regex prediction(R"((predictions|null_odds)(_[A-Za-z0-9_.-]+)?\.jsonl?)");
  static const std::set<std::string> files = {"metrics.jsonl", "init_report.json", "results.json"};
  return files.count(name) || glue_submission_files().count(name) || std::regex_match(name, checkpoint) ||
         std::regex_match(name, prediction);
}

const std::set<std::string>& glue_submission_files() {
  static const std::set<std::string> names = {"CoLA.tsv",   "SST-2.tsv",   "MRPC.tsv", "QQP.tsv",
                                              "STS-B.tsv",  "QNLI.tsv",    "RTE.tsv",  "WNLI.tsv",
                                              "MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"};
  return names;
}

void refuse_output_over_inputs(const std::string& out, std::string_view option,
                               const std::vector<std::string>& inputs) {
  if (out.empty() || out == "-") return;
  std::error_code ec;
  const fs::path o = fs::weakly_canonical(fs::absolute(out), ec);
  for (const std::string& in : inputs) {
    if (in.empty() || in == "-") continue;
    const fs::path i = fs::weakly_canonical(fs::absolute(in), ec);
    if (o == i || fs::equivalent(o, i, ec))
      fail("output", "{} {} is an input of this command ({}): write the output elsewhere", option, out, in);
    if (!fs::is_directory(i, ec)) continue;
    const fs::path rel = o.lexically_relative(i);
    if (rel.empty() || *rel.begin() == ".." || *rel.begin() == ".") continue;
    const std::string first = rel.begin()->string();
    if (fs::exists(i / "checksums.json", ec)) {  // a checkpoint: its own files
      if (std::next(rel.begin()) == rel.end() && fs::is_regular_file(o, ec))
        fail("output",
             "{} {} would replace a file of the checkpoint {}, which this command reads: write the "
             "output elsewhere",
             option, out, in);
      continue;
    }
    bool run_folder = false;
    for (const auto& e : fs::directory_iterator(i, ec))
      run_folder |= is_run_output(e.path().filename().string());
    if (run_folder ? is_run_output(first) || first == "cache" || first == "tokenizer"
                   : fs::is_regular_file(o, ec))
      fail("output", "{} {} would replace {} {}, which this command reads: write the output elsewhere",
           option, out, run_folder ? "what a run saved in" : "a file of the input folder", in);
  }
}

void check_finite(const Tensor& t, const std::string& file, const std::string& name) {
  if (!is_floating(t.dtype())) return;
  const std::vector<double> v = t.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      fail("checkpoint", "{}: tensor '{}' holds {} at flat index {}; the checkpoint is damaged", file, name,
           v[i], i);
}

namespace {

// Every file of a checkpoint into folder `tmp`, the checksums last (their presence marks the folder
// complete), synced.
void write_checkpoint_files(const fs::path& tmp, const CheckpointContents& c, const fs::path& final_dir) {
  std::vector<NamedTensor> model, optim;
  for (const Var& p : c.params->all()) model.push_back({p.name(), p.data()});
  save_safetensors((tmp / "model.safetensors").string(), model, {{"format", "pt"}});
  if (c.optimizer) {
    const AdamW& opt = *c.optimizer;
    for (size_t i = 0; i < opt.params().size(); ++i) {
      optim.push_back({opt.params()[i].name() + ".exp_avg", opt.first_moments()[i]});
      optim.push_back({opt.params()[i].name() + ".exp_avg_sq", opt.second_moments()[i]});
    }
    save_safetensors((tmp / "optimizer.safetensors").string(), optim,
                     {{"optimizer", "adamw"}, {"steps", std::to_string(opt.steps_taken())}});
  }
  const nlohmann::json state = {{"step", c.state.step},
                                {"data_position", c.state.data_position},
                                {"config_hash", fmt::format("{:016x}", c.state.config_hash)},
                                {"seed", c.state.seed},
                                {"ranks", c.state.ranks},
                                {"grad_accum", c.state.grad_accum},
                                {"max_batches_per_step", c.state.max_batches_per_step},
                                {"optimizer_steps", c.optimizer ? c.optimizer->steps_taken() : 0}};
  write_file_atomic((tmp / "trainer_state.json").string(), state.dump(2) + "\n");
  nlohmann::json hf = c.hf_config;
  if (c.tokenizer) hf["saobp_tokenizer_fingerprint"] = fmt::format("{:016x}", c.tokenizer->fingerprint());
  write_file_atomic((tmp / "config.json").string(), hf.dump(2) + "\n");
  write_file_atomic((tmp / "config.toml").string(), c.config_toml);
  if (c.tokenizer) c.tokenizer->save(tmp.string());
  test_pause("files-written", final_dir);
  // The checksums last: their presence marks the folder complete.
  nlohmann::json files = nlohmann::json::object();
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.is_regular_file()) files[e.path().filename().string()] = checksum_of(e.path().string());
  write_file_atomic((tmp / kChecksums).string(),
                    nlohmann::json{{"algorithm", "fnv1a64"}, {"files", files}}.dump(2) + "\n");
  sync_directory(tmp.string());
}

}  // namespace

void save_checkpoint(const std::string& dir, const CheckpointContents& c) {
  const fs::path final_dir(dir);
  const fs::path parent = final_dir.has_parent_path() ? final_dir.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const fs::path tmp = final_dir.string() + fmt::format(".tmp-{}", ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write_checkpoint_files(tmp, c, final_dir);
  } catch (...) {  // a failed write (a full disk, the file size limit): no half folder stays
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  test_pause("before-swap", final_dir);
  // Swap into place: the old checkpoint (if any) is removed only once the new one is complete.
  const fs::path old = final_dir.string() + fmt::format(".old-{}", ::getpid());
  fs::remove_all(old);
  if (fs::exists(final_dir)) {
    rename_durable(final_dir.string(), old.string());
    test_pause("between-renames", final_dir);
  }
  rename_durable(tmp.string(), final_dir.string());
  test_pause("after-swap", final_dir);
  fs::remove_all(old);
  sync_directory(parent.string());
}

std::vector<std::string> recover_interrupted_saves(const std::string& run_dir) {
  std::vector<std::string> notes;
  const fs::path root(run_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return notes;
  std::map<std::string, std::vector<Leftover>> by_base;
  for (const Leftover& l : leftovers(root)) {
    if (l.pid != ::getpid() && alive(l.pid)) {
      notes.push_back(fmt::format("left {} alone: process {} is still running", l.path.string(), l.pid));
      continue;
    }
    by_base[l.base].push_back(l);
  }
  for (auto& [base, list] : by_base) {
    const fs::path target = root / base;
    if (!fs::exists(target, ec)) {
      // A complete new copy wins (the swap is finished); else the old copy goes back.
      auto pick =
          std::find_if(list.begin(), list.end(), [](const Leftover& l) { return l.tmp && complete(l.path); });
      if (pick == list.end())
        pick = std::find_if(list.begin(), list.end(), [](const Leftover& l) { return !l.tmp; });
      if (pick != list.end()) {
        rename_durable(pick->path.string(), target.string());
        notes.push_back(fmt::format("{} {}: renamed {} to {}",
                                    pick->tmp ? "finished the interrupted save of" : "restored",
                                    target.string(), pick->path.filename().string(), base));
        list.erase(pick);
      }
    }
    for (const Leftover& l : list) {
      fs::remove_all(l.path);
      notes.push_back(fmt::format("removed the leftover {} of an interrupted save", l.path.string()));
    }
  }
  // write_file_atomic's FILE.tmp.PID of dead processes.
  static const std::regex tmp_file(R"(.+\.tmp\.([0-9]+))");
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || !std::regex_match(name, m, tmp_file)) continue;
    const long pid = std::stol(m[1].str());
    if (pid != ::getpid() && alive(pid)) continue;
    fs::remove(e.path(), ec);
    notes.push_back(fmt::format("removed the leftover {} of an interrupted write", e.path().string()));
  }
  if (!notes.empty()) sync_directory(root.string());
  return notes;
}

std::string latest_checkpoint(const std::string& run_dir, std::vector<std::string>* notes) {
  static const std::regex numbered(R"(checkpoint-([0-9]+))");
  std::vector<std::pair<int64_t, fs::path>> found;  // (order, dir): final above every checkpoint-N
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return "";
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory(ec)) continue;
    if (name == "final")
      found.emplace_back(INT64_MAX, e.path());
    else if (std::regex_match(name, m, numbered) && m[1].length() < 18)
      found.emplace_back(std::stoll(m[1].str()), e.path());
  }
  std::sort(found.rbegin(), found.rend());
  for (const auto& [order, dir] : found) {
    try {
      if (!fs::exists(dir / kChecksums))
        fail("checkpoint", "{}: no {}; the save did not finish", dir.string(), kChecksums);
      verify_checksums(dir.string());
      return dir.string();
    } catch (const Error& e) {
      if (notes) notes->push_back(fmt::format("skipped {}: {}", dir.string(), e.what()));
    }
  }
  return "";
}

void use_checkpoint_tokenizer(const std::string& dir, bool vocab_given, RunConfig& cfg, const char* op) {
  if (vocab_given) return;
  if (has_tokenizer_files(dir)) {
    cfg.data.vocab = dir;
    return;
  }
  if (cfg.data.kind != "synthetic" && cfg.data.kind != "task")
    fail(op,
         "{}: no tokenizer (tokenizer.json, vocab.txt, or vocab.json + merges.txt), which a checkpoint of "
         "a {} run carries; copy the run's tokenizer files there, or give data.vocab=DIR",
         dir, cfg.data.kind);
}

std::string readable_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir;
  const fs::path target(dir);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::vector<Leftover> all = leftovers(parent);
  const Leftover* pick = nullptr;
  for (const Leftover& l : all)
    if (l.base == target.filename().string() && l.tmp && complete(l.path)) pick = &l;
  if (!pick)
    for (const Leftover& l : all)
      if (l.base == target.filename().string() && !l.tmp) pick = &l;
  if (!pick) return dir;
  fmt::print(
      stderr,
      "note: {} is missing after an interrupted save; reading {} (saobp train --resume puts it back)\n", dir,
      pick->path.string());
  return pick->path.string();
}

void verify_checksums(const std::string& dir, const std::vector<std::string>& skip) {
  const fs::path path = fs::path(dir) / kChecksums;
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::map<std::string, std::string> want;
  try {
    const nlohmann::json j = read_json_file(path.string(), "checkpoint");
    if (j.at("algorithm").get<std::string>() != "fnv1a64")
      fail("checkpoint", "{}: unknown checksum algorithm '{}' (this build writes fnv1a64)", path.string(),
           j.at("algorithm").get<std::string>());
    want = j.at("files").get<std::map<std::string, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: {}; the checkpoint is damaged", path.string(), e.what());
  }
  for (const auto& [name, sum] : want) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    if (name.find('/') != std::string::npos || name == "..")
      fail("checkpoint", "{}: file name '{}' is not a plain name; the checkpoint is damaged", path.string(),
           name);
    const fs::path file = fs::path(dir) / name;
    if (!fs::exists(file, ec))
      fail("checkpoint", "{}: missing, though {} lists it; the checkpoint is damaged", file.string(),
           kChecksums);
    const std::string have = checksum_of(file.string());
    if (have != sum)
      fail("checkpoint",
           "{}: checksum {} differs from the {} recorded in {}; the file is damaged or was changed "
           "after saving",
           file.string(), have, sum, kChecksums);
  }
}

void check_checkpoint_config(const std::string& dir, const nlohmann::json& expected,
                             const Tokenizer* tokenizer) {
  const fs::path path = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return;  // an older folder; the weights' shapes are still checked
  nlohmann::json stored;
  try {
    stored = read_json_file(path.string(), "checkpoint");
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: not valid JSON ({}); the checkpoint is damaged", path.string(), e.what());
  }
  if (!stored.is_object())
    fail("checkpoint", "{}: not a JSON object; the checkpoint is damaged", path.string());
  // A model without a position table (saobp_positions rope or none) holds n_positions as a limit
  // on the sequence length, not as a weight's shape: a read-only command may set another one
  // (model.max_positions=N) to read longer sequences. A learned table's rows are weights, so there
  // the two must agree.
  const auto no_table = [](const nlohmann::json& j) {
    const auto p = j.find("saobp_positions");
    return p != j.end() && (*p == "rope" || *p == "none");
  };
  const bool limit_only = no_table(stored) && no_table(expected);
  for (const auto& [key, value] : expected.items()) {
    const auto it = stored.find(key);
    if (limit_only && (key == "n_positions" || key == "max_position_embeddings") && it != stored.end() &&
        it->is_number_integer() && value.is_number_integer())
      continue;
    if (it == stored.end() || *it != value)
      fail("checkpoint", "{}: '{}' is {} but config.toml (with the overrides) gives {}; the files disagree",
           path.string(), key, it == stored.end() ? "missing" : it->dump(), value.dump());
  }
  const auto fp = stored.find("saobp_tokenizer_fingerprint");
  if (tokenizer && fp != stored.end()) {
    const std::string have = fmt::format("{:016x}", tokenizer->fingerprint());
    if (!fp->is_string() || fp->get<std::string>() != have)
      fail("checkpoint",
           "{}: 'saobp_tokenizer_fingerprint' is {} but the tokenizer in use has {}; the tokenizer no longer "
           "matches the checkpoint",
           path.string(), fp->dump(), have);
  }
}

void load_weights(const std::string& dir, ParamStore& params) {
  verify_checksums(dir, {"optimizer.safetensors"});
  const SafetensorsFile f = load_safetensors((fs::path(dir) / "model.safetensors").string());
  for (const Var& p : params.all()) {
    Tensor d = p.data();
    copy_into(f, p.name(), d);
  }
  check_no_extra(f, params.all().size());
}

TrainerState load_training_state(const std::string& dir, AdamW& opt, int64_t max_steps, int64_t grad_accum) {
  verify_checksums(dir, {"model.safetensors"});
  const SafetensorsFile f = load_safetensors((fs::path(dir) / "optimizer.safetensors").string());
  for (size_t i = 0; i < opt.params().size(); ++i) {
    copy_into(f, opt.params()[i].name() + ".exp_avg", opt.first_moments()[i]);
    const std::string sq = opt.params()[i].name() + ".exp_avg_sq";
    copy_into(f, sq, opt.second_moments()[i]);
    // A running mean of squared gradients is never negative; one that is would take the square
    // root of a negative number in the first update.
    const std::vector<double> v = opt.second_moments()[i].to(DType::f64).to_vector<double>();
    for (size_t j = 0; j < v.size(); ++j)
      if (v[j] < 0)
        fail("checkpoint",
             "{}: tensor '{}' holds {} at flat index {}, where second moments are >= 0; the "
             "checkpoint is damaged",
             f.path, sq, v[j], j);
  }
  check_no_extra(f, 2 * opt.params().size());
  const std::string path = (fs::path(dir) / "trainer_state.json").string();
  TrainerState s;
  int64_t optimizer_steps = 0;
  try {
    const nlohmann::json j = read_json_file(path, "checkpoint");
    // Typed reads (core/json.h): a float where an integer belongs is refused, not converted
    // (1e300 into an int64_t is undefined behaviour).
    const JsonFields k(j, path, "checkpoint");
    s.step = k.integer("step");
    s.data_position = k.integer("data_position");
    s.config_hash = std::stoull(k.string("config_hash"), nullptr, 16);
    const nlohmann::json* seed = k.find("seed");
    if (!seed || !seed->is_number_unsigned())
      fail("checkpoint", "{}: 'seed' is {}, not an integer >= 0; the checkpoint is damaged", path,
           seed ? json_excerpt(*seed) : "missing");
    s.seed = seed->get<uint64_t>();
    const auto small = [&](const char* key) {
      const int64_t v = k.integer(key, 1);
      if (v < 1 || v > std::numeric_limits<int>::max())
        fail("checkpoint",
             "{}: '{}' is {}, not a count of processes or micro-batches; the checkpoint is damaged", path,
             key, v);
      return static_cast<int>(v);
    };
    s.ranks = small("ranks");
    s.grad_accum = small("grad_accum");
    s.max_batches_per_step = k.integer("max_batches_per_step", int64_t{s.ranks} * s.grad_accum);
    optimizer_steps = k.integer("optimizer_steps");
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: {}; the checkpoint is damaged", path, e.what());
  } catch (const std::logic_error& e) {
    fail("checkpoint", "{}: bad config_hash ({}); the checkpoint is damaged", path, e.what());
  }
  // step first: the other two are checked against it, and it bounds their product.
  if (s.step < 0 || s.step > max_steps)
    fail("checkpoint", "{}: 'step' is {}, outside 0 .. train.max_steps = {}; the checkpoint is damaged", path,
         s.step, max_steps);
  // Every step consumed between 1 and max_batches_per_step batches (ranks x grad_accum of the
  // layout it ran under; a checkpoint of one unchanged layout has exactly step x that many).
  const int64_t most =
      std::max<int64_t>({s.max_batches_per_step, int64_t{s.ranks} * s.grad_accum, grad_accum});
  if (s.max_batches_per_step < 1 || s.data_position < s.step || s.data_position / most > s.step ||
      (s.data_position / most == s.step && s.data_position % most != 0))
    fail("checkpoint",
         "{}: 'data_position' is {}, but {} steps of at most {} batches each consume between {} and {} x {}; "
         "the checkpoint is damaged",
         path, s.data_position, s.step, most, s.step, s.step, most);
  if (optimizer_steps != s.step)
    fail("checkpoint", "{}: 'optimizer_steps' is {} but 'step' is {}; the checkpoint is damaged", path,
         optimizer_steps, s.step);
  opt.set_steps_taken(optimizer_steps);
  return s;
}

}  // namespace saobp
