// WikiText in the official distribution (Merity et al. 2016, the Salesforce zips):
// wikitext-2/ and wikitext-103/ hold wiki.{train,valid,test}.tokens (tokenized: rare words as
// <unk>, "@-@" "@,@" "@.@" inside numbers and compounds), wikitext-2-raw/ and wikitext-103-raw/
// hold wiki.{train,valid,test}.raw. Each is UTF-8 text, one paragraph or heading a line, every
// line starting with a space (" = Title = ", " = = Section = = ", " " for a blank line). The
// split's text is returned byte for byte; a file that is not UTF-8 is "FILE:LINE: what".
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/lines.h"
#include "data/unicode.h"

namespace saobp::bench {

std::string read_wikitext(const std::string& path_or_dir, const std::string& split, std::string* file) {
  const std::string s = split == "dev" ? "valid" : split;
  if (s != "train" && s != "valid" && s != "test")
    fail("benchmarks", "unknown WikiText split \"{}\" (train, valid or test)", split);
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string path = path_or_dir;
  if (fs::is_directory(path_or_dir, ec)) {
    const std::string tokens = (fs::path(path_or_dir) / fmt::format("wiki.{}.tokens", s)).string();
    const std::string raw = (fs::path(path_or_dir) / fmt::format("wiki.{}.raw", s)).string();
    if (names_a_file(tokens))
      path = tokens;
    else if (names_a_file(raw))
      path = raw;
    else
      fail("benchmarks", "{}: neither wiki.{}.tokens nor wiki.{}.raw there (WikiText)", path_or_dir, s, s);
  } else if (!names_a_file(path_or_dir)) {
    fail("benchmarks", "{}: no such file or folder (WikiText: wiki.{}.tokens or wiki.{}.raw)", path_or_dir, s,
         s);
  }

  std::string text = read_file(path);
  if (const size_t bad = uni::find_invalid_utf8(text); bad != std::string::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    const size_t from = text.rfind('\n', bad);
    const size_t col = bad - (from == std::string::npos ? 0 : from + 1);
    fail_at(path, line,
            fmt::format("invalid UTF-8 at byte {} of the line (0x{:02X})", col,
                        static_cast<unsigned char>(text[bad])));
  }
  if (file) *file = path;
  return text;
}

}  // namespace saobp::bench
