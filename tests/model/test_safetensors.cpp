// safetensors: round trips over dtypes, shapes, views and metadata; golden bytes built by hand in
// the reference layout; every corruption the reader must reject (with the path and a phrase);
// truncation; atomic writes (core/fs.h).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "model/safetensors.h"
#include "support.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::bitwise_equal;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed (with its contents) at scope exit.
struct TmpDir {
  fs::path dir;
  explicit TmpDir(const std::string& tag) {
    dir = fs::temp_directory_path() / ("saobp_st_" + std::to_string(::getpid()) + "_" + tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TmpDir() {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  // Names in the directory holding ".tmp." (leftovers of an atomic write).
  std::vector<std::string> tmp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    return out;
  }
};

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string u64le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// [N][header padded with spaces to 8][data], as the reference writes it.
std::string st_file(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  return u64le(header.size()) + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return s;
}

Tensor iota(const Shape& shape, DType dtype) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) * 0.5 - 3.0;
  return Tensor::from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("safetensors round trip: dtypes, shapes, views, metadata", "[safetensors]") {
  TmpDir tmp("roundtrip");
  const std::string path = tmp / "model.safetensors";

  Tensor bf16 = Tensor::empty({3}, DType::bf16);
  const uint16_t bits[3] = {0x3f80, 0xc000, 0x7f80};  // 1, -2, +inf
  std::memcpy(bf16.raw(), bits, sizeof bits);
  Tensor base = iota({3, 4}, DType::f32);
  const std::vector<NamedTensor> tensors = {
      {"encoder.w", iota({2, 3}, DType::f32)},
      {"f64", iota({4}, DType::f64)},
      {"ids", Tensor::from_vector(std::vector<int32_t>{7, -1, 0, 2147483647, -5, 3, 2, 1}, {2, 2, 2})},
      {"mask", Tensor::from_vector(std::vector<uint8_t>{1, 0, 255, 1, 0}, {5})},
      {"bf16", bf16},
      {"empty", Tensor::zeros({0, 3})},
      {"scalar", Tensor::scalar(3.5, DType::f64)},
      {"transposed", base.transpose(0, 1)},                   // (4,3), strides (1,4)
      {"sliced", base.slice(1, 1, 3)},                        // (3,2), row stride 4
      {"expanded", iota({1, 3}, DType::f32).expand({2, 3})},  // stride 0
      {"t_slice", base.transpose(0, 1).slice(0, 1, 3)},       // (2,3), non-dense inner
  };
  REQUIRE_FALSE(tensors[7].tensor.is_contiguous());
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "unicode ü ✓"}, {"empty", ""}};
  save_safetensors(path, tensors, meta);
  CHECK(tmp.tmp_files().empty());

  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.path == path);
  CHECK(f.metadata == meta);
  REQUIRE(f.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name);
    CHECK(f.tensors[i].name == tensors[i].name);  // written in order, so file order == given order
    CHECK(f.tensors[i].tensor.is_contiguous());
    CHECK(f.tensors[i].tensor.device().is_cpu());
    CHECK(bitwise_equal(f.tensors[i].tensor, tensors[i].tensor));
  }
  CHECK(f.get("scalar").shape().empty());
  CHECK(f.get("scalar").item() == 3.5);
  CHECK(f.get("empty").shape() == Shape{0, 3});
  CHECK(f.get("transposed").to_vector<float>() ==
        std::vector<float>{-3.0f, -1.0f, 1.0f, -2.5f, -0.5f, 1.5f, -2.0f, 0.0f, 2.0f, -1.5f, 0.5f, 2.5f});
  CHECK(f.has("ids"));
  CHECK_FALSE(f.has("nope"));
  CHECK_ERROR(f.get("nope"), Contains(path) && Contains("no tensor named 'nope'"));

  // Layout: header length a multiple of 8, data buffer exactly the tensors' bytes.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  size_t data = 0;
  for (const auto& nt : tensors)
    data += static_cast<size_t>(nt.tensor.numel()) * dtype_size(nt.tensor.dtype());
  CHECK(bytes.size() == 8 + n + data);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["__metadata__"]["format"] == "pt");
  CHECK(header["bf16"]["dtype"] == "BF16");
  CHECK(header["scalar"]["shape"] == nlohmann::json::array());
  CHECK(header["empty"]["data_offsets"][0] == header["empty"]["data_offsets"][1]);

  // No tensors, no metadata: "{}" padded to 8.
  save_safetensors(path, {});
  CHECK(read_file(path) == st_file("{}", ""));
  const SafetensorsFile e = load_safetensors(path);
  CHECK(e.tensors.empty());
  CHECK(e.metadata.empty());
}

