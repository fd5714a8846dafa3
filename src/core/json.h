// Guards for reading JSON that saobp did not write (benchmark files, Hugging Face folders,
// safetensors headers, results and study tables a user hands over). nlohmann's parser is
// iterative, but dump(), comparison and copying recurse: a value nested 10^5 deep would overflow
// the stack the first time an error message printed it. Every reader checks the depth before it
// parses, and messages show a short excerpt of a foreign value, never the whole of it.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/fs.h"

namespace saobp {

// Deeper than any file saobp reads needs (a SQuAD file is 6 levels, a tokenizer.json 5).
inline constexpr int kMaxJsonDepth = 128;

// The byte offset of the first '[' or '{' (outside strings) that opens level max_depth + 1, or
// std::string_view::npos when the text never nests that deep. Strings, escapes included, are
// skipped; the text need not be valid JSON.
size_t json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

// Throws Error "[op] WHERE:LINE:COL: JSON nested deeper than 128 levels" when the text nests too
// deep (`where` names the file; `first_line` is the file line the text starts on, for JSON Lines).
void check_json_depth(std::string_view text, const std::string& where, std::string_view op,
                      int64_t first_line = 1);

// read_file(path), its depth checked (check_json_depth, an Error naming the file), then parsed
// as Json (nlohmann::json, or ordered_json): nlohmann's exceptions for a syntax error reach the
// caller, which names the file its own way.
template <class Json = nlohmann::json>
Json read_json_file(const std::string& path, std::string_view op) {
  const std::string text = read_file(path);
  check_json_depth(text, path, op);
  return Json::parse(text);
}

// A value for a message: numbers, booleans and null as written, a string quoted and cut to 40
// bytes, an array or object as its type and size ("an array of 3", "an object of 2 keys").
std::string json_excerpt(const nlohmann::json& v);
std::string json_excerpt(const nlohmann::ordered_json& v);

// Typed reads of the keys of one JSON object of a file saobp did not write (a bench file, a
// results.json, a Hugging Face config.json): the schema check every such reader goes through
// instead of operator[] and value(), which are undefined behaviour or an exception naming
// nothing on a missing key or another type. A missing key takes the default given (or, without
// one, is an error); a value of another type is an Error "[op] WHERE: KEY is EXCERPT; expected
// TYPE", WHERE naming the file (and the object's place in it). An integer is a JSON integer
// within int64_t: 32.5 and 1e300 are refused, not cut or overflowed.
class JsonFields {
 public:
  // Throws "[op] WHERE: EXCERPT; expected an object" when `v` is not an object.
  JsonFields(const nlohmann::json& v, std::string where, std::string op);

  const nlohmann::json& value() const { return v_; }
  const std::string& where() const { return where_; }
  const nlohmann::json* find(const char* key) const;  // nullptr when absent
  [[noreturn]] void type_error(const char* key, const char* expected, const nlohmann::json& v) const;

  std::string string(const char* key) const;
  std::string string(const char* key, const std::string& dflt) const;
  int64_t integer(const char* key) const;
  int64_t integer(const char* key, int64_t dflt) const;
  double number(const char* key) const;
  double number(const char* key, double dflt) const;
  bool boolean(const char* key, bool dflt) const;

 private:
  const nlohmann::json* required(const char* key) const;
  const nlohmann::json& v_;
  std::string where_, op_;
};

}  // namespace saobp
