// Line reading, message formatting and the skip_bad_rows rule shared by the benchmark readers
// (see lines.h).
#include "data/benchmarks/lines.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "data/unicode.h"

namespace saobp::bench {

std::string at(const std::string& file, int64_t line, std::string_view what) {
  return fmt::format("{}:{}: {}", file, line, what);
}

void fail_at(const std::string& file, int64_t line, std::string_view what) {
  throw Error("[benchmarks] " + at(file, line, what));
}

void bad_row(const ReadOptions& opt, ReadStats& stats, const std::string& file, int64_t line,
             std::string_view what) {
  if (!opt.skip_bad_rows) fail_at(file, line, what);
  ++stats.skipped;
  if (stats.skipped_at.size() < 10) stats.skipped_at.push_back(at(file, line, what));
}

std::string utf8_problem(std::string_view s) {
  const size_t i = uni::find_invalid_utf8(s);
  if (i == std::string_view::npos) return "";
  return fmt::format("invalid UTF-8 at byte {} of the line (0x{:02X})", i, static_cast<unsigned char>(s[i]));
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for (;;) {
    const size_t tab = line.find('\t', from);
    if (tab == std::string_view::npos) break;
    out.push_back(line.substr(from, tab - from));
    from = tab + 1;
  }
  out.push_back(line.substr(from));
  return out;
}

namespace {

// A header line for a message: tabs shown as "\t", bad UTF-8 as U+FFFD, at most 300 bytes.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 300)) {
    if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  if (s.size() > 300) out += "...";
  return uni::utf8_lossy(out);
}

}  // namespace

void expect_header(LineReader& in, const std::vector<std::string>& columns, std::string_view layout) {
  std::string expected, line;
  for (const auto& c : columns) expected += (expected.empty() ? "" : "\t") + c;
  if (!in.next(line))
    fail_at(in.path(), 1, fmt::format("empty file (expected the {} header \"{}\")", layout, shown(expected)));
  if (line != expected)
    fail_at(in.path(), 1,
            fmt::format("header \"{}\" is not the {} header (expected \"{}\")", shown(line), layout,
                        shown(expected)));
}

LineReader::LineReader(const std::string& path) : path_(path) {
  require_regular_file(path, "benchmarks");  // a FIFO would block, a device never end
  in_.open(path, std::ios::binary);
  if (!in_) fail("benchmarks", "cannot open {}: {}", path, std::strerror(errno));
}

bool LineReader::next(std::string& line) {
  if (!std::getline(in_, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (++line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
  return true;
}

}  // namespace saobp::bench
