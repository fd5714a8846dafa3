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

// The whole file as bytes. Throws Error("[fs] cannot read <path>: <strerror>"), and
// "... not a regular file (a FIFO)" for anything but a regular file (a FIFO would block, a
// device such as /dev/zero would never end), without opening it for reading first.
std::string read_file(const std::string& path);

// Throws Error("[op] cannot read <path>: <reason>") unless `path` (symlinks followed) is a
// regular file: "no such file or directory", "not a regular file (a directory)", "(a FIFO)",
// "(a character device)", ... For readers that open the file themselves (streams, mmap).
void require_regular_file(const std::string& path, std::string_view op);

}  // namespace saobp
