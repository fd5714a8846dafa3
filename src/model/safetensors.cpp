#include "model/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/fs.h"
#include "core/json.h"

namespace saobp {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

using ojson = nlohmann::ordered_json;

// The reference implementation's limit on the header length.
constexpr uint64_t kMaxHeader = 100'000'000;

constexpr const char* kTruncated = "the file is truncated or not a safetensors file; re-save the checkpoint";
constexpr const char* kMalformed =
    "the header is malformed; re-save the checkpoint (saobp save_safetensors, or "
    "safetensors.torch.save_file)";

template <class... Args>
[[noreturn]] void bad(const std::string& path, const char* hint, fmt::format_string<Args...> f,
                      Args&&... args) {
  fail("safetensors", "{}: {}; {}", path, fmt::format(f, std::forward<Args>(args)...), hint);
}

bool dtype_from_name(const std::string& s, DType& out) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::u8, DType::bf16})
    if (s == safetensors_dtype_name(t)) {
      out = t;
      return true;
    }
  return false;
}

// Appends the logical (row-major) bytes of a CPU tensor with any strides.
void append_contiguous(std::string& out, const Tensor& t) {
  const size_t es = dtype_size(t.dtype());
  const size_t n = static_cast<size_t>(t.numel()) * es;
  if (n == 0) return;
  const char* base = static_cast<const char*>(t.raw());
  if (t.is_contiguous()) {
    out.append(base, n);
    return;
  }
  // Walk every index but the last with an odometer; copy the innermost row element by element
  // (or in one piece when it is dense).
  const int64_t D = t.dim();
  const int64_t inner = t.size(D - 1), inner_stride = t.stride(D - 1);
  std::vector<int64_t> idx(static_cast<size_t>(D - 1), 0);
  for (;;) {
    int64_t off = 0;
    for (int64_t d = 0; d < D - 1; ++d) off += idx[static_cast<size_t>(d)] * t.stride(d);
    const char* row = base + off * static_cast<int64_t>(es);
    if (inner_stride == 1) {
      out.append(row, static_cast<size_t>(inner) * es);
    } else {
      for (int64_t i = 0; i < inner; ++i) out.append(row + i * inner_stride * static_cast<int64_t>(es), es);
    }
    int64_t d = D - 2;
    for (; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.size(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) break;
  }
}

// A tensor stored in half precision and widened to f32 on reading (load_safetensors_widened).
enum class Half : uint8_t { none, f16, bf16 };

struct Entry {
  std::string name;
  DType dtype;  // in memory (f32 for a widened half tensor)
  Shape shape;
  uint64_t begin, end;
  size_t order;  // position in the header, to keep zero-size ties stable
  Half half = Half::none;
};

// IEEE binary16 -> binary32, exactly (every f16 value, subnormals, ±inf and NaN payloads).
float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in f32
    const float v = std::ldexp(static_cast<float>(man), -24);
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(v));
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf, NaN
  // Normal: the exponent rebiased from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// Parses the header, remembering the first duplicate key (nlohmann keeps the last silently).
ojson parse_header(const std::string& path, std::string_view text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string dup;
  bool dup_top = false;
  ojson::parser_callback_t cb = [&](int, ojson::parse_event_t ev, ojson& parsed) {
    if (ev == ojson::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == ojson::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == ojson::parse_event_t::key && !keys.empty() && dup.empty()) {
      const std::string k = parsed.get<std::string>();
      if (!keys.back().insert(k).second) {
        dup = k;
        dup_top = keys.size() == 1;
      }
    }
    return true;
  };
  ojson h;
  check_json_depth(text, path, "safetensors");
  try {
    h = ojson::parse(text.begin(), text.end(), cb);
  } catch (const nlohmann::json::exception& e) {
    bad(path, kMalformed, "header is not valid JSON ({})", e.what());
  }
  if (!h.is_object()) bad(path, kMalformed, "header is not a JSON object (it is {})", h.type_name());
  if (!dup.empty()) {
    if (dup_top) bad(path, kMalformed, "duplicate tensor name '{}' in the header", dup);
    bad(path, kMalformed, "duplicate key '{}' inside a header entry", dup);
  }
  return h;
}

