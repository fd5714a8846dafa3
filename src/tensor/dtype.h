// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/bf16.h"

namespace saobp {

// f32 is the training type, f64 the gradient-check type, i32 holds token ids and targets, u8
// holds boolean masks (1 = allowed / kept). bf16 (tensor/bf16.h) is the GPU's mixed-precision
// storage type: a bf16 tensor converts to and from f32 (kern::cast) on either device, and no
// other kernel takes it.
enum class DType : uint8_t { f32, f64, i32, u8, bf16 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
    case DType::u8:
      return 1;
    case DType::bf16:
      return 2;
  }
  return 0;
}
const char* dtype_name(DType t);
bool is_floating(DType t);

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::bf16;
};

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  // Parses "cpu", "cuda", "cuda:1"; throws saobp::Error otherwise.
  static Device parse(const std::string& s);
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace saobp
