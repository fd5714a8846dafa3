// What every libFuzzer harness of fuzz/ shares (docs/reliability.md):
//  - a per-process temporary folder for readers that take a path (removed at exit), with a
//    fresh `case/` folder for every input, so no file of one input leaks into the next;
//  - Input, a cursor that splits one fuzz input into a selector byte and '\0'-separated parts,
//    and BenchInput, the common start of the benchmark harnesses;
//  - check(fn): runs fn and swallows saobp::Error, the clean rejection of bad input. Every other
//    exception escapes, aborts the process and is reported by libFuzzer as a crash, as are
//    sanitizer reports, timeouts (-timeout) and memory beyond -rss_limit_mb.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/benchmarks/benchmarks.h"

namespace saobp::fuzz {

namespace fs = std::filesystem;

// The process's own folder under $TMPDIR (default /tmp), made on first use and removed at exit.
// The path is made once and never destroyed: a static path would be destroyed at exit before the
// handler that removes the folder runs (the handler is registered first, so it runs last), and
// the handler would read freed memory (libFuzzer ends a run with exit()).
inline const fs::path& temp_root() {
  static const fs::path* const root = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/saobp-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) std::abort();
    const auto* made = new fs::path(pattern);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(temp_root(), ec);
    });
    return made;
  }();
  return *root;
}

// An empty temp_root()/case/ for the current input.
inline fs::path fresh_case() {
  const fs::path dir = temp_root() / "case";
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes `bytes` to `dir`/`rel` (creating the folders on the way) and returns the path.
inline std::string put(const fs::path& dir, const std::string& rel, std::string_view bytes) {
  const fs::path p = dir / rel;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p.string();
}

// One fuzz input read front to back: selector() takes the first byte (0 when empty), part()
// the bytes up to the next '\0' (or all that is left when `last`).
class Input {
 public:
  Input(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}
  uint8_t selector() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return b;
  }
  std::string_view part(bool last = false) {
    const size_t nul = last ? std::string_view::npos : rest_.find('\0');
    const std::string_view out = rest_.substr(0, nul);
    rest_.remove_prefix(nul == std::string_view::npos ? rest_.size() : nul + 1);
    return out;
  }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

// The start of a benchmark harness: the input after its selector byte, the selector, the
// ReadOptions (selector bit 0: skip_bad_rows) and a fresh case folder.
struct BenchInput : Input {
  BenchInput(const uint8_t* data, size_t size) : Input(data, size), sel(selector()), dir(fresh_case()) {
    opt.skip_bad_rows = (sel & 1) != 0;
  }
  uint8_t sel;
  fs::path dir;
  bench::ReadOptions opt;
};

template <class F>
void check(F&& fn) {
  try {
    fn();
  } catch (const saobp::Error&) {
    // The expected rejection of bad input; anything else escapes and is a finding.
  }
}

}  // namespace saobp::fuzz
