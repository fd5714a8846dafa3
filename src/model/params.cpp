#include "model/params.h"

#include "core/hash.h"
#include "tensor/kernels.h"

namespace saobp {

uint64_t name_stream(const std::string& name) { return fnv1a64(name); }

Var ParamStore::add(const std::string& name, const Shape& shape, Init init, double std) {
  for (const Var& p : params_)
    if (p.name() == name) fail("params", "parameter '{}' registered twice", name);
  Tensor t = Tensor::empty(shape, dtype_, device_);
  switch (init) {
    case Init::normal:
      kern::fill_random(t, RandomKind::normal, 0.0, std, RngKey{seed_, name_stream(name), 0});
      break;
    case Init::zeros:
      kern::fill(t, 0.0);
      break;
    case Init::ones:
      kern::fill(t, 1.0);
      break;
  }
  params_.emplace_back(t, true, name);
  return params_.back();
}

void ParamStore::add_all(const std::vector<ParamSpec>& specs) {
  for (const ParamSpec& s : specs) add(s.name, s.shape, s.init, s.std);
}

const Var& ParamStore::get(const std::string& name) const {
  for (const Var& p : params_)
    if (p.name() == name) return p;
  fail("params", "no parameter named '{}'", name);
}

int64_t ParamStore::count() const {
  int64_t n = 0;
  for (const Var& p : params_) n += p.numel();
  return n;
}

void ParamStore::zero_grad() {
  for (Var p : params_) p.zero_grad();
}

}  // namespace saobp
