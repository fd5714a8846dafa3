// safetensors I/O, exactly the Hugging Face format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian u64][N bytes: UTF-8 JSON header, space-padded to a multiple of 8]
//   [data buffer: every tensor, row-major little-endian, back to back]
//
//   header = {"__metadata__": {"key": "value", ...},                      (optional, strings only)
//             "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//
// Offsets are relative to the start of the data buffer. The reader validates everything the
// reference implementation does (the tensors must cover the buffer exactly: no gaps, overlaps or
// trailing bytes) and throws Error("[safetensors] <path>: <what>; <how to fix>") naming the tensor.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace saobp {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes `tensors` in the order given (any device: copied to the host; any strides: written
// contiguous; dtypes f32 f64 i32 u8 bf16) with `metadata` under "__metadata__". The file is
// replaced atomically (core/fs.h). Throws on duplicate names, "__metadata__" as a tensor name or
// an undefined tensor.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::string path;
  std::vector<NamedTensor> tensors;  // in file order (sorted by data offset)
  std::map<std::string, std::string> metadata;
  // Throws Error naming the file and the missing name.
  const Tensor& get(const std::string& name) const;
  bool has(const std::string& name) const;
};

// Reads and validates a whole file; the tensors are contiguous CPU tensors.
SafetensorsFile load_safetensors(const std::string& path);
// load_safetensors that also reads F16 tensors, and returns F16 and BF16 tensors widened to f32
// (exactly: every half-precision value is an f32), for weights published in half precision
// (train/pretrained.h). There is no f16 DType; the CPU kernels compute in f32 and f64.
SafetensorsFile load_safetensors_widened(const std::string& path);

// The dtype's name in the format ("F32", "F64", "I32", "U8", "BF16").
const char* safetensors_dtype_name(DType t);

}  // namespace saobp
