#include "core/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace saobp {

namespace {

std::string errno_str(int e) { return std::strerror(e); }

// The directory holding `path` ("." for a bare file name).
std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes an fd on scope exit unless released.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

// What a non-regular file is, for messages.
const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a plain file";
}

}  // namespace

void require_regular_file(const std::string& path, std::string_view op) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(op, "cannot read {}: {}", path, errno_str(errno));
  if (!S_ISREG(st.st_mode)) fail(op, "cannot read {}: not a regular file ({})", path, file_kind(st.st_mode));
}

bool names_a_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  // Any failure before the rename: remove the temporary file, leave `path` alone, and throw.
  auto give_up = [&](const char* step, int e, bool created) {
    if (created) ::unlink(tmp.c_str());
    fail("fs", "cannot write {}: {} {}: {}", path, step, tmp, errno_str(e));
  };

  Fd f;
  f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd < 0) give_up("creating", errno, false);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(f.fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      give_up("writing", errno, true);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(f.fd) != 0) give_up("syncing", errno, true);
  if (::close(f.release()) != 0) give_up("closing", errno, true);
  if (::rename(tmp.c_str(), path.c_str()) != 0) give_up("renaming over it", errno, true);

  // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL): the
  // data is in place, so only real I/O errors are reported.
  const std::string dir = parent_dir(path);
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0) fail("fs", "wrote {} but cannot open its directory {}: {}", path, dir, errno_str(errno));
  if (::fsync(d.fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    fail("fs", "wrote {} but cannot sync its directory {}: {}", path, dir, errno_str(errno));
}

std::string read_file(const std::string& path) {
  Fd f;
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block before fstat can refuse it.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) fail("fs", "cannot read {}: {}", path, errno_str(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("fs", "cannot read {}: {}", path, errno_str(errno));
  if (!S_ISREG(st.st_mode))
    fail("fs", "cannot read {}: not a regular file ({})", path, file_kind(st.st_mode));
  // Read straight into the result: sized from fstat, grown if the file is longer than reported.
  std::string out(st.st_size > 0 ? static_cast<size_t>(st.st_size) : 4096, '\0');
  size_t have = 0;
  for (;;) {
    // When full, probe with a small buffer so a file of exactly the fstat size costs no regrowth.
    char probe[4096];
    const bool full = have == out.size();
    const ssize_t n =
        full ? ::read(f.fd, probe, sizeof probe) : ::read(f.fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("fs", "cannot read {}: {}", path, errno_str(errno));
    }
    if (n == 0) break;
    if (full) {
      out.resize(out.size() * 2);
      std::memcpy(out.data() + have, probe, static_cast<size_t>(n));
    }
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return out;
}

void sync_directory(const std::string& dir) {
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0) fail("fs", "cannot sync directory {}: {}", dir, errno_str(errno));
  if (::fsync(d.fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    fail("fs", "cannot sync directory {}: {}", dir, errno_str(errno));
}

void rename_durable(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail("fs", "cannot rename {} to {}: {}", from, to, errno_str(errno));
  const std::string a = parent_dir(from), b = parent_dir(to);
  sync_directory(b);
  if (a != b) sync_directory(a);
}

}  // namespace saobp
