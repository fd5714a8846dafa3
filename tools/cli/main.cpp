// saobp: the one binary. Subcommands are registered by the files of tools/cli/.
#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"saobp: a from-scratch transformer trainer for attention-localization research"};
  app.require_subcommand(1);
  saobp::cli::register_all(app);
  if (const std::string unknown = saobp::cli::unknown_command(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "saobp: error: {}\n", unknown);
    return 1;
  }
  try {
    app.parse(argc, argv);
    return saobp::cli::run_selected(app);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const saobp::Error& e) {
    fmt::print(stderr, "saobp: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "saobp: unexpected error: {}\n", e.what());
    return 2;
  }
}
