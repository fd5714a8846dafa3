// Readers refuse what is not a regular file (a FIFO would block, a device never end) before
// reading a byte, and checked arithmetic refuses products that overflow.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "core/checked.h"
#include "core/fs.h"
#include "support.h"
#include "tensor/tensor.h"

using namespace saobp;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("read_file refuses FIFOs, devices and directories by name", "[core]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("saobp_test_fs_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string fifo = (dir / "model.safetensors").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: a blocking open would hang this test.
  CHECK_ERROR(read_file(fifo), Contains("model.safetensors: not a regular file (a FIFO)"));
  CHECK_ERROR(require_regular_file(fifo, "corpus"), Contains("[corpus]") && Contains("(a FIFO)"));
  CHECK_ERROR(read_file("/dev/zero"), Contains("/dev/zero: not a regular file (a character device)"));
  CHECK_ERROR(read_file(dir.string()), Contains("not a regular file (a directory)"));
  CHECK_ERROR(read_file((dir / "absent").string()), Contains("absent: No such file"));
  // A symlink to a device is the device.
  const fs::path link = dir / "config.toml";
  fs::create_symlink("/dev/zero", link);
  CHECK_ERROR(require_regular_file(link.string(), "config"), Contains("(a character device)"));
  // A regular file reads whole.
  std::ofstream(dir / "ok.txt") << "bytes";
  CHECK(read_file((dir / "ok.txt").string()) == "bytes");
  CHECK_NOTHROW(require_regular_file((dir / "ok.txt").string(), "x"));
  fs::remove_all(dir);
}

TEST_CASE("checked arithmetic reports overflow instead of wrapping", "[core]") {
  constexpr int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(checked_mul(3, 4) == 12);
  CHECK_FALSE(checked_mul(big / 2 + 1, 2).has_value());
  CHECK_FALSE(checked_mul(-big, 2).has_value());
  CHECK(checked_add(big - 1, 1) == big);
  CHECK_FALSE(checked_add(big, 1).has_value());
  CHECK(checked_product({2, 3, 7}) == 42);
  CHECK_FALSE(checked_product({int64_t{1} << 32, int64_t{1} << 31, 2}).has_value());
  // batch x seq_len of issue 14: 2^62 x 128 wraps to 0 in plain arithmetic.
  CHECK_FALSE(checked_product({int64_t{1} << 62, 128}).has_value());
  CHECK_ERROR(Tensor::empty({int64_t{1} << 40, int64_t{1} << 40}), Contains("64-bit"));
}