TEST_CASE("safetensors golden bytes in the reference layout", "[safetensors]") {
  TmpDir tmp("golden");
  const std::string path = tmp / "golden.safetensors";
  // Exactly what huggingface/safetensors writes: __metadata__ first, then the tensors in order,
  // keys dtype/shape/data_offsets, compact JSON, spaces up to a multiple of 8.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[16,20]}})";
  std::string data = f32_bytes({1.0f, -2.0f, 0.5f, 3.25f});
  data += std::string("\x2a\x00\x00\x00", 4);  // int32 42
  const std::string golden = st_file(header, data);
  REQUIRE(golden.size() % 8 == 4);  // 8 + padded header + 20 data bytes
  write_raw(path, golden);

  const SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].name == "w");
  CHECK(f.tensors[0].tensor.shape() == Shape{2, 2});
  CHECK(f.tensors[0].tensor.to_vector<float>() == std::vector<float>{1.0f, -2.0f, 0.5f, 3.25f});
  CHECK(f.tensors[1].name == "b");
  CHECK(f.tensors[1].tensor.to_vector<int32_t>() == std::vector<int32_t>{42});
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});

  // Saving the same tensors gives the same bytes (our writer follows the reference's key order).
  const std::string out = tmp / "resaved.safetensors";
  save_safetensors(out, f.tensors, f.metadata);
  const std::string bytes = read_file(out);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(nlohmann::json::parse(bytes.substr(8, n)) == nlohmann::json::parse(header));
  CHECK(bytes.substr(8 + n) == data);
  CHECK(bytes == golden);
  const SafetensorsFile g = load_safetensors(out);
  CHECK(bitwise_equal(g.get("w"), f.get("w")));
  CHECK(bitwise_equal(g.get("b"), f.get("b")));

  // Offsets need not follow header order: file order is offset order.
  const std::string swapped = tmp / "swapped.safetensors";
  write_raw(swapped, st_file(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                             std::string("\x01\x02\x03\x04", 4)));
  const SafetensorsFile s = load_safetensors(swapped);
  REQUIRE(s.tensors.size() == 2);
  CHECK(s.tensors[0].name == "a");
  CHECK(s.get("b").to_vector<uint8_t>() == std::vector<uint8_t>{3, 4});
  // An unpadded header is accepted too (older writers did not pad).
  write_raw(swapped, st_file(R"({"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})", "\x07", false));
  CHECK(load_safetensors(swapped).get("a").item() == 7.0);
}

