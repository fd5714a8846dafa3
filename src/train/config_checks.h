// What the config reader (config_schema.cpp) and the checks (config_checks.cpp) share.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>

#include "train/config.h"

namespace saobp {

// Where each key given was set: key -> "file:line:col: " or "override '...': ".
using ConfigOrigins = std::map<std::string, std::string>;

// The semantic checks; an error names the key, prefixed with where it was given (if in `origins`).
// FitCheck::no skips the memory estimate against the device (the size overflow checks stay).
void check_config(const RunConfig& cfg, const ConfigOrigins& origins, FitCheck fit = FitCheck::yes);

// Where `key` was given ("" when it was not).
inline std::string origin_of(const ConfigOrigins& origins, const std::string& key) {
  const auto it = origins.find(key);
  return it == origins.end() ? std::string() : it->second;
}

inline bool one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; });
}

}  // namespace saobp
