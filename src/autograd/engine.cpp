// The backward pass: iterative topological sort, then each node once, outputs before inputs.
#include <unordered_map>
#include <unordered_set>

#include "autograd/var.h"
#include "tensor/kernels.h"

namespace saobp {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

Var::Var(Tensor data, bool requires_grad, std::string name) : impl_(std::make_shared<VarImpl>()) {
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

void Var::zero_grad() { impl_->grad = Tensor(); }

Tensor& GradSlots::operator[](size_t i) {
  VarImpl& v = *inputs_[i];
  if (!v.grad.defined()) v.grad = v.data.zeros_like();
  return v.grad;
}

bool GradSlots::steal(size_t i, const Tensor& gout) {
  if (!gout_dead_) return false;
  VarImpl& v = *inputs_[i];
  if (v.grad.defined() || !gout.is_contiguous() || gout.numel() != v.data.numel() ||
      gout.dtype() != v.data.dtype() || gout.device() != v.data.device())
    return false;
  v.grad = gout.view(v.data.shape());
  gout_dead_ = false;  // taken: no second input may have it
  return true;
}

Tensor& GradSlots::slot(size_t i, bool& fresh) {
  VarImpl& v = *inputs_[i];
  fresh = !v.grad.defined();
  if (fresh) v.grad = v.data.empty_like();
  return v.grad;
}

Var make_result(Tensor out, const char* name, std::vector<Var> inputs, BackwardFn fn) {
  bool any = false;
  if (grad_enabled())
    for (const Var& v : inputs) any = any || v.requires_grad();
  Var r(std::move(out));
  if (!any) return r;  // fn (and what it saved) dies here
  auto node = std::make_shared<Node>();
  node->name = name;
  node->inputs.reserve(inputs.size());
  for (const Var& v : inputs) node->inputs.push_back(v.defined() ? v.impl() : nullptr);
  node->backward = std::move(fn);
  r.impl()->requires_grad = true;
  r.impl()->node = std::move(node);
  return r;
}

void Var::backward(const Tensor& seed) const { backward(seed, {}); }

void Var::backward(const Tensor& seed, const std::function<void(VarImpl&)>& on_leaf_ready) const {
  if (!requires_grad()) fail("backward", "the variable does not require grad (no graph was recorded)");
  Tensor g;
  if (seed.defined()) {
    check_shape(seed, shape(), "backward", "seed");
    g = seed;
  } else {
    if (numel() != 1) fail("backward", "backward() without a seed needs a scalar, got {}", data().str());
    g = Tensor::full(shape(), 1.0, dtype(), device());
  }
  if (impl_->grad.defined()) {
    kern::axpby(g, 1.0, impl_->grad, 1.0);
  } else {
    impl_->grad = g.clone();
  }
  if (!impl_->node) {
    if (on_leaf_ready) on_leaf_ready(*impl_);
    return;
  }

  // Reverse postorder of the graph above this variable, by an explicit-stack DFS.
  std::vector<VarImpl*> order;
  std::unordered_set<VarImpl*> seen;
  std::vector<std::pair<VarImpl*, size_t>> stack{{impl_.get(), 0}};
  seen.insert(impl_.get());
  while (!stack.empty()) {
    auto& [v, next] = stack.back();
    const auto& ins = v->node ? v->node->inputs : std::vector<std::shared_ptr<VarImpl>>{};
    if (next < ins.size()) {
      VarImpl* in = ins[next++].get();
      if (in && in->node && seen.insert(in).second) stack.push_back({in, 0});
      continue;
    }
    order.push_back(v);
    stack.pop_back();
  }

  // Hold every node while walking: releasing a node's inputs may free a VarImpl whose node
  // comes later in the order.
  std::vector<std::shared_ptr<Node>> nodes;
  nodes.reserve(order.size());
  for (auto it = order.rbegin(); it != order.rend(); ++it) nodes.push_back((*it)->node);
  // Nodes run in the order of `nodes`, and only a node accumulates into its inputs' gradients,
  // so a leaf's gradient is final once the last node that has it as an input has run: leaf `l`
  // is ready after node last[l] = max{k : l in nodes[k]->inputs}. ready_after[k] lists those
  // leaves in the order of first appearance among node k's inputs (deterministic, unlike the
  // map's).
  std::vector<std::vector<VarImpl*>> ready_after;
  if (on_leaf_ready) {
    std::unordered_map<VarImpl*, size_t> last;
    for (size_t k = 0; k < nodes.size(); ++k)
      for (const auto& in : nodes[k]->inputs)
        if (in && !in->node && in->requires_grad) last[in.get()] = k;
    ready_after.resize(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k)
      for (const auto& in : nodes[k]->inputs) {
        auto it = in ? last.find(in.get()) : last.end();
        if (it == last.end() || it->second != k) continue;
        ready_after[k].push_back(in.get());
        last.erase(it);  // once, however often the node takes it
      }
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    VarImpl* v = order[order.size() - 1 - k];
    const std::shared_ptr<Node>& node = nodes[k];
    if (!node->backward)
      fail("backward", "the graph through '{}' was already freed by an earlier backward()", node->name);
    if (v->grad.defined()) {
      // v's gradient is dropped after its node unless it is the root or retained, so an
      // input may take it over (GradSlots::steal) instead of copying it.
      GradSlots slots(node->inputs, !v->retain_grad && v != impl_.get());
      node->backward(v->grad, slots);
    }
    // Release what the node saved and the intermediate gradient.
    node->backward = nullptr;
    if (!v->retain_grad && v != impl_.get()) v->grad = Tensor();
    if (on_leaf_ready)
      for (VarImpl* leaf : ready_after[k]) on_leaf_ready(*leaf);
  }
  // The graph is spent: drop the edges so intermediate data is freed with it.
  for (const auto& node : nodes) node->inputs.clear();
}

}  // namespace saobp
