// The test runner: Catch2's, after the task kinds above src/train/ are registered, as the saobp
// binary registers them (tools/cli/main.cpp). Every test's temporary files go to a folder of
// this process's own (TMPDIR, which std::filesystem::temp_directory_path and the programs the
// tests start read), removed when the run ends, so test runs leave nothing in the system's /tmp.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "finetune/finetune.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("saobp-tests-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(tmp, ec);
  const bool own_tmp = !ec;
  if (own_tmp) ::setenv("TMPDIR", tmp.c_str(), 1);
  saobp::finetune::register_tasks();
  const int rc = Catch::Session().run(argc, argv);
  if (own_tmp) fs::remove_all(tmp, ec);
  return rc;
}
