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

// Whether `path` (symlinks followed) exists and is not a directory: what a reader that looks for
// a file by name should test, so that a FIFO or a device it finds reaches the reader, whose
// require_regular_file (or read_file) names it, instead of being reported as missing.
bool names_a_file(const std::string& path);

// fsyncs the directory `dir`, so that the entries created, renamed or removed in it survive a
// crash. File systems that cannot sync a directory (EINVAL, ENOTSUP) are not an error. Throws
// Error("[fs] cannot sync directory <dir>: <strerror>").
void sync_directory(const std::string& dir);

// rename(2) of `from` to `to` (a file or a directory; `to` must not be a non-empty directory),
// then sync_directory of both parents, so the rename is durable when this returns. Throws
// Error("[fs] cannot rename <from> to <to>: <strerror>").
void rename_durable(const std::string& from, const std::string& to);

}  // namespace saobp
