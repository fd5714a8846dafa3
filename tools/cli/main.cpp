// saobp: the one binary. Subcommands are registered by the files of tools/cli/.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <new>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/comm.h"
#include "finetune/finetune.h"

namespace {

// Under mpirun with several ranks, an error ends the whole job (the other ranks would wait for
// this one forever); alone, the exit code is returned.
int finish(int code) {
  if (code != 0 && saobp::dist::size() > 1) saobp::dist::abort(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const saobp::dist::Session mpi(argc, argv);
  // A write past the file size limit (ulimit -f) fails with EFBIG, which the writer reports naming
  // the file, instead of killing the process by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // Logs come from rank 0 only: the other ranks' standard output is discarded (their errors
  // still reach standard error).
  if (saobp::dist::rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    fmt::print(stderr, "saobp: rank {}: cannot silence standard output\n", saobp::dist::rank());
  saobp::finetune::register_tasks();  // data.kind "benchmark" for make_task (train/task.h)
  CLI::App app{"saobp: a from-scratch transformer trainer for attention-localization research"};
  app.require_subcommand(1);
  saobp::cli::register_all(app);
  if (const std::string unknown = saobp::cli::unknown_command(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "saobp: error: {}\n", unknown);
    return 1;
  }
  try {
    app.parse(argc, argv);
    return finish(saobp::cli::run_selected(app));
  } catch (const CLI::ParseError& e) {
    return finish(app.exit(e));
  } catch (const saobp::Error& e) {
    fmt::print(stderr, "saobp: error: {}\n", e.what());
    return finish(1);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "saobp: error: out of memory: an allocation failed (the machine's memory or the address-space "
               "limit, ulimit -v); lower train.batch_size or model.seq_len, or the model's size\n");
    return finish(1);
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder or file the command could not create, read or replace (an output path under a
    // file, a read-only folder): the path and the system's reason, as every [fs] error gives them.
    std::string what = e.what();
    const std::string prefix = "filesystem error: ";
    if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
    const size_t cut = what.find(": ");
    fmt::print(stderr, "saobp: error: [fs] {}{}: {}\n", e.path1().string(),
               cut == std::string::npos ? "" : " (" + what.substr(0, cut) + ")", e.code().message());
    return finish(1);
  } catch (const std::exception& e) {
    fmt::print(stderr, "saobp: unexpected error: {}\n", e.what());
    return finish(2);
  }
}
