// A char iterator over a buffer for nlohmann-json's parsers that publishes how far the lexer has
// read, so a SAX handler or parser callback can tell the line and column of each value (the
// tokenizer files' reader, the benchmark readers' error locations).
#pragma once
#include <cstddef>
#include <iterator>

namespace saobp {

// Each step stores the new position in *read (one past the last byte taken).
class ReadCursor {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  ReadCursor() = default;
  ReadCursor(const char* p, const char** read) : p_(p), read_(read) {}
  reference operator*() const { return *p_; }
  ReadCursor& operator++() {
    *read_ = ++p_;
    return *this;
  }
  ReadCursor operator++(int) {
    ReadCursor old = *this;
    ++*this;
    return old;
  }
  friend bool operator==(const ReadCursor& a, const ReadCursor& b) { return a.p_ == b.p_; }

 private:
  const char* p_ = nullptr;
  const char** read_ = nullptr;
};

}  // namespace saobp
