// Whole-file reads and crash-safe whole-file writes.
//
// write_file_atomic writes `path + ".tmp.<pid>"` in the same directory, fsyncs it, renames it over
// `path` and fsyncs the directory: a reader (or a crash) sees either the old file or the new one,
// never a half-written mix. On failure the temporary file is removed and the old file is intact.
#pragma once
#include <string>
#include <string_view>

namespace saobp {

// Replaces `path` with `bytes` atomically. Throws Error("[fs] cannot write <path>: ...") naming
// the step that failed and strerror.
void write_file_atomic(const std::string& path, std::string_view bytes);

// The whole file as bytes. Throws Error("[fs] cannot read <path>: <strerror>").
std::string read_file(const std::string& path);

}  // namespace saobp
