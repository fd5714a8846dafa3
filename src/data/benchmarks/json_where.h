// Where a value sits in a whole-file JSON document, for the messages of the SQuAD and RACE
// readers: the value's JSON path ("data[3].paragraphs[0].qas[7].answers[1].answer_start"), its
// byte offset found by a second, position-tracking SAX pass over the text (run only when there
// is something to report), its line and column, and the message form
// "FILE:LINE:COL: PATH: what" (a compiler's FILE:LINE:COL, then the path, which stays readable
// when the official file is one 40 MB line).
//
// nlohmann's SAX events carry no position, so ReadCursor, the char iterator handed to the parser,
// publishes how far the lexer has read: at an event the lexer has just read the value's token
// (and, after a number, one byte more), so the value starts at the first byte after the previous
// event that is not whitespace, ',' or ':'.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/read_cursor.h"

namespace saobp::bench {

// One step of a JSON path: an object member (key) or an array element (index >= 0).
struct JsonStep {
  std::string key;
  int64_t index = -1;
  friend bool operator==(const JsonStep&, const JsonStep&) = default;
};
using JsonPath = std::vector<JsonStep>;

// A bad value found while walking a parsed document: its JSON path and what is wrong with it. The
// SQuAD and RACE readers throw it where they find the value and catch it where json_at can place
// it in the file's text.
struct BadJson {
  JsonPath path;
  std::string what;
};

// Throws BadJson{path, what}.
[[noreturn]] inline void bad_json(JsonPath path, std::string what) {
  throw BadJson{std::move(path), std::move(what)};
}

// "data[3].paragraphs[0]"; "" for the root.
std::string path_str(const JsonPath& path);

// "a list", "an object", "a string", "a number", "a boolean" or "null", for messages.
const char* json_kind(const nlohmann::json& v);

// Byte offset in `text` (one JSON document) where the value at `path` starts; npos when no value
// is there or the text is not JSON up to it.
size_t json_offset(std::string_view text, const JsonPath& path);

// "FILE:LINE:COL" of byte `offset` of `text` (both from 1, the column in bytes).
std::string where(const std::string& file, std::string_view text, size_t offset);

// "FILE:LINE:COL: SHOWN: what" where LINE:COL is the start of the value at `path` inside `text`,
// a piece of the file's `whole` text that starts at byte `base` of it (SQuAD looks inside one
// article); "SHOWN: " is left out when `shown` is the root. The short form: the whole file.
std::string json_at(const std::string& file, std::string_view whole, std::string_view text, size_t base,
                    const JsonPath& shown, const JsonPath& path, std::string_view what);
inline std::string json_at(const std::string& file, std::string_view text, const JsonPath& path,
                           std::string_view what) {
  return json_at(file, text, text, 0, path, path, what);
}

// nlohmann's reason for a parse error, without its "[json.exception...] parse error at line L,
// column C: " prefix ("syntax error while parsing value - unexpected ']'; ...").
std::string json_reason(const nlohmann::json::parse_error& e);

// "FILE:LINE:COL: not valid JSON: <reason>" at the byte the parser stopped on.
std::string json_syntax_error(const std::string& file, std::string_view text,
                              const nlohmann::json::parse_error& e);

// "FILE:LINE:COL: invalid UTF-8 (byte 0xXX)" when `text` is not UTF-8, else "".
std::string utf8_error(const std::string& file, std::string_view text);

using saobp::ReadCursor;  // core/read_cursor.h

}  // namespace saobp::bench