Entry parse_entry(const std::string& path, const std::string& name, const ojson& e, size_t order,
                  uint64_t buffer_size, bool widen) {
  if (!e.is_object()) bad(path, kMalformed, "tensor '{}': entry is not a JSON object", name);
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!e.contains(k)) bad(path, kMalformed, "tensor '{}': entry has no \"{}\"", name, k);
  Entry out{name, DType::f32, {}, 0, 0, order};

  const ojson& dt = e["dtype"];
  if (!dt.is_string()) bad(path, kMalformed, "tensor '{}': \"dtype\" is not a string", name);
  size_t elem = 0;  // bytes per element in the file
  if (widen && dt.get<std::string>() == "F16") {
    out.dtype = DType::f32, out.half = Half::f16, elem = 2;
  } else if (dtype_from_name(dt.get<std::string>(), out.dtype)) {
    elem = dtype_size(out.dtype);
    if (widen && out.dtype == DType::bf16) out.dtype = DType::f32, out.half = Half::bf16;
  } else {
    bad(path,
        widen ? "convert the checkpoint to F32, F64, F16, BF16, I32 or U8 and re-save it"
              : "convert the checkpoint to F32, F64, I32, U8 or BF16 and re-save it",
        "tensor '{}': unsupported dtype \"{}\"", name, dt.get<std::string>());
  }

  const ojson& sh = e["shape"];
  if (!sh.is_array()) bad(path, kMalformed, "tensor '{}': \"shape\" is not an array", name);
  uint64_t numel = 1;
  bool overflow = false;
  for (const ojson& d : sh) {
    if (!d.is_number_integer())
      bad(path, kMalformed, "tensor '{}': \"shape\" holds {} (not an integer)", name, d.dump());
    if (!d.is_number_unsigned())
      bad(path, kMalformed, "tensor '{}': negative dimension {} in shape {}", name, d.get<int64_t>(),
          sh.dump());
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(path, kMalformed, "tensor '{}': dimension {} is too large", name, v);
    out.shape.push_back(static_cast<int64_t>(v));
    overflow = overflow || __builtin_mul_overflow(numel, v, &numel);
  }

  const ojson& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad(path, kMalformed, "tensor '{}': \"data_offsets\" is {} (want [begin, end], non-negative integers)",
        name, off.dump());
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  if (out.begin > out.end)
    bad(path, kMalformed, "tensor '{}': data_offsets [{}, {}] have begin > end", name, out.begin, out.end);
  if (out.end > buffer_size)
    bad(path, kTruncated, "tensor '{}': data_offsets [{}, {}] end beyond the {}-byte data buffer", name,
        out.begin, out.end, buffer_size);
  uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, elem, &nbytes);
  if (overflow || nbytes != out.end - out.begin)
    bad(path, kMalformed, "tensor '{}': data_offsets [{}, {}] span {} bytes but {} {} needs {}", name,
        out.begin, out.end, out.end - out.begin, dt.get<std::string>(), shape_str(out.shape),
        overflow ? std::string("more than 2^64") : std::to_string(nbytes));
  return out;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::u8:
      return "U8";
    case DType::bf16:
      return "BF16";
  }
  return "?";
}