TEST_CASE("safetensors rejects corrupt files naming the file and the problem", "[safetensors]") {
  TmpDir tmp("corrupt");
  const std::string path = tmp / "bad.safetensors";
  const std::string w16 = R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  const std::string d16(16, '\0');
  struct Case {
    const char* what;
    std::string bytes;
    const char* phrase;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "shorter than the 8-byte header length"},
      {"5 bytes", "abcde", "shorter than the 8-byte header length"},
      {"absurd header length", u64le(200'000'000) + "{}", "is absurd"},
      {"header past the end", u64le(64) + "{}      ", "runs past the end of the file"},
      {"not JSON", st_file("{not json", ""), "header is not valid JSON"},
      {"nlohmann's message", st_file("{\"w\":", ""), "parse error"},
      {"invalid UTF-8", st_file("{\"\xff\xfe\":{}}", ""), "header is not valid JSON"},
      {"not an object", st_file("[1,2,3]", ""), "header is not a JSON object"},
      {"entry not an object", st_file(R"({"w":3})", ""), "'w': entry is not a JSON object"},
      {"no dtype", st_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': entry has no \"dtype\""},
      {"no shape", st_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': entry has no \"shape\""},
      {"no data_offsets", st_file(R"({"w":{"dtype":"F32","shape":[1]}})", d16.substr(0, 4)),
       "'w': entry has no \"data_offsets\""},
      {"dtype not a string",
       st_file(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': \"dtype\" is not a string"},
      {"shape not an array",
       st_file(R"({"w":{"dtype":"F32","shape":"4","data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': \"shape\" is not an array"},
      {"fractional dim",
       st_file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': \"shape\" holds 1.5 (not an integer)"},
      {"offsets wrong arity",
       st_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", d16.substr(0, 4)),
       "'w': \"data_offsets\" is [4]"},
      {"offsets negative",
       st_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", d16.substr(0, 4)),
       "'w': \"data_offsets\" is [-4,0]"},
      {"offsets strings",
       st_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0","4"]}})", d16.substr(0, 4)),
       "'w': \"data_offsets\""},
      {"unknown dtype",
       st_file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", d16.substr(0, 4)),
       "'w': unsupported dtype \"F16\""},
      {"negative dim", st_file(R"({"w":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", d16),
       "'w': negative dimension -1"},
      {"begin > end", st_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", d16),
       "'w': data_offsets [8, 4] have begin > end"},
      {"end beyond buffer", st_file("{" + w16 + "}", d16.substr(0, 12)),
       "'w': data_offsets [0, 16] end beyond the 12-byte data buffer"},
      {"size mismatch", st_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", d16),
       "'w': data_offsets [0, 16] span 16 bytes but F32 [3] needs 12"},
      {"numel overflow",
       st_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", d16),
       "needs more than 2^64"},
      {"overlap", st_file("{" + w16 + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
       "tensors 'w' and 'v' overlap"},
      {"same bytes twice",
       st_file("{" + w16 + R"(,"v":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d16), "overlap"},
      {"gap",
       st_file(
           R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
           d16),
       "gap (hole) of 4 bytes in the data buffer before tensor 'v'"},
      {"hole at the start", st_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
       "gap (hole) of 8 bytes in the data buffer before tensor 'w'"},
      {"duplicate names", st_file("{" + w16 + "," + w16 + "}", d16), "duplicate tensor name 'w'"},
      {"duplicate key in entry",
       st_file(R"({"w":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d16.substr(0, 4)),
       "duplicate key 'dtype' inside a header entry"},
      {"metadata value not a string", st_file(R"({"__metadata__":{"epoch":3},)" + w16 + "}", d16),
       "metadata value 'epoch' is not a string"},
      {"metadata not an object", st_file(R"({"__metadata__":[1],)" + w16 + "}", d16),
       "\"__metadata__\" is not a JSON object"},
      {"trailing bytes", st_file("{" + w16 + "}", d16 + "xyz"), "3 trailing bytes after the last tensor"},
      {"trailing bytes, no tensors", st_file("{}", "junk"), "4 trailing bytes"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    write_raw(path, c.bytes);
    CHECK_ERROR(load_safetensors(path),
                Contains("[safetensors] " + path + ": ") && Contains(c.phrase) && Contains("re-save"));
  }
  // The fix is suggested: truncation reads as such.
  write_raw(path, "abc");
  CHECK_ERROR(load_safetensors(path),
              Contains("the file is truncated or not a safetensors file; re-save the checkpoint"));
  // Missing file: the fs layer names the path and strerror.
  CHECK_ERROR(load_safetensors(tmp / "missing.safetensors"),
              Contains(tmp / "missing.safetensors") && Contains("No such file or directory"));
}

TEST_CASE("safetensors rejects truncation at any point", "[safetensors]") {
  TmpDir tmp("truncate");
  const std::string path = tmp / "full.safetensors";
  save_safetensors(path, {{"a", iota({3, 5}, DType::f32)}, {"b", iota({7}, DType::f64)}}, {{"k", "v"}});
  const std::string full = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, full.data(), 8);
  const std::string cut_path = tmp / "cut.safetensors";
  for (size_t cut :
       {size_t{0}, size_t{1}, size_t{4}, size_t{7}, size_t{8}, size_t{9}, size_t{8 + n / 2},
        size_t{8 + n - 1}, size_t{8 + n}, size_t{8 + n + 1}, size_t{8 + n + 60}, full.size() - 1}) {
    INFO("cut at " << cut << " of " << full.size());
    REQUIRE(cut < full.size());
    write_raw(cut_path, full.substr(0, cut));
    CHECK_ERROR(load_safetensors(cut_path), Contains("[safetensors] " + cut_path) && Contains("re-save"));
  }
  write_raw(cut_path, full);
  CHECK(load_safetensors(cut_path).tensors.size() == 2);
}

TEST_CASE("safetensors save rejects bad input and writes nothing", "[safetensors]") {
  TmpDir tmp("savebad");
  const std::string path = tmp / "x.safetensors";
  const Tensor t = Tensor::zeros({2});
  CHECK_ERROR(save_safetensors(path, {{"a", t}, {"a", t}}),
              Contains(path) && Contains("duplicate tensor name 'a'"));
  CHECK_ERROR(save_safetensors(path, {{"__metadata__", t}}), Contains("\"__metadata__\" is reserved"));
  CHECK_ERROR(save_safetensors(path, {{"u", Tensor()}}), Contains("tensor 'u' is undefined"));
  CHECK_FALSE(fs::exists(path));
  CHECK(tmp.tmp_files().empty());
  // A missing directory: the write fails, naming the path.
  const std::string nodir = tmp / "no/such/dir/x.safetensors";
  CHECK_ERROR(save_safetensors(nodir, {{"a", t}}),
              Contains("[fs] cannot write " + nodir) && Contains("No such file or directory"));
}

TEST_CASE("write_file_atomic replaces whole files and leaves no temporary behind", "[safetensors][fs]") {
  TmpDir tmp("atomic");
  const std::string path = tmp / "f.bin";
  std::string big(100'000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);

  SECTION("create, overwrite, read back; no .tmp left") {
    write_file_atomic(path, "old contents");
    CHECK(read_file(path) == "old contents");
    write_file_atomic(path, big);
    CHECK(read_file(path) == big);
    write_file_atomic(path, "");
    CHECK(read_file(path).empty());
    CHECK(tmp.tmp_files().empty());
    // A bare relative name writes into the current directory (the parent is ".").
    const fs::path cwd = fs::current_path();
    fs::current_path(tmp.dir);
    write_file_atomic("rel.bin", "r");
    fs::current_path(cwd);
    CHECK(read_file(tmp / "rel.bin") == "r");
  }
  SECTION("missing directory: throws, nothing created") {
    const std::string p = tmp / "missing/f.bin";
    CHECK_ERROR(write_file_atomic(p, "x"), Contains("[fs] cannot write " + p) && Contains("No such file"));
    CHECK_FALSE(fs::exists(tmp / "missing"));
  }
  SECTION("the temporary cannot be created: throws, old file intact") {
    write_file_atomic(path, "old");
    // Occupy the temporary's name with a directory (works even as root, unlike chmod).
    fs::create_directory(path + ".tmp." + std::to_string(::getpid()));
    CHECK_ERROR(write_file_atomic(path, big), Contains("[fs] cannot write " + path) && Contains("creating"));
    CHECK(read_file(path) == "old");
  }
  SECTION("the rename fails: throws, old content intact, temporary removed") {
    // The target is a non-empty directory: rename(file, dir) fails after the data was written.
    fs::create_directory(path);
    write_raw(path + "/keep", "keep");
    CHECK_ERROR(write_file_atomic(path, big), Contains("[fs] cannot write " + path) && Contains("renaming"));
    CHECK(read_file(path + "/keep") == "keep");
    CHECK(tmp.tmp_files().empty());
  }
  SECTION("an unwritable directory: throws, old file intact") {
    write_file_atomic(path, "old");
    fs::permissions(tmp.dir, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
    if (::geteuid() != 0) {  // root ignores permissions
      CHECK_ERROR(write_file_atomic(path, big),
                  Contains("[fs] cannot write " + path) && Contains("Permission denied"));
      CHECK_ERROR(save_safetensors(path, {{"a", Tensor::zeros({2})}}), Contains(path));
    }
    fs::permissions(tmp.dir, fs::perms::owner_all, fs::perm_options::replace);
    CHECK(read_file(path) == "old");
    CHECK(tmp.tmp_files().empty());
  }
}

TEST_CASE("read_file reads binary files whole and names the path on failure", "[safetensors][fs]") {
  TmpDir tmp("read");
  std::string bin("\0\x01\xff\0z", 5);
  write_raw(tmp / "b", bin);
  CHECK(read_file(tmp / "b") == bin);
  CHECK(read_file("/proc/self/status").find("Pid:") != std::string::npos);  // st_size 0: grows
  CHECK_ERROR(read_file(tmp / "nope"),
              Contains("[fs] cannot read " + (tmp / "nope")) && Contains("No such file or directory"));
  CHECK_ERROR(read_file(tmp.dir.string()), Contains("not a regular file (a directory)"));
}
