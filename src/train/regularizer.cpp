#include "train/regularizer.h"

#include "autograd/ops.h"
#include "autograd/regularizers.h"
#include "tensor/kernels.h"

namespace saobp {

Regularizer::Regularizer(const RunConfig& cfg, ParamStore& P)
    : kind_(cfg.train.regularizer),
      coef_(cfg.train.regularizer_coef),
      gamma_(cfg.train.entropy_reg_gamma),
      causal_(cfg.model.family == "gpt2"),
      heads_(cfg.model.heads) {
  if (!on()) return;
  for (int64_t l = 0; l < cfg.model.layers; ++l) {
    const std::string p = causal_ ? fmt::format("transformer.h.{}.attn.", l)
                                  : fmt::format("bert.encoder.layer.{}.attention.self.", l);
    if (kind_ == "entropy") {
      Var theta = P.add(p + "saobp_entropy_theta", {heads_}, Init::zeros);
      kern::fill(theta.data(), kEntropyThetaInit);
      theta_.push_back(theta);
    } else if (causal_) {
      w_.emplace_back(P.get(p + "c_attn.weight"), Var());
    } else {
      w_.emplace_back(P.get(p + "query.weight"), P.get(p + "key.weight"));
    }
  }
}

Var Regularizer::entropy_penalty(const Tensor& key_mask) {
  if (qk_.size() != theta_.size())
    fail("regularizer", "Entropy-Reg got q, k of {} layers from the forward, expected {}", qk_.size(),
         theta_.size());
  Var total;
  // The mask of a batch made on the host, where the model's q and k are.
  const Tensor mask = key_mask.defined() && !qk_.empty() ? key_mask.to(qk_[0].first.device()) : key_mask;
  for (size_t l = 0; l < qk_.size(); ++l) {
    const Var p = entropy_reg_penalty(qk_[l].first, qk_[l].second, mask, causal_, theta_[l], gamma_);
    total = total.defined() ? saobp::add(total, p) : p;
  }
  return scale(total, 1.0 / static_cast<double>(qk_.size()));
}

Var Regularizer::eigen_penalty() const {
  Var total;
  for (const auto& [wq, wk] : w_) {
    Var p;
    if (wk.defined()) {
      p = mean(qk_eigen_variance(wq, wk, heads_));
    } else {  // GPT-2's Conv1D c_attn (C, 3C) = [W_q | W_k | W_v] in (in, out): transposed slices
      const int64_t C = wq.size(0);
      p = mean(qk_eigen_variance(transpose(slice(wq, 1, 0, C), 0, 1), transpose(slice(wq, 1, C, 2 * C), 0, 1),
                                 heads_));
    }
    total = total.defined() ? saobp::add(total, p) : p;
  }
  return scale(total, 1.0 / static_cast<double>(w_.size()));
}

Var Regularizer::add(const Var& loss, const Tensor& key_mask) {
  if (!on()) return loss;
  const Var penalty = kind_ == "entropy" ? entropy_penalty(key_mask) : eigen_penalty();
  qk_.clear();
  last_ = penalty.data();
  return saobp::add(loss, scale(penalty, coef_));
}

}  // namespace saobp