// ---------------------------------------------------------------- save

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  std::set<std::string> names;
  uint64_t cursor = 0;
  for (const NamedTensor& nt : tensors) {
    if (!nt.tensor.defined()) fail("safetensors", "{}: tensor '{}' is undefined", path, nt.name);
    if (nt.name == "__metadata__")
      fail("safetensors", "{}: \"__metadata__\" is reserved and cannot name a tensor", path);
    if (!names.insert(nt.name).second) fail("safetensors", "{}: duplicate tensor name '{}'", path, nt.name);
    host.push_back(nt.tensor.to(Device::cpu()));
    const uint64_t nbytes = static_cast<uint64_t>(nt.tensor.numel()) * dtype_size(nt.tensor.dtype());
    ojson e = ojson::object();
    e["dtype"] = safetensors_dtype_name(nt.tensor.dtype());
    e["shape"] = nt.tensor.shape();
    e["data_offsets"] = {cursor, cursor + nbytes};
    header[nt.name] = std::move(e);
    cursor += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("safetensors", "{}: a tensor name or metadata string is not valid UTF-8 ({})", path, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference pads the header to 8 bytes

  std::string out;
  out.reserve(8 + text.size() + cursor);
  const uint64_t n = text.size();
  char len[8];
  std::memcpy(len, &n, 8);  // little-endian (static_assert above)
  out.append(len, 8);
  out += text;
  for (const Tensor& t : host) append_contiguous(out, t);
  write_file_atomic(path, out);
}

// ---------------------------------------------------------------- load

namespace {

SafetensorsFile load(const std::string& path, bool widen) {
  const std::string bytes = read_file(path);
  const uint64_t size = bytes.size();
  if (size < 8) bad(path, kTruncated, "file is {} bytes, shorter than the 8-byte header length", size);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader) bad(path, kTruncated, "header length {} is absurd (more than {} bytes)", n, kMaxHeader);
  if (n > size - 8)
    bad(path, kTruncated, "header length {} runs past the end of the file ({} bytes)", n, size);
  const ojson header = parse_header(path, std::string_view(bytes).substr(8, n));
  const uint64_t buffer_size = size - 8 - n;
  const char* buffer = bytes.data() + 8 + n;

  SafetensorsFile out;
  out.path = path;
  std::vector<Entry> entries;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (e.is_null()) continue;
      if (!e.is_object()) bad(path, kMalformed, "\"__metadata__\" is not a JSON object");
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          bad(path, kMalformed, "metadata value '{}' is not a string (it is {})", k, v.dump());
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, e, entries.size(), buffer_size, widen));
  }

  // The tensors must tile the buffer exactly, as in the reference implementation.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.order) < std::tie(b.begin, b.end, b.order);
  });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      bad(path, kMalformed, "tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", prev->name, e.name,
          prev->begin, prev->end, e.begin, e.end);
    if (e.begin > cursor)
      bad(path, kMalformed, "gap (hole) of {} bytes in the data buffer before tensor '{}'", e.begin - cursor,
          e.name);
    cursor = e.end;
    prev = &e;
  }
  if (cursor != buffer_size)
    bad(path, kMalformed,
        "{} trailing bytes after the last tensor (the data buffer is {} bytes, tensors cover {})",
        buffer_size - cursor, buffer_size, cursor);

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.half == Half::none) {
      if (e.end > e.begin) std::memcpy(t.raw(), buffer + e.begin, e.end - e.begin);
    } else {
      float* dst = static_cast<float*>(t.raw());
      const int64_t n = t.numel();
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, buffer + e.begin + 2 * static_cast<uint64_t>(i), 2);  // little-endian host
        dst[i] = e.half == Half::f16 ? f16_to_f32(h) : bf16_value(h);         // bf16_value: tensor/bf16.h
      }
    }
    out.tensors.push_back({e.name, std::move(t)});
  }
  return out;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) { return load(path, false); }

SafetensorsFile load_safetensors_widened(const std::string& path) { return load(path, true); }

const Tensor& SafetensorsFile::get(const std::string& name) const {
  for (const NamedTensor& nt : tensors)
    if (nt.name == name) return nt.tensor;
  fail("safetensors", "{}: no tensor named '{}' (the file holds {} tensors)", path, name, tensors.size());
}

bool SafetensorsFile::has(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const NamedTensor& nt) { return nt.name == name; });
}

}  // namespace saobp
