// Named parameters. A model registers each tensor under its Hugging Face name
// ("bert.encoder.layer.0.attention.self.query.weight"); checkpoints, optimizer groups and logs
// all use those names. Initialization draws from Philox with the stream taken from the name, so
// a parameter's initial value does not depend on registration order or thread count.
#pragma once
#include <string>
#include <vector>

#include "autograd/var.h"
#include "tensor/kernels.h"

namespace saobp {

enum class Init : uint8_t { normal, zeros, ones };

class ParamStore {
 public:
  ParamStore(uint64_t seed, DType dtype, Device device) : seed_(seed), dtype_(dtype), device_(device) {}
  // Registers and initializes (normal: N(0, std²)). Names must be unique.
  Var add(const std::string& name, const Shape& shape, Init init, double std = 0.02);
  const std::vector<Var>& all() const { return params_; }
  const Var& get(const std::string& name) const;
  int64_t count() const;  // number of scalars
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  void zero_grad();

 private:
  uint64_t seed_;
  DType dtype_;
  Device device_;
  std::vector<Var> params_;
};

// FNV-1a of a name: the RNG stream of that parameter's initialization.
uint64_t name_stream(const std::string& name);

}  // namespace saobp
