// Subcommand registry of the saobp binary: each tools/cli/cmd_*.cpp adds its subcommand here.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace saobp::cli {

// Registers `sub` so that run_selected() calls `run` when it was chosen on the command line.
void add_command(CLI::App* sub, std::function<int()> run);

void register_all(CLI::App& app);
int run_selected(CLI::App& app);

// One per file.
void register_info(CLI::App& app);
void register_smoke(CLI::App& app);
void register_bench_kernels(CLI::App& app);
void register_gradcheck(CLI::App& app);
void register_explain(CLI::App& app);
void register_bench_step(CLI::App& app);
void register_train(CLI::App& app);
void register_bench(CLI::App& app);
void register_vocab(CLI::App& app);
void register_bench_tokenize(CLI::App& app);
void register_report(CLI::App& app);
void register_analyze(CLI::App& app);  // analyze and inspect

}  // namespace saobp::cli
