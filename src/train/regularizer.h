// The baseline regularizers of the paper's comparison (docs/baselines.md), added to a task's
// training loss: Entropy-Reg (Jha & Reagen 2025) on each layer's attention entropy, with a
// learnable per-head threshold θ, and Eigen-Reg (Bao et al. 2024) on the variance of each head's
// QK eigenspectrum. A task owns one (Task::reg), hands its body the q/k capture at construction
// (the model fills it during training forwards only) and passes its loss through add().
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "model/params.h"
#include "train/config.h"

namespace saobp {

// Entropy-Reg's initial threshold weight θ: the penalty starts where a head's mean entropy
// leaves [0.3, 0.7] · log T (θ ± γ with γ = 0.2).
inline constexpr double kEntropyThetaInit = 0.5;

class Regularizer {
 public:
  Regularizer() = default;  // off
  // train.regularizer of cfg for a model of cfg.model's family, layers and heads whose
  // parameters are P. Entropy-Reg registers its θ in P: one (NH) tensor per layer,
  // "bert.encoder.layer.{l}.attention.self.saobp_entropy_theta" or
  // "transformer.h.{l}.attn.saobp_entropy_theta", at kEntropyThetaInit.
  Regularizer(const RunConfig& cfg, ParamStore& P);

  bool on() const { return kind_ != "none"; }
  // What the model fills with each layer's (q, k) in a training forward (Body::capture_qk,
  // model/body.h); null unless Entropy-Reg is on.
  std::vector<std::pair<Var, Var>>* qk() { return kind_ == "entropy" ? &qk_ : nullptr; }
  // loss + coef · penalty (loss itself when off), the penalty of the forward just run (its
  // captured q, k with key_mask (B,T) u8 or undefined; causal for a decoder) or of the current
  // weights. Records the penalty (last_penalty) and releases the capture.
  Var add(const Var& loss, const Tensor& key_mask);
  // The penalty of the last add() (0 when off), before the coefficient: a one-element tensor on
  // the model's device, read with the step's losses (Tensor::items).
  Tensor last_penalty() const { return last_.defined() ? last_ : Tensor::zeros({1}, DType::f64); }

 private:
  Var entropy_penalty(const Tensor& key_mask);
  Var eigen_penalty() const;

  std::string kind_ = "none";
  double coef_ = 0, gamma_ = 0;
  bool causal_ = false;
  int64_t heads_ = 0;
  std::vector<Var> theta_;              // Entropy-Reg: per layer (NH)
  std::vector<std::pair<Var, Var>> w_;  // Eigen-Reg: per layer (W_Q, W_K) (NH·HS, C); GPT-2: (c_attn, none)
  std::vector<std::pair<Var, Var>> qk_;
  Tensor last_;
};

}  // namespace saobp
