#include "data/tokenizer_io.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"
#include "data/unicode.h"

namespace saobp::tok {

const JNode* JNode::get(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

int64_t line_of(std::string_view text, size_t pos) {
  int64_t line = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

namespace {

class Parser {
 public:
  Parser(std::string_view t, const std::string& f) : t_(t), file_(f) {}

  JNode document() {
    JNode v = value(0);
    ws();
    if (p_ != t_.size()) error("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view t_;
  const std::string& file_;
  size_t p_ = 0;
  int64_t line_ = 1;

  [[noreturn]] void error(std::string_view what) {
    fail("tokenizer", "{}:{}: malformed JSON: {}", file_, line_, what);
  }
  void ws() {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == '\n') ++line_;
      else if (c != ' ' && c != '\t' && c != '\r') break;
      ++p_;
    }
  }
  bool eat(char c) {
    ws();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(p_ < t_.size() ? fmt::format("expected '{}'", c) : fmt::format("expected '{}' before the end", c));
  }
  uint32_t hex4() {
    if (p_ + 4 > t_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = t_[p_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else error("bad \\u escape");
    }
    return v;
  }
  std::string string() {
    // Called with p_ on the opening quote.
    ++p_;
    std::string out;
    while (true) {
      if (p_ >= t_.size()) error("unterminated string");
      const char c = t_[p_];
      if (c == '"') {
        ++p_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("control character inside a string");
      if (c == '\\') {
        if (++p_ >= t_.size()) error("unterminated string");
        const char e = t_[p_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (p_ + 2 > t_.size() || t_[p_] != '\\' || t_[p_ + 1] != 'u') error("unpaired surrogate escape");
              p_ += 2;
              const uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) error("unpaired surrogate escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              error("unpaired surrogate escape");
            }
            uni::append_utf8(out, static_cast<int32_t>(cp));
            break;
          }
          default: error("bad escape");
        }
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x80) {
        out += c;
        ++p_;
        continue;
      }
      const size_t start = p_;
      if (uni::next_cp(t_, p_) < 0) error(fmt::format("invalid UTF-8 at byte {}", start));
      out.append(t_.substr(start, p_ - start));
    }
  }
  JNode value(int depth) {
    if (depth > 64) error("nesting deeper than 64");
    ws();
    JNode v;
    v.line = line_;
    if (p_ >= t_.size()) error("unexpected end of file");
    const char c = t_[p_];
    if (c == '{') {
      ++p_;
      v.kind = JNode::object;
      if (eat('}')) return v;
      do {
        ws();
        if (p_ >= t_.size() || t_[p_] != '"') error("expected a string key");
        std::string k = string();
        expect(':');
        v.members.emplace_back(std::move(k), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++p_;
      v.kind = JNode::array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JNode::string;
      v.str = string();
    } else if (t_.substr(p_, 4) == "true") {
      p_ += 4, v.kind = JNode::boolean, v.b = true;
    } else if (t_.substr(p_, 5) == "false") {
      p_ += 5, v.kind = JNode::boolean;
    } else if (t_.substr(p_, 4) == "null") {
      p_ += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = p_;
      bool integral = true;
      if (t_[p_] == '-') ++p_;
      while (p_ < t_.size()) {
        const char d = t_[p_];
        if (d >= '0' && d <= '9') ++p_;
        else if (d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-') integral = false, ++p_;
        else break;
      }
      const std::string_view s = t_.substr(start, p_ - start);
      v.kind = JNode::number;
      if (integral) {
        auto r = std::from_chars(s.data(), s.data() + s.size(), v.i);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size()) error(fmt::format("bad number '{}'", s));
        v.integral = true;
        v.num = static_cast<double>(v.i);
      } else {
        char* end = nullptr;
        const std::string tmp(s);
        v.num = std::strtod(tmp.c_str(), &end);
        if (end != tmp.c_str() + tmp.size()) error(fmt::format("bad number '{}'", s));
      }
    } else {
      error(fmt::format("unexpected character '{}'", c));
    }
    return v;
  }
};

}  // namespace

JNode parse_json(std::string_view text, const std::string& file) { return Parser(text, file).document(); }

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace saobp::tok
