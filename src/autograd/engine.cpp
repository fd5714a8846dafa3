// The backward pass: iterative topological sort, then each node once, outputs before inputs.
#include <cstdlib>
#include <string>
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

Var::Var(Tensor data, bool requires_grad, std::string name)
    : h_(std::make_shared<VarHandle>(std::make_shared<VarImpl>())), impl_(h_->impl.get()) {
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

// SAOBP_KEEP_GRAPH_DATA=1 keeps the data of every variable a node holds until the graph is
// spent, as this engine did before it released them: the baseline of `saobp bench`'s peak
// memory figures (docs/performance.md), measured by the same binary.
namespace {
bool keep_graph_data() {
  static const bool keep = [] {
    const char* v = std::getenv("SAOBP_KEEP_GRAPH_DATA");
    return v && std::string(v) == "1";
  }();
  return keep;
}
}  // namespace

VarHandle::~VarHandle() {
  // The last Var is gone. If a node still holds the variable, it needs the gradient buffer's
  // geometry from it, never the values (a backward that needs them captured the Tensor).
  if (!impl || impl.use_count() == 1 || !impl->data.defined() || keep_graph_data()) return;
  impl->released_shape = impl->data.shape();
  impl->released_dtype = impl->data.dtype();
  impl->released_device = impl->data.device();
  impl->data = Tensor();
}

void Var::zero_grad() { impl_->grad = Tensor(); }

namespace {

// What a gradient buffer of `v` takes: its data's geometry, or the one recorded when the data
// was released.
struct Geometry {
  const Shape& shape;
  DType dtype;
  Device device;
};
Geometry geometry(const VarImpl& v) {
  if (v.data.defined()) return {v.data.shape(), v.data.dtype(), v.data.device()};
  return {v.released_shape, v.released_dtype, v.released_device};
}

// A gradient buffer for `v`: uninitialized, or zeros.
Tensor new_grad(const VarImpl& v, bool zero) {
  const Geometry g = geometry(v);
  return zero ? Tensor::zeros(g.shape, g.dtype, g.device) : Tensor::empty(g.shape, g.dtype, g.device);
}

}  // namespace

Tensor& GradSlots::operator[](size_t i) {
  VarImpl& v = *inputs_[i];
  if (!v.grad.defined()) v.grad = new_grad(v, true);
  return v.grad;
}

bool GradSlots::steal(size_t i, const Tensor& gout) {
  if (!gout_dead_) return false;
  VarImpl& v = *inputs_[i];
  const Geometry g = geometry(v);
  if (v.grad.defined() || !gout.is_contiguous() || gout.numel() != shape_numel(g.shape) ||
      gout.dtype() != g.dtype || gout.device() != g.device)
    return false;
  v.grad = gout.view(g.shape);
  gout_dead_ = false;  // taken: no second input may have it
  return true;
}

void GradSlots::take(size_t i, const Tensor& t) {
  VarImpl& v = *inputs_[i];
  if (v.grad.defined())
    kern::copy(t, v.grad, true);
  else
    v.grad = t;
}

Tensor& GradSlots::slot(size_t i, bool& fresh) {
  VarImpl& v = *inputs_[i];
  fresh = !v.grad.defined();
  if (fresh) v.grad = new_grad(v, false);
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
  std::vector<std::pair<VarImpl*, size_t>> stack{{impl_, 0}};
  seen.insert(impl_);
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
      GradSlots slots(node->inputs, !v->retain_grad && v != impl_);
      node->backward(v->grad, slots);
    }
    // Release what the node saved and the intermediate gradient.
    node->backward = nullptr;
    if (!v->retain_grad && v != impl_) v->grad = Tensor();
    if (on_leaf_ready)
      for (VarImpl* leaf : ready_after[k]) on_leaf_ready(*leaf);
  }
  // The graph is spent: drop the edges so intermediate data is freed with it.
  for (const auto& node : nodes) node->inputs.clear();
}

}  // namespace saobp
