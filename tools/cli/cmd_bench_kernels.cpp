#include "cli/commands.h"
namespace saobp::cli {
void register_bench_kernels(CLI::App& app) { (void)app; }
}  // namespace saobp::cli
