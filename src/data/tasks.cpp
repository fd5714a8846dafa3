#include "data/tasks.h"

#include <algorithm>
#include <functional>
#include <map>

#include "tensor/philox.h"

namespace saobp::tasks {

namespace {

// ---- streams ------------------------------------------------------------------------------
// An example's draws are the words 0, 1, 2, ... of the Philox stream mix(split, length, index)
// under the run's seed; training lengths come from a stream of their own.

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t kTrainStream = 0x7461736b2d747261ull;   // "task-tra"
constexpr uint64_t kTestStream = 0x7461736b2d746573ull;    // "task-tes"
constexpr uint64_t kLengthStream = 0x7461736b2d6c656eull;  // "task-len"

uint64_t example_stream(Split split, int64_t length, uint64_t index) {
  const uint64_t s = split == Split::train ? kTrainStream : kTestStream;
  return splitmix(splitmix(s ^ static_cast<uint64_t>(length)) ^ index);
}

class Draws {
 public:
  Draws(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  uint32_t word() { return philox::word(seed_, stream_, next_++); }
  // Uniform in [0, n) (n < 2^32; the bias of the multiply-shift is below n / 2^32).
  int32_t below(int64_t n) {
    return static_cast<int32_t>((static_cast<uint64_t>(word()) * static_cast<uint64_t>(n)) >> 32);
  }
  bool chance(double p) { return philox::to_unit_float(word()) < p; }

 private:
  uint64_t seed_, stream_, next_ = 0;
};

int32_t digit(int32_t d) { return kDigit + d; }
int32_t letter(int32_t i) { return kLetter + i; }
bool is_digit(int32_t tok) { return tok >= kDigit && tok < kDigit + kDigits; }
bool is_letter(int32_t tok) { return tok >= kLetter && tok < kLetter + kLetters; }

struct Named {
  const char* name;
  Kind kind;
  bool sep;
};
constexpr Named kTasks[] = {
    {"copy_first", Kind::copy_first, false},
    {"copy_last", Kind::copy_last, false},
    {"copy_first_blocks", Kind::copy_first_blocks, false},
    {"copy_last_blocks", Kind::copy_last_blocks, false},
    {"count_sum", Kind::count_sum, false},
    {"count_sum_sep", Kind::count_sum, true},
    {"count_ones", Kind::count_ones, false},
    {"count_ones_sep", Kind::count_ones, true},
    {"count_random", Kind::count_random, false},
    {"count_random_sep", Kind::count_random, true},
    {"count_word", Kind::count_word, false},
    {"count_word_sep", Kind::count_word, true},
    {"chase2", Kind::chase2, false},
    {"chase3", Kind::chase3, false},
};

int hops(Kind k) { return k == Kind::chase2 ? 2 : 3; }

// A counting body of n tokens: items from `item()`, a kSep after every kGroup-th item when
// `sep`; the body is cut at n tokens (so it may end on a separator).
template <class F>
void count_body(std::vector<int32_t>& out, int64_t n, bool sep, F item) {
  int64_t items = 0;
  while (static_cast<int64_t>(out.size()) < n) {
    out.push_back(item());
    ++items;
    if (sep && items % kGroup == 0 && static_cast<int64_t>(out.size()) < n) out.push_back(kSep);
  }
}

[[noreturn]] void malformed(const TaskSpec& t, const std::vector<int32_t>& tokens, const char* why) {
  fail("tasks", "{}: malformed sequence ({}): {}", t.name, why, render(tokens));
}

}  // namespace

TaskSpec task_spec(const std::string& name) {
  for (const Named& n : kTasks) {
    if (name != n.name) continue;
    TaskSpec t;
    t.name = name, t.kind = n.kind, t.sep = n.sep;
    switch (n.kind) {
      case Kind::copy_first:
      case Kind::copy_last:
      case Kind::copy_first_blocks:
      case Kind::copy_last_blocks:
        t.num_classes = kCopyAlphabet, t.min_length = 3;
        break;
      case Kind::count_sum:
      case Kind::count_ones:
      case Kind::count_random:
        t.num_classes = kMaxLength, t.min_length = 2;
        break;
      case Kind::count_word:
        t.num_classes = kMaxLength, t.min_length = 4;
        break;
      case Kind::chase2:
      case Kind::chase3:
        t.num_classes = kLetters, t.min_length = 3 + 3 * hops(n.kind);
        break;
    }
    return t;
  }
  std::string all;
  for (const std::string& s : task_names()) all += (all.empty() ? "" : ", ") + s;
  fail("tasks", "unknown task '{}'; the tasks are {}", name, all);
}

std::vector<std::string> task_names() {
  std::vector<std::string> v;
  for (const Named& n : kTasks) v.emplace_back(n.name);
  return v;
}

Example generate(const TaskSpec& t, uint64_t seed, Split split, int64_t length, uint64_t index) {
  if (length < t.min_length || length > kMaxLength)
    fail("tasks", "{}: length {} is outside [{}, {}]", t.name, length, t.min_length, kMaxLength);
  Draws r(seed, example_stream(split, length, index));
  Example e;
  std::vector<int32_t>& s = e.tokens;
  s.reserve(static_cast<size_t>(length));
  s.push_back(kCls);
  const int64_t body = length - 1;  // tokens after [CLS]
  switch (t.kind) {
    // [CLS] c 1 1 ... 1 / [CLS] 1 ... 1 c; blocks: c 1..1 c 1..1 ... (every kBlock-th from the copied end).
    case Kind::copy_first:
    case Kind::copy_last:
    case Kind::copy_first_blocks:
    case Kind::copy_last_blocks: {
      e.label = r.below(kCopyAlphabet);
      const bool first = t.kind == Kind::copy_first || t.kind == Kind::copy_first_blocks;
      const bool blocks = t.kind == Kind::copy_first_blocks || t.kind == Kind::copy_last_blocks;
      for (int64_t i = 0; i < body; ++i) {
        const int64_t from_end = first ? i : body - 1 - i;  // distance from the copied end
        const bool copied = blocks ? from_end % kBlock == 0 : from_end == 0;
        s.push_back(copied ? digit(e.label) : digit(1));
      }
      break;
    }
    // 1 + 1 + ... + 1, '=' last when the length ends on an operator; with sep, a '|' instead
    // of the '+' after every kGroup-th term.
    case Kind::count_sum: {
      int32_t terms = 0;
      while (static_cast<int64_t>(s.size()) < length) {
        s.push_back(digit(1));
        ++terms;
        if (static_cast<int64_t>(s.size()) < length) s.push_back(t.sep && terms % kGroup == 0 ? kSep : kPlus);
      }
      if (s.back() != digit(1)) s.back() = kEquals;
      e.label = terms;
      break;
    }
    case Kind::count_ones:
      count_body(s, length, t.sep, [] { return digit(1); });
      e.label = static_cast<int32_t>(std::count(s.begin(), s.end(), digit(1)));
      break;
    case Kind::count_random:
      count_body(s, length, t.sep, [&] { return digit(r.chance(kOnesProbability) ? 1 : 0); });
      e.label = static_cast<int32_t>(std::count(s.begin(), s.end(), digit(1)));
      break;
    // [CLS] words... ? q: the occurrences of q among the words.
    case Kind::count_word: {
      const int32_t q = letter(r.below(kWords));
      count_body(s, length - 2, t.sep, [&] { return letter(r.below(kWords)); });
      e.label = static_cast<int32_t>(std::count(s.begin(), s.end(), q));
      s.push_back(kQuery);
      s.push_back(q);
      break;
    }
    // [CLS] k>v k>v ... (shuffled) |* ? x0: the chain x0>x1>...>xH among distractors whose
    // keys are never a chain key, so every lookup along the chain is unique.
    case Kind::chase2:
    case Kind::chase3: {
      const int H = hops(t.kind);
      std::vector<int32_t> nodes(kLetters);
      for (int32_t i = 0; i < kLetters; ++i) nodes[static_cast<size_t>(i)] = i;
      for (int i = 0; i <= H; ++i)
        std::swap(nodes[static_cast<size_t>(i)], nodes[static_cast<size_t>(i + r.below(kLetters - i))]);
      const int64_t P = (length - 3) / 3, filler = (length - 3) % 3;
      std::vector<std::pair<int32_t, int32_t>> pairs;
      for (int i = 0; i < H; ++i)
        pairs.emplace_back(nodes[static_cast<size_t>(i)], nodes[static_cast<size_t>(i + 1)]);
      while (static_cast<int64_t>(pairs.size()) < P)  // keys from nodes[H..]: not x0 .. x(H-1)
        pairs.emplace_back(nodes[static_cast<size_t>(H + r.below(kLetters - H))], r.below(kLetters));
      for (size_t i = pairs.size() - 1; i > 0; --i)
        std::swap(pairs[i], pairs[static_cast<size_t>(r.below(static_cast<int64_t>(i) + 1))]);
      for (const auto& [k, v] : pairs) s.insert(s.end(), {letter(k), kArrow, letter(v)});
      s.insert(s.end(), static_cast<size_t>(filler), kSep);
      s.push_back(kQuery);
      s.push_back(letter(nodes[0]));
      e.label = nodes[static_cast<size_t>(H)];
      break;
    }
  }
  return e;
}

int32_t solve(const TaskSpec& t, const std::vector<int32_t>& s) {
  const int64_t L = static_cast<int64_t>(s.size());
  if (L < t.min_length || s[0] != kCls) malformed(t, s, "too short or no [CLS] first");
  auto only = [&](int64_t from, int64_t to, const std::vector<int32_t>& allowed) {
    for (int64_t i = from; i < to; ++i)
      if (std::find(allowed.begin(), allowed.end(), s[static_cast<size_t>(i)]) == allowed.end())
        malformed(t, s, "unexpected token");
  };
  auto count = [&](int64_t from, int64_t to, int32_t tok) {
    int32_t n = 0;
    for (int64_t i = from; i < to; ++i) n += s[static_cast<size_t>(i)] == tok;
    return n;
  };
  switch (t.kind) {
    case Kind::copy_first:
    case Kind::copy_last:
    case Kind::copy_first_blocks:
    case Kind::copy_last_blocks: {
      // The copied digit: the one at the copied end; every other position must hold it (block
      // starts) or '1'.
      const bool first = t.kind == Kind::copy_first || t.kind == Kind::copy_first_blocks;
      const int32_t c = s[static_cast<size_t>(first ? 1 : L - 1)];
      if (!is_digit(c) || c - kDigit >= kCopyAlphabet)
        malformed(t, s, "the copied token is not in the alphabet");
      only(1, L, {c, digit(1)});
      return c - kDigit;
    }
    case Kind::count_sum: {
      // Terms and operators alternate; the last token is a term or '='.
      for (int64_t i = 1; i < L; ++i) {
        const int32_t tok = s[static_cast<size_t>(i)];
        const bool term = i % 2 == 1;
        if (term ? tok != digit(1) : (tok != kPlus && tok != kSep && !(tok == kEquals && i == L - 1)))
          malformed(t, s, "terms and operators do not alternate");
        if (!t.sep && tok == kSep) malformed(t, s, "a separator in count_sum");
      }
      return count(1, L, digit(1));
    }
    case Kind::count_ones:
      only(1, L, t.sep ? std::vector<int32_t>{digit(1), kSep} : std::vector<int32_t>{digit(1)});
      return count(1, L, digit(1));
    case Kind::count_random:
      only(1, L,
           t.sep ? std::vector<int32_t>{digit(0), digit(1), kSep} : std::vector<int32_t>{digit(0), digit(1)});
      return count(1, L, digit(1));
    case Kind::count_word: {
      if (s[static_cast<size_t>(L - 2)] != kQuery || !is_letter(s[static_cast<size_t>(L - 1)]))
        malformed(t, s, "no '? word' at the end");
      for (int64_t i = 1; i < L - 2; ++i)
        if (!(is_letter(s[static_cast<size_t>(i)]) || (t.sep && s[static_cast<size_t>(i)] == kSep)))
          malformed(t, s, "unexpected token among the words");
      return count(1, L - 2, s[static_cast<size_t>(L - 1)]);
    }
    case Kind::chase2:
    case Kind::chase3: {
      // Parse the key>value triples (then filler and '? x0'), and follow the chain: every
      // lookup must find exactly one pair.
      if (s[static_cast<size_t>(L - 2)] != kQuery || !is_letter(s[static_cast<size_t>(L - 1)]))
        malformed(t, s, "no '? key' at the end");
      std::multimap<int32_t, int32_t> next;
      int64_t i = 1;
      for (; i + 2 < L - 2 && s[static_cast<size_t>(i)] != kSep; i += 3) {
        if (!is_letter(s[static_cast<size_t>(i)]) || s[static_cast<size_t>(i + 1)] != kArrow ||
            !is_letter(s[static_cast<size_t>(i + 2)]))
          malformed(t, s, "not a key>value pair");
        next.emplace(s[static_cast<size_t>(i)], s[static_cast<size_t>(i + 2)]);
      }
      only(i, L - 2, {kSep});
      int32_t cur = s[static_cast<size_t>(L - 1)];
      for (int h = 0; h < hops(t.kind); ++h) {
        if (next.count(cur) != 1) malformed(t, s, "a lookup on the chain is missing or ambiguous");
        cur = next.find(cur)->second;
      }
      return cur - kLetter;
    }
  }
  malformed(t, s, "unknown kind");
}

std::vector<int32_t> running_counts(const TaskSpec& t, const std::vector<int32_t>& s) {
  const int32_t label = solve(t, s);  // checks the format first
  const auto L = static_cast<int64_t>(s.size());
  // Which positions are counted items, and which of them add one.
  std::function<bool(int32_t)> item, counted;
  int64_t end = L;
  switch (t.kind) {
    case Kind::count_sum:
    case Kind::count_ones:
      item = counted = [](int32_t tok) { return tok == digit(1); };
      break;
    case Kind::count_random:
      item = [](int32_t tok) { return tok == digit(0) || tok == digit(1); };
      counted = [](int32_t tok) { return tok == digit(1); };
      break;
    case Kind::count_word: {
      const int32_t query = s[static_cast<size_t>(L - 1)];
      end = L - 2;  // before '? q'
      item = is_letter;
      counted = [query](int32_t tok) { return tok == query; };
      break;
    }
    default:
      fail("tasks", "{}: not a counting task: it has no running count", t.name);
  }
  std::vector<int32_t> out;
  int32_t n = 0;
  for (int64_t i = 1; i < end; ++i) {
    const int32_t tok = s[static_cast<size_t>(i)];
    if (!item(tok)) continue;
    n += counted(tok);
    out.push_back(n);
  }
  SAOBP_CHECK(out.empty() ? label == 0 : out.back() == label, "tasks",
              "{}: the running count ends at {}, the label is {}", t.name, out.empty() ? 0 : out.back(),
              label);
  return out;
}

std::vector<int32_t> answer_tokens(const TaskSpec& t, const std::vector<int32_t>& s, bool chain) {
  const std::vector<int32_t> counts = running_counts(t, s);
  std::vector<int32_t> out;
  if (chain)
    for (int32_t c : counts) out.push_back(kCount + c);
  out.push_back(kAnswer);
  out.push_back(kCount + (counts.empty() ? 0 : counts.back()));
  return out;
}

int64_t train_length(const TaskSpec& t, uint64_t seed, uint64_t index, int64_t max_length) {
  if (max_length < t.min_length || max_length > kMaxLength)
    fail("tasks", "{}: train.seq_len {} is outside [{}, {}]", t.name, max_length, t.min_length, kMaxLength);
  Draws r(seed, splitmix(kLengthStream ^ index));
  return t.min_length + r.below(max_length - t.min_length + 1);
}

std::vector<int64_t> train_lengths(const TaskSpec& t, uint64_t seed, uint64_t first, int64_t n,
                                   int64_t max_length) {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < n; ++b)
    lengths.push_back(train_length(t, seed, first + static_cast<uint64_t>(b), max_length));
  return lengths;
}

Batch make_batch(const TaskSpec& t, uint64_t seed, Split split, const std::vector<int64_t>& lengths,
                 uint64_t first_index) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (B == 0) fail("tasks", "{}: an empty batch", t.name);
  const int64_t T = *std::max_element(lengths.begin(), lengths.end());
  std::vector<int32_t> ids(static_cast<size_t>(B * T), kPad);
  std::vector<uint8_t> mask(static_cast<size_t>(B * T), 0);
  Batch b;
  for (int64_t i = 0; i < B; ++i) {
    const Example e =
        generate(t, seed, split, lengths[static_cast<size_t>(i)], first_index + static_cast<uint64_t>(i));
    std::copy(e.tokens.begin(), e.tokens.end(), ids.begin() + i * T);
    std::fill_n(mask.begin() + i * T, e.tokens.size(), uint8_t{1});
    b.labels.push_back(e.label);
  }
  b.ids = Tensor::from_vector(ids, {B, T});
  b.key_mask = Tensor::from_vector(mask, {B, T});
  b.lengths = lengths;
  return b;
}

std::string render(const std::vector<int32_t>& tokens) {
  std::string out;
  for (const int32_t tok : tokens) {
    if (!out.empty()) out += ' ';
    switch (tok) {
      case kPad:
        out += "[PAD]";
        break;
      case kCls:
        out += "[CLS]";
        break;
      case kSep:
        out += '|';
        break;
      case kQuery:
        out += '?';
        break;
      case kArrow:
        out += '>';
        break;
      case kPlus:
        out += '+';
        break;
      case kEquals:
        out += '=';
        break;
      default:
        if (is_digit(tok))
          out += static_cast<char>('0' + tok - kDigit);
        else if (is_letter(tok))
          out += static_cast<char>('a' + tok - kLetter);
        else if (tok == kAnswer)
          out += "=>";
        else if (tok >= kCount && tok < kLmVocabSize)
          out += fmt::format("#{}", tok - kCount);
        else
          out += fmt::format("<{}>", tok);
    }
  }
  return out;
}

std::string label_name(const TaskSpec& t, int32_t label) {
  if (t.kind == Kind::chase2 || t.kind == Kind::chase3) return std::string(1, static_cast<char>('a' + label));
  return std::to_string(label);
}

}  // namespace saobp::tasks
