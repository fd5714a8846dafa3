// load_tokenizer (which files, which model) and VocabTrainer (HF's BpeTrainer / WordPieceTrainer
// algorithm, made deterministic).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <istream>
#include <limits>
#include <ostream>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "core/fs.h"
#include "data/unicode.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer_io.h"
#include "tokenizer/wordpiece.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& file) {
  const std::string text = read_file(file);
  const tok::JNode root = tok::parse_json(text, file);
  if (root.kind != tok::JNode::object)
    fail("tokenizer", "{}:{}: tokenizer.json must hold a JSON object", file, root.line);
  const tok::JNode* model = root.get("model");
  if (!model || model->kind != tok::JNode::object)
    fail("tokenizer", "{}:{}: no \"model\" object", file, root.line);
  std::string type;
  if (const tok::JNode* t = model->get("type"); t && t->kind == tok::JNode::string)
    type = t->str;
  else
    type = model->get("merges") ? "BPE" : "WordPiece";
  if (type == "WordPiece") return WordPieceTokenizer::from_tokenizer_json(root, text, file);
  if (type == "BPE") return BpeTokenizer::from_tokenizer_json(root, file);
  fail("tokenizer", "{}:{}: model type '{}' is not supported (WordPiece or BPE)", file, model->line, type);
}

// BERT's normalization flags from a tokenizer_config.json next to vocab.txt, when there is one.
BertNormalizerOptions bert_options_near(const fs::path& dir) {
  BertNormalizerOptions o;
  const fs::path cfg = dir / "tokenizer_config.json";
  if (!fs::exists(cfg)) return o;
  const std::string file = cfg.string();
  const std::string text = read_file(file);
  const tok::JNode root = tok::parse_json(text, file);
  auto flag = [&](const char* key, bool dflt) {
    const tok::JNode* v = root.get(key);
    return v && v->kind == tok::JNode::boolean ? v->b : dflt;
  };
  o.lowercase = flag("do_lower_case", true);
  o.strip_accents = flag("strip_accents", o.lowercase);
  o.handle_chinese_chars = flag("tokenize_chinese_chars", true);
  return o;
}

}  // namespace

bool has_tokenizer_files(const std::string& dir) {
  const fs::path p(dir);
  std::error_code ec;
  return fs::exists(p / "tokenizer.json", ec) || fs::exists(p / "vocab.txt", ec) ||
         (fs::exists(p / "vocab.json", ec) && fs::exists(p / "merges.txt", ec));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) {
    if (fs::exists(p / "tokenizer.json")) return load_tokenizer_json((p / "tokenizer.json").string());
    if (fs::exists(p / "vocab.txt"))
      return WordPieceTokenizer::from_vocab_txt((p / "vocab.txt").string(), bert_options_near(p));
    if (fs::exists(p / "vocab.json") && fs::exists(p / "merges.txt"))
      return BpeTokenizer::from_files((p / "vocab.json").string(), (p / "merges.txt").string());
    fail("tokenizer", "{}: no tokenizer.json, vocab.txt, or vocab.json + merges.txt in this folder", path);
  }
  if (!fs::exists(p)) fail("tokenizer", "{}: no such file or folder", path);
  const std::string name = p.filename().string();
  if (name == "vocab.json") {
    const fs::path merges = p.parent_path() / "merges.txt";
    if (!fs::exists(merges)) fail("tokenizer", "{}: merges.txt is missing next to it", path);
    return BpeTokenizer::from_files(path, merges.string());
  }
  if (p.extension() == ".json") return load_tokenizer_json(path);
  return WordPieceTokenizer::from_vocab_txt(path, bert_options_near(p.parent_path()));
}

void tokenize_lines(const Tokenizer& tok, std::istream& in, std::ostream& out, const std::string& name,
                    const TokenizeLinesOptions& opt) {
  const SpecialTokens& sp = tok.special();
  const bool wrap = opt.special && tok.kind() == "wordpiece";  // a WordPiece vocabulary has both
  std::string line, text;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const size_t bad = uni::find_invalid_utf8(line); bad != std::string_view::npos)
      fail("tokenize", "{}:{}: invalid UTF-8 at byte {} of the line", name, n, bad);
    std::vector<int32_t> ids = tok.encode(line);
    if (wrap) ids.insert(ids.begin(), sp.cls), ids.push_back(sp.sep);
    text.clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) text += ' ';
      text += opt.tokens ? tok.id_to_token(ids[i]) : std::to_string(ids[i]);
    }
    text += '\n';
    out << text;
  }
  if (in.bad()) fail("tokenize", "{}: read error", name);
}

// ---- VocabTrainer ------------------------------------------------------------------------------
//
// HF's BpeTrainer::do_train: words with their counts, the initial alphabet, then repeatedly the
// most frequent adjacent pair (counted over all words, weighted by word count) becomes a new
// symbol. Pair counts are updated incrementally from the words that contain the merged pair, and a
// max-heap with lazy re-validation picks the next pair, so one merge costs time proportional to
// the words it touches, not to the corpus. WordPieceTrainer is the same with non-initial
// characters carrying the "##" prefix ("##a" + "##b" -> "##ab", "a" + "##b" -> "ab").
// Determinism: words are processed in byte order (HF iterates a HashMap) and ties in the heap are
// broken by the pair's strings, never by ids or addresses.

