// Line-oriented reading shared by the benchmark readers (GLUE, BoolQ, HellaSwag, sentence TSV, ...):
// a streaming line reader that numbers lines from 1 and strips the '\n' and one trailing '\r',
// the one message format for bad input, "[benchmarks] FILE:LINE: what", and the skip-or-throw
// rule of ReadOptions::skip_bad_rows.
//
//   LineReader in(path);                       // throws "[benchmarks] cannot open PATH: ..."
//   std::string line;
//   while (in.next(line)) {
//     const std::string bad = utf8_problem(line);
//     if (!bad.empty()) { bad_row(opt, stats, in.path(), in.line(), bad); continue; }
//     ...
//   }
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/benchmarks/benchmarks.h"

namespace saobp::bench {

// "FILE:LINE: what" (the form kept in ReadStats::skipped_at).
std::string at(const std::string& file, int64_t line, std::string_view what);

// Throws saobp::Error("[benchmarks] FILE:LINE: what").
[[noreturn]] void fail_at(const std::string& file, int64_t line, std::string_view what);

// A malformed row: throws as fail_at, or with opt.skip_bad_rows counts it in stats.skipped and
// keeps at(file, line, what) in stats.skipped_at (the first 10) and returns.
void bad_row(const ReadOptions& opt, ReadStats& stats, const std::string& file, int64_t line,
             std::string_view what);

// "" when `s` is valid UTF-8, else "invalid UTF-8 at byte N of the line" (N from 0).
std::string utf8_problem(std::string_view s);

// Fields of a tab-separated line, split on every '\t' with no quote processing (an empty line
// is one empty field). The views point into `line`.
std::vector<std::string_view> split_tabs(std::string_view line);

class LineReader;

// Reads line 1 of a tab-separated file and checks it is exactly `columns` joined by '\t'; throws
// "[benchmarks] FILE:1: header "..." is not the LAYOUT header (expected "...")" (or "empty file").
void expect_header(LineReader& in, const std::vector<std::string>& columns, std::string_view layout);

// Reads a file line by line. A last line without '\n' is still a line; nothing follows a final
// '\n'. Lines keep every byte but the '\n' and one '\r' before it (CRLF files read as LF), and
// a UTF-8 byte order mark at the start of the file is dropped (GLUE's MRPC train/dev.tsv have one).
class LineReader {
 public:
  // Throws Error("[benchmarks] cannot read PATH: <strerror>"), or "... not a regular file (a
  // directory)" (a FIFO, a device) before opening it: a FIFO would block, a device never end.
  explicit LineReader(const std::string& path);
  // The next line into `line`; false at the end of the file (line number unchanged).
  bool next(std::string& line);
  int64_t line() const { return line_; }  // 1-based number of the line last returned
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_ = 0;
};

}  // namespace saobp::bench
