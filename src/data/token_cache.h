// The binary token file: a corpus split tokenized once, cached in the run directory and mapped
// into memory (so it may be larger than memory), reused while its key matches.
//
// Layout, little-endian:
//   header (64 bytes): magic "SAOBPTOK" | u32 version (1) | u32 header bytes (64) |
//                      u64 tokenizer fingerprint | u64 source key (corpus + split) |
//                      u64 n_tokens | u64 n_sentences | u64 n_documents | u64 reserved (0)
//   u32 tokens[n_tokens]            (then 4 zero bytes if n_tokens is odd: 8-byte alignment)
//   u64 sentence_end[n_sentences]   token index one past each sentence (a corpus line)
//   u64 document_end[n_documents]   sentence index one past each document
// A reader checks the magic, the version, the file size against the counts, and that the end
// arrays are non-decreasing and in range; the two keys tell a stale or foreign cache apart.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace saobp {

struct TokenCacheKey {
  uint64_t tokenizer = 0;  // Tokenizer::fingerprint()
  uint64_t source = 0;     // corpus fingerprint mixed with the split settings
  bool operator==(const TokenCacheKey&) const = default;
};

// Streams sentences and documents into `path` (written to path.tmp.<pid>, renamed on finish()).
class TokenCacheWriter {
 public:
  TokenCacheWriter(const std::string& path, TokenCacheKey key);
  ~TokenCacheWriter();  // removes the temporary file unless finish() ran
  void add_sentence(std::span<const int32_t> ids);
  void end_document();  // closes the document of the sentences added since the last one
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TokenCache {
 public:
  // Maps `path` and validates it; throws naming the file and what is wrong.
  static TokenCache open(const std::string& path);
  TokenCache(TokenCache&&) noexcept;
  TokenCache& operator=(TokenCache&&) noexcept;
  ~TokenCache();

  TokenCacheKey key() const { return key_; }
  std::span<const uint32_t> tokens() const { return tokens_; }
  std::span<const uint64_t> sentence_end() const { return sentence_end_; }
  std::span<const uint64_t> document_end() const { return document_end_; }
  const std::string& path() const { return path_; }

 private:
  TokenCache() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  TokenCacheKey key_;
  std::span<const uint32_t> tokens_;
  std::span<const uint64_t> sentence_end_, document_end_;
};

// Reads only the header's key; nullopt-like false when the file is missing or not a token file.
bool read_token_cache_key(const std::string& path, TokenCacheKey& key);

}  // namespace saobp