struct VocabTrainer::Impl {
  VocabTrainOptions opt;
  BertNormalizerOptions norm;
  std::unordered_map<std::string, int64_t> counts;
  std::string buf;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
};

VocabTrainer::VocabTrainer(const VocabTrainOptions& opt) : impl_(std::make_unique<Impl>()) {
  if (opt.kind != "wordpiece" && opt.kind != "bpe")
    fail("vocab", "kind must be wordpiece or bpe, got '{}'", opt.kind);
  if (opt.vocab_size < 1 || opt.vocab_size > std::numeric_limits<int32_t>::max())
    fail("vocab", "{} must be in [1, {}], got {}", opt.size_name, std::numeric_limits<int32_t>::max(),
         opt.vocab_size);
  if (opt.kind == "bpe" && opt.vocab_size < 257)
    fail("vocab",
         "{} = {} is below the 257 tokens every byte-level BPE vocabulary holds (256 "
         "bytes and <|endoftext|>)",
         opt.size_name, opt.vocab_size);
  if (opt.min_frequency < 0)
    fail("vocab", "min_frequency (--min-frequency) must be >= 0, got {}", opt.min_frequency);
  impl_->opt = opt;
  impl_->norm.lowercase = impl_->norm.strip_accents = opt.lowercase;
}

VocabTrainer::~VocabTrainer() = default;

void VocabTrainer::feed(std::string_view text) {
  Impl& m = *impl_;
  const size_t bad = uni::find_invalid_utf8(text);
  if (bad != std::string_view::npos) fail("vocab", "invalid UTF-8 at byte {} of a text", bad);
  if (m.opt.kind == "wordpiece") {
    m.buf.clear();
    m.spans.clear();
    bert_split(text, m.norm, m.buf, m.spans);
    for (const auto& [b, e] : m.spans) ++m.counts[m.buf.substr(b, e - b)];
  } else {
    gpt2_split(text, [&](size_t b, size_t e) { ++m.counts[std::string(text.substr(b, e - b))]; });
  }
}

namespace {

inline uint64_t key_of(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct MergeResult {
  std::vector<std::string> tokens;
  std::vector<std::pair<int32_t, int32_t>> merges;
};

// The BPE merge loop over `words` (symbol ids into `tokens`), until `target` tokens or no pair
// reaches `min_frequency`. `prefix`: the continuation prefix stripped from the right part.
MergeResult merge_loop(std::vector<std::string> tokens, std::vector<std::vector<int32_t>> words,
                       const std::vector<int64_t>& wcount, int64_t target, int64_t min_frequency,
                       const std::string& prefix) {
  std::unordered_map<std::string, int32_t> w2id;
  for (size_t i = 0; i < tokens.size(); ++i) w2id.emplace(tokens[i], static_cast<int32_t>(i));
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    const auto& s = words[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = key_of(s[i], s[i + 1]);
      pair_count[k] += wcount[w];
      auto& v = where[k];
      if (v.empty() || v.back() != w) v.push_back(static_cast<uint32_t>(w));
    }
  }
  struct Entry {
    uint64_t key;
    int64_t count;
  };
  const auto& toks = tokens;
  auto worse = [&toks](const Entry& x, const Entry& y) {  // true when x ranks below y
    if (x.count != y.count) return x.count < y.count;
    const std::string& xa = toks[x.key >> 32];
    const std::string& ya = toks[y.key >> 32];
    if (xa != ya) return xa > ya;
    return toks[x.key & 0xffffffffu] > toks[y.key & 0xffffffffu];
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  {
    std::vector<uint64_t> keys;
    keys.reserve(pair_count.size());
    for (const auto& [k, c] : pair_count) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const uint64_t k : keys) heap.push({k, pair_count[k]});
  }
  MergeResult r;
  std::vector<uint64_t> grown;
  while (static_cast<int64_t>(tokens.size()) < target && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const int64_t actual = pair_count[top.key];
    if (actual != top.count) {
      if (actual > 0) heap.push({top.key, actual});
      continue;
    }
    if (actual < 1 || actual < min_frequency) break;
    const int32_t a = static_cast<int32_t>(top.key >> 32), b = static_cast<int32_t>(top.key & 0xffffffffu);
    std::string_view bs = tokens[static_cast<size_t>(b)];
    if (!prefix.empty() && bs.substr(0, prefix.size()) == prefix) bs.remove_prefix(prefix.size());
    std::string merged = tokens[static_cast<size_t>(a)] + std::string(bs);
    int32_t nid;
    if (const auto it = w2id.find(merged); it != w2id.end()) {
      nid = it->second;
    } else {
      nid = static_cast<int32_t>(tokens.size());
      w2id.emplace(merged, nid);
      tokens.push_back(std::move(merged));
    }
    r.merges.emplace_back(a, b);
    std::vector<uint32_t> ws = std::move(where[top.key]);
    where.erase(top.key);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    grown.clear();
    for (const uint32_t w : ws) {
      auto& s = words[w];
      const int64_t c = wcount[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] != a || s[i + 1] != b) continue;
        if (i > 0) {
          pair_count[key_of(s[i - 1], a)] -= c;
          const uint64_t k = key_of(s[i - 1], nid);
          pair_count[k] += c;
          where[k].push_back(w);
          grown.push_back(k);
        }
        if (i + 2 < s.size()) {
          pair_count[key_of(b, s[i + 2])] -= c;
          const uint64_t k = key_of(nid, s[i + 2]);
          pair_count[k] += c;
          where[k].push_back(w);
          grown.push_back(k);
        }
        pair_count[top.key] -= c;
        s[i] = nid;
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (const uint64_t k : grown) heap.push({k, pair_count[k]});
  }
  r.tokens = std::move(tokens);
  return r;
}

}  // namespace

