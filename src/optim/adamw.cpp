#include "optim/adamw.h"

#include "tensor/kernels.h"

namespace saobp {

AdamW::AdamW(std::vector<Var> params, const AdamWConfig& cfg) : params_(std::move(params)), cfg_(cfg) {
  for (const Var& p : params_) {
    m_.push_back(p.data().zeros_like());
    v_.push_back(p.data().zeros_like());
  }
}

void AdamW::step(double lr, double grad_scale) {
  ++step_;
  std::vector<Tensor> p, g, m, v;
  std::vector<AdamWParams> h;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Var& q = params_[i];
    if (!q.grad().defined()) continue;
    p.push_back(q.data()), g.push_back(q.grad()), m.push_back(m_[i]), v.push_back(v_[i]);
    h.push_back({lr, cfg_.beta1, cfg_.beta2, cfg_.eps, decays(i) ? cfg_.weight_decay : 0.0, step_});
  }
  kern::multi_adamw_step(p, g, m, v, h, grad_scale);
}

}  // namespace saobp
