// Positions of values in whole-file JSON documents (see json_where.h).
#include "data/benchmarks/json_where.h"

#include <fmt/format.h>

#include <algorithm>

#include "data/unicode.h"

namespace saobp::bench {

using json = nlohmann::json;

std::string path_str(const JsonPath& path) {
  std::string out;
  for (const JsonStep& s : path) {
    if (s.index >= 0) {
      out += fmt::format("[{}]", s.index);
    } else {
      if (!out.empty()) out += '.';
      out += s.key;
    }
  }
  return out;
}

const char* json_kind(const json& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

namespace {

// A SAX handler that follows the path of every value and stops at the first one whose path is
// `target`, remembering where its token starts.
struct Locator {
  Locator(std::string_view text, const char* const* read, const JsonPath& target)
      : begin(text.data()), end(text.data() + text.size()), read(read), target(target), prev(text.data()) {}

  const char* begin;
  const char* end;
  const char* const* read;  // how far the lexer has read (ReadCursor)
  const JsonPath& target;
  const char* prev;  // where the lexer stood at the previous event
  size_t found = std::string_view::npos;
  std::vector<bool> in_array;  // one per open container
  std::vector<int64_t> next;   // the index of the next element, per open container
  JsonPath path;               // the step to the current child, per open container

  // A value (scalar or container start) was just read.
  bool value(bool opens, bool array = false) {
    const char* p = prev;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == ':')) ++p;
    prev = *read;
    if (!in_array.empty() && in_array.back()) path.back() = JsonStep{"", next.back()++};
    if (path == target) {
      found = static_cast<size_t>(p - begin);
      return false;
    }
    if (opens) {
      in_array.push_back(array);
      next.push_back(0);
      path.emplace_back();
    }
    return true;
  }
  bool close() {
    prev = *read;
    in_array.pop_back();
    next.pop_back();
    path.pop_back();
    return true;
  }

  bool null() { return value(false); }
  bool boolean(bool) { return value(false); }
  bool number_integer(json::number_integer_t) { return value(false); }
  bool number_unsigned(json::number_unsigned_t) { return value(false); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(false); }
  bool string(json::string_t&) { return value(false); }
  bool binary(json::binary_t&) { return value(false); }
  bool start_object(std::size_t) { return value(true, false); }
  bool start_array(std::size_t) { return value(true, true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    prev = *read;
    path.back() = JsonStep{k, -1};
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

}  // namespace

size_t json_offset(std::string_view text, const JsonPath& path) {
  const char* read = text.data();
  Locator loc(text, &read, path);
  json::sax_parse(ReadCursor(text.data(), &read), ReadCursor(text.data() + text.size(), &read), &loc);
  return loc.found;
}

std::string where(const std::string& file, std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const size_t nl = before.rfind('\n');
  const size_t col = offset - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
  return fmt::format("{}:{}:{}", file, line, col);
}

std::string json_at(const std::string& file, std::string_view whole, std::string_view text, size_t base,
                    const JsonPath& shown, const JsonPath& path, std::string_view what) {
  const size_t off = json_offset(text, path);
  const std::string at = where(file, whole, base + (off == std::string_view::npos ? 0 : off));
  if (shown.empty()) return fmt::format("{}: {}", at, what);
  return fmt::format("{}: {}: {}", at, path_str(shown), what);
}

std::string json_reason(const json::parse_error& e) {
  const std::string what = e.what();
  const size_t col = what.find(", column ");
  const size_t colon = col == std::string::npos ? std::string::npos : what.find(": ", col);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

std::string json_syntax_error(const std::string& file, std::string_view text, const json::parse_error& e) {
  // e.byte counts from 1 and names the byte the lexer stopped on.
  return fmt::format("{}: not valid JSON: {}", where(file, text, e.byte > 0 ? e.byte - 1 : 0),
                     json_reason(e));
}

std::string utf8_error(const std::string& file, std::string_view text) {
  const size_t i = uni::find_invalid_utf8(text);
  if (i == std::string_view::npos) return "";
  return fmt::format("{}: invalid UTF-8 (byte 0x{:02X})", where(file, text, i),
                     static_cast<unsigned char>(text[i]));
}

}  // namespace saobp::bench
