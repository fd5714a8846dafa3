#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/error.h"
#include "dist/comm.h"

namespace saobp::cli {

namespace {
struct Entry {
  CLI::App* sub;
  std::function<int()> run;
  Ranks ranks;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

void add_command(CLI::App* sub, std::function<int()> run, Ranks ranks) {
  registry().push_back({sub, std::move(run), ranks});
}

// tools/cli/cmd_study.cpp: `saobp study`, `saobp correlate`, `saobp cost`.
void register_study(CLI::App& app);
void register_correlate(CLI::App& app);
void register_cost(CLI::App& app);

CLI::Option* add_resume_options(CLI::App* sub, std::string& resume, bool& overwrite) {
  CLI::Option* r = sub->add_option("--resume", resume,
                                   "continue the run from this checkpoint directory, or (no value) from the "
                                   "run directory's latest complete checkpoint");
  r->expected(0, 1);
  sub->add_flag("--overwrite", overwrite, "start a new run in a run directory that holds one, replacing it")
      ->excludes(r);
  return r;
}

void register_all(CLI::App& app) {
  register_info(app);
  register_smoke(app);
  register_bench_kernels(app);
  register_gradcheck(app);
  register_explain(app);
  register_bench_step(app);
  register_train(app);
  register_eval(app);
  register_bench(app);
  register_vocab(app);
  register_tokenize(app);
  register_bench_tokenize(app);
  register_report(app);
  register_analyze(app);
  register_finetune(app);
  register_make_task(app);
  register_glue_score(app);
  register_generate(app);
  register_study(app);
  register_correlate(app);
  register_cost(app);
}

namespace {

// The number an option's text holds, or an error message for CLI11.
std::string number_of(const std::string& s, double& v) {
  if (!CLI::detail::lexical_cast(s, v) || std::isnan(v)) return fmt::format("expected a number, got '{}'", s);
  return {};
}

// A numeric check: the message "must be <what>, got <text>" unless ok(value).
CLI::Validator numeric(const std::string& what, std::function<bool(double)> ok) {
  return CLI::Validator(
      [what, ok](std::string& s) {
        double v = 0;
        std::string err = number_of(s, v);
        if (err.empty() && !ok(v)) err = fmt::format("must be {}, got {}", what, s);
        return err;
      },
      what);
}

}  // namespace

CLI::Validator in_range(double lo, double hi) {
  return numeric(fmt::format("in [{}, {}]", lo, hi), [lo, hi](double v) { return v >= lo && v <= hi; });
}
CLI::Validator at_least(double lo) {
  return numeric(fmt::format(">= {}", lo), [lo](double v) { return v >= lo; });
}
CLI::Validator above(double lo) {
  return numeric(fmt::format("> {}", lo), [lo](double v) { return v > lo; });
}

CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& s) {
        return s.empty() ? std::string("is empty; name the file or folder to write") : "";
      },
      "PATH");
}

namespace {

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return {};
  const std::string given = argv[1];
  std::string best, names;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    if (name == given) return {};
    const size_t d = edit_distance(given, name);
    if (d < best_d) best_d = d, best = name;
    names += (names.empty() ? "" : ", ") + name;
  }
  // A suggestion only when it is close: at most a third of the letters differ.
  if (best_d <= std::max<size_t>(2, given.size() / 3))
    return fmt::format("unknown command '{}'; did you mean '{}'? (commands: {})", given, best, names);
  return fmt::format("unknown command '{}' (commands: {})", given, names);
}

std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t k = 1;; ++k) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, comma - start));
    if (out.back().empty()) fail("cli", "{} '{}': element {} is empty", option, text, k);
    if (comma == text.size()) break;
    start = comma + 1;
  }
  return out;
}

void add_device_option(CLI::App* sub, std::string& device) {
  sub->add_option(
      "--device", device,
      "run on cpu, cuda or cuda:N (default: the checkpoint's train.device; on cpu in f32, whatever "
      "train.precision the run was trained with)");
}

// --device cpu also sets train.precision = f32: a checkpoint of a bf16 run on a GPU is read on
// the CPU in f32, the reference (a run config refuses bf16 there; docs/precision.md).
std::vector<std::string> with_device(std::vector<std::string> overrides, const std::string& device) {
  if (!device.empty()) overrides.push_back("train.device=" + device);
  if (device == "cpu") overrides.push_back("train.precision=f32");
  return overrides;
}

void check_output_file(std::string_view op, const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) fail(op, "{} is empty: name the file to write", option);
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(op, "{} {}: a directory; name the file to write", option, path);
  // The nearest ancestor of the file that exists: the folder it lands in, or where
  // create_directories would start.
  fs::path dir = fs::path(path).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) fail(op, "{} {}: {} is not a directory", option, path, dir.string());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail(op, "{} {}: cannot write into {}: {}", option, path, dir.string(), std::strerror(errno));
}

void check_input_folder(std::string_view op, const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) fail(op, "{} is empty: name the folder", option);
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(op, "{} {}: no such folder", option, path);
  if (!fs::is_directory(path, ec)) fail(op, "{} {}: not a folder (a file)", option, path);
}

std::vector<int32_t> parse_ids(const std::string& option, const std::string& text) {
  std::vector<int32_t> ids;
  for (const std::string& e : split_list(option, text)) {
    int32_t v = 0;
    const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
    if (ec != std::errc() || end != e.data() + e.size())
      fail("cli", "{} '{}': element {} '{}' is not a token id (an integer below 2^31)", option, text,
           ids.size() + 1, e);
    ids.push_back(v);
  }
  return ids;
}

int run_selected(CLI::App& app) {
  (void)app;
  for (const Entry& e : registry()) {
    if (!e.sub->parsed()) continue;
    if (e.ranks == Ranks::root && dist::rank() != 0) return 0;
    return e.run();
  }
  return 1;
}

}  // namespace saobp::cli
