#include "train/grad_sum.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "dist/comm.h"
#include "tensor/kernels.h"

namespace saobp {

namespace {

// 25 MB buckets for MPI_Allreduce under train.reduce = "fast" (PyTorch DDP's default size).
constexpr size_t kBucketFloats = 25u << 20 >> 2;
// 4 MB pieces of the ordered chain.
constexpr size_t kChainFloats = 1u << 20;

// A parameter's gradient, or zeros where the backward left none (an unused parameter): every
// rank adds the same tensors whichever of them the backward reached.
Tensor grad_or_zeros(Var& p) {
  Tensor g = p.grad().defined() ? p.grad() : p.data().zeros_like();
  p.zero_grad();
  return g;
}

}  // namespace

GradSum::GradSum(std::vector<Var> params, std::string reduce)
    : params_(std::move(params)), reduce_(std::move(reduce)) {
  for (const Var& p : params_) {
    if (p.data().dtype() != DType::f32)
      fail("train", "parameter {} is {}: gradients are summed across ranks in f32 only", p.name(),
           p.data().str());
    numel_ += static_cast<size_t>(p.numel());
  }
}

void GradSum::take() {
  std::vector<Tensor> g;
  for (Var& p : params_) g.push_back(grad_or_zeros(p));
  if (reduce_ == "ordered" && dist::rank() > 0) {
    kept_.push_back(std::move(g));
    return;
  }
  if (sum_.empty()) {
    for (Tensor& t : g) sum_.push_back(t.contiguous());
    return;
  }
  for (size_t i = 0; i < g.size(); ++i) kern::copy(g[i], sum_[i], /*accumulate=*/true);
}

std::vector<float> GradSum::pack(const std::vector<Tensor>& grads) const {
  std::vector<float> flat(numel_);
  size_t at = 0;
  for (const Tensor& t : grads) {
    const Tensor h = t.to(Device::cpu()).contiguous();
    std::memcpy(flat.data() + at, h.data<float>(), static_cast<size_t>(h.numel()) * sizeof(float));
    at += static_cast<size_t>(h.numel());
  }
  return flat;
}

void GradSum::unpack(const std::vector<float>& flat) {
  size_t at = 0;
  for (Var& p : params_) {
    const Tensor& d = p.data();
    Tensor h = Tensor::empty(d.shape(), DType::f32, Device::cpu());
    std::memcpy(h.data<float>(), flat.data() + at, static_cast<size_t>(d.numel()) * sizeof(float));
    at += static_cast<size_t>(d.numel());
    p.grad() = h.to(d.device());
  }
}

void GradSum::finish() {
  const int n = dist::size(), r = dist::rank();
  if (n == 1) {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].grad() = sum_[i];
  } else if (reduce_ == "fast") {
    std::vector<float> flat = pack(sum_);
    dist::allreduce_sum(flat.data(), flat.size(), kBucketFloats);
    unpack(flat);
  } else {
    // The chain: S arrives from rank r - 1, this rank's micro-batches are added in order, S
    // goes on to rank r + 1; the last rank holds the total and broadcasts it. It goes piece by
    // piece, so the ranks work as a pipeline (one piece's additions while the next travels);
    // each element still sees the same additions in the same order.
    std::vector<float> flat = r == 0 ? pack(sum_) : std::vector<float>(numel_);
    std::vector<std::vector<float>> mine;
    for (const std::vector<Tensor>& g : kept_) mine.push_back(pack(g));
    for (size_t at = 0; at < numel_; at += kChainFloats) {
      const size_t len = std::min(kChainFloats, numel_ - at);
      float* s = flat.data() + at;
      if (r > 0) {
        dist::recv(s, len, r - 1);
        for (const std::vector<float>& g : mine)
          for (size_t j = 0; j < len; ++j) s[j] = s[j] + g[at + j];
      }
      if (r + 1 < n) dist::send(s, len, r + 1);
    }
    dist::broadcast(flat.data(), flat.size(), n - 1);
    unpack(flat);
  }
  sum_.clear();
  kept_.clear();
}

}  // namespace saobp
