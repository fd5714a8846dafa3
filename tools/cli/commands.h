// Subcommand registry of the saobp binary: each tools/cli/cmd_*.cpp adds its subcommand here.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace saobp::cli {

// Who runs a command under mpirun with several ranks (docs/distributed.md). `every`: each rank
// takes its part of the job (train and finetune are data-parallel, study shares out its runs,
// info gathers every rank's place). `root`: the command is one process's work (evaluation,
// analysis, benchmarks, tools): rank 0 runs it exactly as a plain process would and the other
// ranks return 0 at once, so its output is computed and written once.
enum class Ranks { root, every };

// Registers `sub` so that run_selected() calls `run` when it was chosen on the command line.
void add_command(CLI::App* sub, std::function<int()> run, Ranks ranks = Ranks::root);

void register_all(CLI::App& app);

// --resume [DIR] and --overwrite of train and finetune (they share the trainer): --resume with no
// value continues the run directory's latest complete checkpoint (count() > 0 with `resume`
// empty). Returns the --resume option.
CLI::Option* add_resume_options(CLI::App* sub, std::string& resume, bool& overwrite);
int run_selected(CLI::App& app);

// Range checks for numeric options with short messages ("--samples: must be in [1, 1048576],
// got 0"); CLI11's own print the double range in full (a 309-digit bound).
CLI::Validator in_range(double lo, double hi);
CLI::Validator at_least(double lo);
CLI::Validator above(double lo);  // > lo
// An output path that is not empty: "--out: is empty; name the file or folder to write" (an empty
// value would otherwise fall back to the default place or fail late).
CLI::Validator non_empty_path();

// When argv[1] is not an option and not a subcommand of `app`: the message naming it and the
// nearest subcommand by edit distance ("unknown command 'trian'; did you mean 'train'?"), else "".
std::string unknown_command(CLI::App& app, int argc, char** argv);

// The elements of a comma-separated list; throws naming `option` and the element's position for an
// empty one ("--ids '2,,3': element 2 is empty"), which CLI11's delimiter drops silently.
std::vector<std::string> split_list(const std::string& option, const std::string& text);
// --device of the commands that read a checkpoint (eval, analyze, inspect, generate): where the
// model runs, instead of the train.device of the checkpoint's config (a run trained on a GPU is read
// on a machine without one, or the other way round). with_device appends the override when given.
void add_device_option(CLI::App* sub, std::string& device);
std::vector<std::string> with_device(std::vector<std::string> overrides, const std::string& device);

// Before the work whose result it receives: throws Error("[op] OPTION PATH: ...") unless `path`
// can be written as a file: not empty, not a directory, and its folder a directory or one that
// create_directories can make (the nearest existing ancestor a directory this process may write
// into; the OS's reason otherwise). Creates nothing.
void check_output_file(std::string_view op, const std::string& option, const std::string& path);

// Before any work: throws Error("[op] OPTION ...") unless `path` names an existing folder (an
// empty value, a missing path and a file are refused, each said).
void check_input_folder(std::string_view op, const std::string& option, const std::string& path);

// Comma-separated token ids ("2,5,7"): split_list, and each element an int32.
std::vector<int32_t> parse_ids(const std::string& option, const std::string& text);

// One per file.
void register_info(CLI::App& app);
void register_smoke(CLI::App& app);
void register_bench_kernels(CLI::App& app);
void register_gradcheck(CLI::App& app);
void register_explain(CLI::App& app);
void register_bench_step(CLI::App& app);
void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_bench(CLI::App& app);
void register_vocab(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_bench_tokenize(CLI::App& app);
void register_report(CLI::App& app);
void register_analyze(CLI::App& app);  // analyze and inspect
void register_finetune(CLI::App& app);
void register_make_task(CLI::App& app);
void register_glue_score(CLI::App& app);
void register_generate(CLI::App& app);
// `saobp eval --task`: a benchmark's metrics of a checkpoint into `out` (cmd_finetune.cpp).
int run_benchmark_eval(const std::string& checkpoint, const std::string& task, const std::string& data,
                       bool zero_shot, const std::vector<std::string>& overrides, std::string out);

}  // namespace saobp::cli
