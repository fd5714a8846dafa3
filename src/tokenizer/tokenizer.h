// Tokenizers: BERT's WordPiece and GPT-2's byte-level BPE behind one interface, loaded from and
// saved to Hugging Face's files, and trained from a corpus (`saobp vocab`).
//
//   wordpiece: vocab.txt (one token per line, id = line index) or tokenizer.json
//              (model.type "WordPiece"); BertNormalizer + BertPreTokenizer semantics.
//   bpe:       vocab.json + merges.txt, or tokenizer.json (model.type "BPE", merges as
//              "a b" strings or as ["a", "b"] pairs); GPT-2's ByteLevel pre-tokenizer.
//
// encode() adds no special tokens: the batchers place [CLS]/[SEP] and <|endoftext|> themselves.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace saobp {

// Ids of the special tokens, looked up by string; -1 when the vocabulary lacks one.
// wordpiece: [PAD] [UNK] [CLS] [SEP] [MASK]; bpe: eos = <|endoftext|> (also used as pad).
struct SpecialTokens {
  int32_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1, eos = -1;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;  // "wordpiece" | "bpe"
  // Token ids of `text` (UTF-8; invalid UTF-8 is an error naming the byte offset).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t token_to_id(std::string_view token) const = 0;  // -1 when absent
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual const SpecialTokens& special() const = 0;
  // FNV-1a 64 over everything that decides the ids (vocabulary, merges, normalization flags):
  // token caches are keyed by it.
  virtual uint64_t fingerprint() const = 0;
  // Writes the Hugging Face files into `dir` (created), atomically per file:
  // wordpiece: vocab.txt, tokenizer.json, tokenizer_config.json;
  // bpe: vocab.json, merges.txt, tokenizer.json, tokenizer_config.json.
  virtual void save(const std::string& dir) const = 0;
};

// Loads a tokenizer from a directory (tokenizer.json, else vocab.txt, else vocab.json +
// merges.txt) or a single file (tokenizer.json or vocab.txt). Every error names the file and line.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// Whether folder `dir` holds a tokenizer load_tokenizer reads: tokenizer.json, vocab.txt, or
// vocab.json + merges.txt.
bool has_tokenizer_files(const std::string& dir);

// `saobp tokenize`: every line of `in` (without its '\n', and a '\r' before it) as its token
// ids, or with `tokens` its token strings, space-separated, one output line per input line (an
// empty line gives an empty line). No special tokens unless `special`: a WordPiece line is then
// wrapped in [CLS] ... [SEP]; a BPE line gets none (GPT-2's tokenizer adds none). Invalid UTF-8
// is an error naming `name` and the line.
struct TokenizeLinesOptions {
  bool tokens = false;
  bool special = false;
};
void tokenize_lines(const Tokenizer& tok, std::istream& in, std::ostream& out, const std::string& name,
                    const TokenizeLinesOptions& opt = {});

// Trains a vocabulary from texts fed one at a time (streaming; the counts are all it keeps).
// Deterministic: the same texts in the same order give the same files.
//   wordpiece: BERT normalization (lowercase, NFD accent stripping) and pre-tokenization, then
//              the WordPiece trainer of HF tokenizers (BPE merges on "##"-prefixed
//              continuations); specials [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0-4.
//   bpe:       GPT-2 byte-level pre-tokenization, the 256 byte symbols, then merges by
//              frequency (ties broken by the pair's strings); <|endoftext|> is the last id.
struct VocabTrainOptions {
  std::string kind = "wordpiece";  // wordpiece | bpe
  int64_t vocab_size = 30522;      // including specials and the initial alphabet
  int64_t min_frequency = 2;       // pairs rarer than this are never merged
  bool lowercase = true;           // wordpiece only
  // How errors name vocab_size: the vocab command's option, or the config key when a training run
  // builds its own vocabulary.
  std::string size_name = "vocab_size (--size)";
};
class VocabTrainer {
 public:
  explicit VocabTrainer(const VocabTrainOptions& opt);
  ~VocabTrainer();
  void feed(std::string_view text);
  std::unique_ptr<Tokenizer> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace saobp
