#include "cli/commands.h"
namespace saobp::cli {
void register_explain(CLI::App& app) { (void)app; }
}  // namespace saobp::cli
