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

// One tensor a model registers: its Hugging Face name, shape and initialization. A model lists
// its tensors as specs (bert_param_specs, gpt2_param_specs) in registration order, so counting
// parameters costs nothing (the 124M model need not be built to be counted).
struct ParamSpec {
  std::string name;
  Shape shape;
  Init init = Init::zeros;
  double std = 0;
};

class ParamStore {
 public:
  ParamStore(uint64_t seed, DType dtype, Device device) : seed_(seed), dtype_(dtype), device_(device) {}
  // Registers and initializes (normal: N(0, std²)). Names must be unique.
  Var add(const std::string& name, const Shape& shape, Init init, double std = 0.02);
  // add() of every spec, in order.
  void add_all(const std::vector<ParamSpec>& specs);
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
