// AdamW with decoupled weight decay (Loshchilov & Hutter) over a model's named parameters.
// Weight decay applies only to tensors of dim >= 2 (matrices and embeddings), never to biases,
// LayerNorm weights or other vectors (nanoGPT's rule; BERT's no-decay list amounts to the same).
#pragma once
#include <vector>

#include "autograd/var.h"
#include "tensor/kernels.h"

namespace saobp {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

class AdamW {
 public:
  AdamW(std::vector<Var> params, const AdamWConfig& cfg);
  // One update at learning rate lr for every parameter with a gradient, each gradient scaled by
  // grad_scale first (clip_scale: the step's gradient clipping; the gradients are left scaled);
  // advances the step. One multi-tensor launch on a GPU (kern::multi_adamw_step).
  void step(double lr, double grad_scale = 1.0);
  int64_t steps_taken() const { return step_; }
  bool decays(size_t i) const { return params_[i].dim() >= 2; }
  const std::vector<Var>& params() const { return params_; }
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  void set_steps_taken(int64_t s) { step_ = s; }

 private:
  std::vector<Var> params_;
  std::vector<Tensor> m_, v_;
  AdamWConfig cfg_;
  int64_t step_ = 0;
};

}  // namespace saobp