std::unique_ptr<Tokenizer> VocabTrainer::finish() {
  Impl& m = *impl_;
  std::vector<std::pair<std::string, int64_t>> wc(m.counts.begin(), m.counts.end());
  m.counts.clear();
  std::sort(wc.begin(), wc.end());  // byte order of the words: the determinism
  std::vector<int64_t> wcount;
  wcount.reserve(wc.size());
  for (const auto& [w, c] : wc) wcount.push_back(c);
  if (wc.empty()) fail("vocab", "the corpus has no words: no vocabulary can be learned from empty text");
  std::vector<std::string> tokens;
  std::vector<std::vector<int32_t>> words;
  words.reserve(wc.size());
  if (m.opt.kind == "wordpiece") {
    tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    // The alphabet: every character seen, by code point.
    std::vector<int32_t> alphabet;
    for (const auto& [w, c] : wc)
      for (size_t i = 0; i < w.size();) alphabet.push_back(uni::next_cp(w, i));
    std::sort(alphabet.begin(), alphabet.end());
    alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
    std::unordered_map<std::string, int32_t> w2id;
    for (size_t i = 0; i < tokens.size(); ++i) w2id.emplace(tokens[i], static_cast<int32_t>(i));
    auto intern = [&](const std::string& s) {
      const auto [it, fresh] = w2id.emplace(s, static_cast<int32_t>(tokens.size()));
      if (fresh) tokens.push_back(s);
      return it->second;
    };
    for (const int32_t cp : alphabet) {
      std::string s;
      uni::append_utf8(s, cp);
      intern(s);
    }

    for (const auto& [w, c] : wc) {
      std::vector<int32_t> syms;
      for (size_t i = 0; i < w.size();) {
        const size_t st = i;
        uni::next_cp(w, i);
        const std::string ch = w.substr(st, i - st);
        syms.push_back(intern(st == 0 ? ch : "##" + ch));
      }
      words.push_back(std::move(syms));
    }
    if (static_cast<int64_t>(tokens.size()) > m.opt.vocab_size)
      fail("vocab",
           "{} = {} is smaller than the initial vocabulary: 5 special tokens and {} symbols of the "
           "corpus (each character alone and as a \"##\" continuation); give at least {}",
           m.opt.size_name, m.opt.vocab_size, tokens.size() - 5, tokens.size());
    MergeResult r =
        merge_loop(std::move(tokens), std::move(words), wcount, m.opt.vocab_size, m.opt.min_frequency, "##");
    return std::make_unique<WordPieceTokenizer>(std::move(r.tokens), m.norm);
  }
  // bpe: the 256 byte symbols in GPT-2's order, then merges, then <|endoftext|>.
  const auto& b2u = byte_to_unicode();
  std::array<int32_t, 256> byte_id{};
  for (size_t k = 0; k < 256; ++k) {
    const uint8_t b = byte_order()[k];
    byte_id[b] = static_cast<int32_t>(tokens.size());
    tokens.push_back(b2u[b]);
  }
  for (const auto& [w, c] : wc) {
    std::vector<int32_t> syms;
    syms.reserve(w.size());
    for (const char ch : w) syms.push_back(byte_id[static_cast<unsigned char>(ch)]);
    words.push_back(std::move(syms));
  }
  MergeResult r =
      merge_loop(std::move(tokens), std::move(words), wcount, m.opt.vocab_size - 1, m.opt.min_frequency, "");
  std::vector<BpeMerge> merges;
  merges.reserve(r.merges.size());
  for (size_t i = 0; i < r.merges.size(); ++i)
    merges.push_back({r.tokens[static_cast<size_t>(r.merges[i].first)],
                      r.tokens[static_cast<size_t>(r.merges[i].second)], static_cast<int64_t>(i) + 2});
  r.tokens.push_back("<|endoftext|>");
  return std::make_unique<BpeTokenizer>(std::move(r.tokens), std::move(merges), "<trained>", "<trained>");
}

}  // namespace saobp
