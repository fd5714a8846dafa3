// saobp::Error: the one exception type of the library. Messages start with "[op]" and name the
// offending shapes, or the file and line of bad input. Only main() catches, prints and exits.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace saobp {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// fail("matmul", "shapes {} and {} do not match", a, b) throws Error("[matmul] shapes ...").
template <class... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format("[{}] {}", op, fmt::format(f, std::forward<Args>(args)...)));
}

}  // namespace saobp

// SAOBP_CHECK(cond, "op", "message {}", x): throws saobp::Error when cond is false.
#define SAOBP_CHECK(cond, op, ...)               \
  do {                                           \
    if (!(cond)) ::saobp::fail(op, __VA_ARGS__); \
  } while (0)
