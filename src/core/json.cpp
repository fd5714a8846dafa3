#include "core/json.h"

#include <fmt/format.h>

#include <cstdint>

#include "core/error.h"

namespace saobp {

size_t json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

void check_json_depth(std::string_view text, const std::string& where, std::string_view op,
                      int64_t first_line) {
  const size_t at = json_too_deep_at(text);
  if (at == std::string_view::npos) return;
  int64_t line = first_line;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  fail(op, "{}:{}:{}: JSON nested deeper than {} levels", where, line, at - line_start + 1, kMaxJsonDepth);
}

namespace {

template <class Json>
std::string excerpt(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.template get_ref<const std::string&>();
    if (s.size() <= 40) return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
    return Json(s.substr(0, 40)).dump(-1, ' ', false, Json::error_handler_t::replace) +
           fmt::format(" (cut; {} bytes)", s.size());
  }
  if (v.is_array()) return fmt::format("an array of {}", v.size());
  if (v.is_object()) return fmt::format("an object of {} key{}", v.size(), v.size() == 1 ? "" : "s");
  return v.dump();  // a number, a boolean or null: short
}

}  // namespace

std::string json_excerpt(const nlohmann::json& v) { return excerpt(v); }
std::string json_excerpt(const nlohmann::ordered_json& v) { return excerpt(v); }

JsonFields::JsonFields(const nlohmann::json& v, std::string where, std::string op)
    : v_(v), where_(std::move(where)), op_(std::move(op)) {
  if (!v_.is_object()) fail(op_, "{}: {}; expected an object", where_, json_excerpt(v_));
}

const nlohmann::json* JsonFields::find(const char* key) const {
  const auto it = v_.find(key);
  return it == v_.end() ? nullptr : &*it;
}

void JsonFields::type_error(const char* key, const char* expected, const nlohmann::json& v) const {
  fail(op_, "{}: {} is {}; expected {}", where_, key, json_excerpt(v), expected);
}

const nlohmann::json* JsonFields::required(const char* key) const {
  const nlohmann::json* v = find(key);
  if (!v) fail(op_, "{}: {} is missing", where_, key);
  return v;
}

std::string JsonFields::string(const char* key) const {
  const nlohmann::json* v = required(key);
  if (!v->is_string()) type_error(key, "a string", *v);
  return v->get<std::string>();
}
std::string JsonFields::string(const char* key, const std::string& dflt) const {
  return find(key) ? string(key) : dflt;
}

int64_t JsonFields::integer(const char* key) const {
  const nlohmann::json* v = required(key);
  // An unsigned integer past int64_t's range is refused too (get<int64_t> would wrap it).
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    type_error(key, "an integer", *v);
  return v->get<int64_t>();
}
int64_t JsonFields::integer(const char* key, int64_t dflt) const { return find(key) ? integer(key) : dflt; }

double JsonFields::number(const char* key) const {
  const nlohmann::json* v = required(key);
  if (!v->is_number()) type_error(key, "a number", *v);
  return v->get<double>();
}
double JsonFields::number(const char* key, double dflt) const { return find(key) ? number(key) : dflt; }

bool JsonFields::boolean(const char* key, bool dflt) const {
  const nlohmann::json* v = find(key);
  if (!v) return dflt;
  if (!v->is_boolean()) type_error(key, "true or false", *v);
  return v->get<bool>();
}

}  // namespace saobp
