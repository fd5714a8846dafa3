#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace saobp {

namespace {

constexpr char kMagic[8] = {'S', 'A', 'O', 'B', 'P', 'T', 'O', 'K'};
constexpr uint32_t kVersion = 1, kHeaderBytes = 64;

struct Header {
  char magic[8];
  uint32_t version, header_bytes;
  uint64_t tokenizer, source, n_tokens, n_sentences, n_documents, reserved;
};
static_assert(sizeof(Header) == kHeaderBytes);

}  // namespace

struct TokenCacheWriter::Impl {
  std::string path, tmp;
  TokenCacheKey key;
  std::ofstream out;
  uint64_t n_tokens = 0;
  std::vector<uint64_t> sentence_end, document_end;
  bool done = false;
};

TokenCacheWriter::TokenCacheWriter(const std::string& path, TokenCacheKey key)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->tmp = path + ".tmp." + std::to_string(::getpid());
  impl_->key = key;
  impl_->out.open(impl_->tmp, std::ios::binary | std::ios::trunc);
  if (!impl_->out) fail("token-cache", "cannot write {}: {}", impl_->tmp, std::strerror(errno));
  const Header placeholder{};
  impl_->out.write(reinterpret_cast<const char*>(&placeholder), sizeof placeholder);
}

TokenCacheWriter::~TokenCacheWriter() {
  if (!impl_->done) {
    impl_->out.close();
    std::remove(impl_->tmp.c_str());
  }
}

void TokenCacheWriter::add_sentence(std::span<const int32_t> ids) {
  if (ids.empty()) return;
  static_assert(sizeof(int32_t) == sizeof(uint32_t));
  impl_->out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size_bytes()));
  impl_->n_tokens += ids.size();
  impl_->sentence_end.push_back(impl_->n_tokens);
}

void TokenCacheWriter::end_document() {
  const uint64_t s = impl_->sentence_end.size();
  if (s > (impl_->document_end.empty() ? 0 : impl_->document_end.back())) impl_->document_end.push_back(s);
}

void TokenCacheWriter::finish() {
  end_document();
  Impl& w = *impl_;
  auto write = [&](const std::vector<uint64_t>& v) {
    w.out.write(reinterpret_cast<const char*>(v.data()),
                static_cast<std::streamsize>(v.size() * sizeof(uint64_t)));
  };
  if (w.n_tokens % 2) w.out.write("\0\0\0\0", 4);  // the u64 tables start 8-byte aligned
  write(w.sentence_end), write(w.document_end);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion, h.header_bytes = kHeaderBytes;
  h.tokenizer = w.key.tokenizer, h.source = w.key.source;
  h.n_tokens = w.n_tokens, h.n_sentences = w.sentence_end.size(), h.n_documents = w.document_end.size();
  w.out.seekp(0);
  w.out.write(reinterpret_cast<const char*>(&h), sizeof h);
  w.out.flush();
  if (!w.out) fail("token-cache", "cannot write {}: {}", w.tmp, std::strerror(errno));
  w.out.close();
  // fsync, then rename over the final name: a reader never sees a half-written cache.
  if (const int fd = ::open(w.tmp.c_str(), O_RDONLY); fd >= 0) ::fsync(fd), ::close(fd);
  if (std::rename(w.tmp.c_str(), w.path.c_str()) != 0)
    fail("token-cache", "cannot rename {} to {}: {}", w.tmp, w.path, std::strerror(errno));
  w.done = true;
}

bool read_token_cache_key(const std::string& path, TokenCacheKey& key) {
  std::ifstream in(path, std::ios::binary);
  Header h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) return false;
  key = {h.tokenizer, h.source};
  return true;
}

TokenCache TokenCache::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("token-cache", "cannot read {}: {}", path, std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  const std::string regen = "delete it and run again to rebuild it from the corpus";
  if (size < kHeaderBytes) {
    ::close(fd);
    fail("token-cache", "{}: truncated: {} bytes, shorter than the {}-byte header; {}", path, size,
         kHeaderBytes, regen);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail("token-cache", "cannot map {}: {}", path, std::strerror(errno));
  TokenCache c;
  c.path_ = path, c.map_ = map, c.map_size_ = size;  // unmapped by ~TokenCache from here on
  Header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    fail("token-cache", "{}: not a saobp token file (bad magic); {}", path, regen);
  if (h.version != kVersion || h.header_bytes != kHeaderBytes)
    fail("token-cache", "{}: version {} (header {} bytes), this build reads version {}; {}", path, h.version,
         h.header_bytes, kVersion, regen);
  const uint64_t limit = size / 4;  // no count can exceed this without the size check failing
  if (h.n_tokens > limit || h.n_sentences > limit || h.n_documents > limit)
    fail("token-cache", "{}: corrupt header (counts {}, {}, {} for a {}-byte file); {}", path, h.n_tokens,
         h.n_sentences, h.n_documents, size, regen);
  const uint64_t token_bytes = 4 * (h.n_tokens + h.n_tokens % 2);
  const uint64_t expect = kHeaderBytes + token_bytes + 8 * (h.n_sentences + h.n_documents);
  if (size != expect)
    fail("token-cache",
         "{}: {} bytes, but its header describes {} ({} tokens, {} sentences, {} documents): {}; {}", path,
         size, expect, h.n_tokens, h.n_sentences, h.n_documents,
         size < expect ? "truncated" : "trailing bytes", regen);
  const char* base = static_cast<const char*>(map) + kHeaderBytes;
  c.key_ = {h.tokenizer, h.source};
  c.tokens_ = {reinterpret_cast<const uint32_t*>(base), h.n_tokens};
  base += token_bytes;
  c.sentence_end_ = {reinterpret_cast<const uint64_t*>(base), h.n_sentences};
  c.document_end_ = {reinterpret_cast<const uint64_t*>(base + 8 * h.n_sentences), h.n_documents};
  auto check_ends = [&](std::span<const uint64_t> ends, uint64_t total, const char* what) {
    uint64_t prev = 0;
    for (size_t i = 0; i < ends.size(); ++i) {
      if (ends[i] <= prev || ends[i] > total)
        fail("token-cache", "{}: corrupt {} table at entry {} ({} after {}, total {}); {}", path, what, i,
             ends[i], prev, total, regen);
      prev = ends[i];
    }
    if (!ends.empty() && prev != total)
      fail("token-cache", "{}: the {} table ends at {}, not at the total {}; {}", path, what, prev, total,
           regen);
  };
  check_ends(c.sentence_end_, h.n_tokens, "sentence");
  check_ends(c.document_end_, h.n_sentences, "document");
  return c;
}

TokenCache::TokenCache(TokenCache&& o) noexcept { *this = std::move(o); }
TokenCache& TokenCache::operator=(TokenCache&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_size_);
    path_ = std::move(o.path_), map_ = o.map_, map_size_ = o.map_size_, key_ = o.key_;
    tokens_ = o.tokens_, sentence_end_ = o.sentence_end_, document_end_ = o.document_end_;
    o.map_ = nullptr, o.map_size_ = 0;
  }
  return *this;
}
TokenCache::~TokenCache() {
  if (map_) ::munmap(map_, map_size_);
}

}  // namespace saobp
