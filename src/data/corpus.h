// Corpora in their own formats, read as a stream of documents in a fixed order.
//
//   text      a file, or a folder read recursively (regular files, sorted by path, hidden
//             ones skipped): documents are separated by one or more blank lines
//   fortune   strfile(1) files (Debian's fortunes): a line holding only "%" ends an entry;
//             a folder skips the strfile indexes (*.dat) and symlinks (*.u8)
//   wikitext  WikiText .raw files: a " = Title = " line (exactly one '=' each side) starts a
//             document; " = = Section = = " lines stay inside it
//   jsonl     one JSON object per line, the document's text in the field `text_field`
//
// Files are read in chunks (std::getline over a buffered stream), never whole, so a corpus
// larger than memory streams through. Every line is checked to be UTF-8; a bad line, a bad
// JSON record or a missing field is an error naming the file and line.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace saobp {

struct CorpusSpec {
  std::string kind = "text";  // text | fortune | wikitext | jsonl
  std::string path;           // a file or a folder
  std::string text_field = "text";
};

// One document: its lines (the sentences BERT packs), without line ends, and where it starts.
struct Document {
  const std::vector<std::string>& lines;
  const std::string& file;
  int64_t first_line;  // 1-based
};

// The files of a corpus in reading order (a single file, or the folder's files by path).
std::vector<std::string> corpus_files(const CorpusSpec& spec);

// Calls fn for every non-empty document, in order.
void for_each_document(const CorpusSpec& spec, const std::function<void(const Document&)>& fn);

// FNV-1a 64 of the spec and of every file's path, size and modification time: changes when
// the corpus does, without reading it.
uint64_t corpus_fingerprint(const CorpusSpec& spec);

}  // namespace saobp
