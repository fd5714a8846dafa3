// Helpers of the benchmark reader tests (test_benchmarks_text.cpp, test_benchmarks_qa.cpp): the
// fixtures folder, a fresh temp folder per test, files written into it, and the matchers of the
// error message checks (CHECK_ERROR comes with support.h).
#pragma once
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "support.h"  // CHECK_ERROR

namespace saobp::bench_test {

// The matchers of the error message checks.
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The hand-made files in the official layouts.
inline const std::string kFixtures = std::string(SAOBP_SOURCE_DIR) + "/tests/fixtures";

// An empty folder <tmp>/saobp-bench-<name>-<pid>.
inline std::string temp_dir(const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("saobp-bench-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// Writes `text` to dir/rel (creating folders) and returns the path.
inline std::string write(const std::string& dir, const std::string& rel, const std::string& text) {
  const std::filesystem::path p = std::filesystem::path(dir) / rel;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// temp_dir(name) holding `files` (relative path, text), written in order (a later one replaces an
// earlier one of the same path); returns the folder.
inline std::string folder_with(const std::string& name,
                               const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = temp_dir(name);
  for (const auto& [rel, text] : files) write(dir, rel, text);
  return dir;
}

}  // namespace saobp::bench_test
