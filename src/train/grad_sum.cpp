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

}  // namespace

GradSum::GradSum(std::vector<Var> params, std::string reduce)
    : params_(std::move(params)), reduce_(std::move(reduce)) {
  for (const Var& p : params_) {
    if (p.data().dtype() != DType::f32)
      fail("train", "parameter {} is {}: gradients are summed across ranks in f32 only", p.name(),
           p.data().str());
    offset_.push_back(numel_);
    numel_ += static_cast<size_t>(p.numel());
  }
}

void GradSum::take() {
  std::vector<Tensor> g;
  for (Var& p : params_) {
    g.push_back(p.grad());
    p.zero_grad();
  }
  if (reduce_ == "ordered" && dist::rank() > 0) {
    kept_.push_back(std::move(g));
    return;
  }
  sum_.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined()) continue;
    if (!sum_[i].defined())
      sum_[i] = g[i].contiguous();
    else
      kern::copy(g[i], sum_[i], /*accumulate=*/true);
  }
}

std::vector<float> GradSum::pack(const std::vector<Tensor>& grads, std::vector<float>& defined) const {
  std::vector<float> flat(numel_, 0.0f);
  defined.assign(params_.size(), 0.0f);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor h = grads[i].to(Device::cpu()).contiguous();
    std::memcpy(flat.data() + offset_[i], h.data<float>(), static_cast<size_t>(h.numel()) * sizeof(float));
    defined[i] = 1.0f;
  }
  return flat;
}

void GradSum::unpack(const std::vector<float>& flat, const std::vector<float>& defined) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Var& p = params_[i];
    if (defined[i] == 0.0f) {
      p.zero_grad();
      continue;
    }
    Tensor h = Tensor::empty(p.data().shape(), DType::f32, Device::cpu());
    std::memcpy(h.data<float>(), flat.data() + offset_[i], static_cast<size_t>(p.numel()) * sizeof(float));
    p.grad() = h.to(p.data().device());
  }
}

void GradSum::chain(std::vector<float>& flat, std::vector<float>& defined) {
  const int n = dist::size(), r = dist::rank();
  std::vector<std::vector<float>> mine(kept_.size()), mine_defined(kept_.size());
  for (size_t m = 0; m < kept_.size(); ++m) mine[m] = pack(kept_[m], mine_defined[m]);
  // The flags first: which parameters the ranks before reached, then which this rank reaches.
  std::vector<float> before(params_.size());
  dist::recv(before.data(), before.size(), r - 1);
  defined = before;
  for (const std::vector<float>& d : mine_defined)
    for (size_t i = 0; i < d.size(); ++i) defined[i] = defined[i] + d[i];
  if (r + 1 < n) dist::send(defined.data(), defined.size(), r + 1);
  // Then the values, piece by piece, so the ranks work as a pipeline (one piece's additions
  // while the next travels); each element sees the same additions in the same order. A
  // parameter's sum starts at the first gradient that reached it.
  flat.assign(numel_, 0.0f);
  size_t i = 0;  // the parameter of element `at`
  for (size_t at = 0; at < numel_; at += kChainFloats) {
    const size_t end = std::min(at + kChainFloats, numel_);
    dist::recv(flat.data() + at, end - at, r - 1);
    for (size_t j = at; j < end;) {
      while (offset_[i] + static_cast<size_t>(params_[i].numel()) <= j) ++i;
      const size_t stop = std::min(end, offset_[i] + static_cast<size_t>(params_[i].numel()));
      bool reached = before[i] != 0.0f;
      for (size_t m = 0; m < mine.size(); ++m) {
        if (mine_defined[m][i] == 0.0f) continue;
        const float* g = mine[m].data();
        for (size_t e = j; e < stop; ++e) flat[e] = reached ? flat[e] + g[e] : g[e];
        reached = true;
      }
      j = stop;
    }
    if (r + 1 < n) dist::send(flat.data() + at, end - at, r + 1);
  }
}

void GradSum::finish() {
  const int n = dist::size(), r = dist::rank();
  sum_.resize(params_.size());
  if (n == 1) {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].grad() = sum_[i];
  } else {
    std::vector<float> defined, flat;
    if (reduce_ == "fast") {
      flat = pack(sum_, defined);
      dist::allreduce_sum(defined.data(), defined.size(), kBucketFloats);
      dist::allreduce_sum(flat.data(), flat.size(), kBucketFloats);
    } else {
      // The chain: rank 0 starts it, each rank adds its micro-batches, the last broadcasts.
      if (r == 0) {
        flat = pack(sum_, defined);
        dist::send(defined.data(), defined.size(), 1);
        for (size_t at = 0; at < numel_; at += kChainFloats)
          dist::send(flat.data() + at, std::min(kChainFloats, numel_ - at), 1);
      } else {
        chain(flat, defined);
      }
      defined.resize(params_.size());
      flat.resize(numel_);
      dist::broadcast(defined.data(), defined.size(), n - 1);
      dist::broadcast(flat.data(), flat.size(), n - 1);
    }
    unpack(flat, defined);
  }
  sum_.clear();
  kept_.clear();
}

}  // namespace saobp
