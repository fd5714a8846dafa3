// Reverse-mode autograd. A Var is shared data + shared grad (flashlight's Variable): copies of
// a Var are the same variable. An op applied to Vars computes eagerly through saobp::kern and,
// when gradients are wanted, records a Node holding its backward closure and what it saved.
// backward() walks the recorded graph in reverse topological order (iteratively: no recursion
// limit on deep graphs), accumulating into each input's grad; saved tensors are released as
// soon as their node has run.
//
// Memory: a node holds its inputs as variables (their gradients accumulate there), not their
// values. When the last Var of a variable goes while a node still holds it, its data is
// released and only its geometry kept, for the gradient buffer: an activation that no backward
// saved (a residual branch's output, the f32 input of a bf16 GEMM, whose bf16 copy is what the
// GEMM's backward keeps) is freed as soon as the forward is done with it, as PyTorch frees a
// tensor no backward saved. What a backward needs it captures as a Tensor, which holds its
// storage whatever happens to the Var.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace saobp {

struct Node;

struct VarImpl {
  Tensor data;                 // undefined once released (no Var refers to the variable)
  Tensor grad;                 // same shape as data once any gradient reached it
  bool requires_grad = false;  // leaves: user choice; results: any input requires grad
  bool retain_grad = false;    // keep grad of a non-leaf after backward (tests, diagnostics)
  std::shared_ptr<Node> node;  // producer; null for leaves
  std::string name;            // parameter name, for messages
  // data's geometry, recorded when the data is released: what a gradient buffer takes.
  Shape released_shape;
  DType released_dtype = DType::f32;
  Device released_device;
};

// What Vars share: the variable, and by its lifetime whether any Var can still reach it. Its
// destructor releases the variable's data when a node still holds the variable (the header's
// "Memory").
struct VarHandle {
  std::shared_ptr<VarImpl> impl;
  explicit VarHandle(std::shared_ptr<VarImpl> v) : impl(std::move(v)) {}
  ~VarHandle();
  VarHandle(const VarHandle&) = delete;
  VarHandle& operator=(const VarHandle&) = delete;
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor data, bool requires_grad = false, std::string name = {});

  bool defined() const { return h_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  Tensor& data() { return impl_->data; }
  // The accumulated gradient (undefined until backward reaches this variable).
  const Tensor& grad() const { return impl_->grad; }
  Tensor& grad() { return impl_->grad; }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  void set_requires_grad(bool r) { impl_->requires_grad = r; }
  void retain_grad() { impl_->retain_grad = true; }
  bool is_leaf() const { return !impl_->node; }
  const std::string& name() const { return impl_->name; }
  void zero_grad();  // drops the gradient (the next backward starts from zero)

  const Shape& shape() const { return impl_->data.shape(); }
  int64_t dim() const { return impl_->data.dim(); }
  int64_t size(int64_t d) const { return impl_->data.size(d); }
  int64_t numel() const { return impl_->data.numel(); }
  DType dtype() const { return impl_->data.dtype(); }
  Device device() const { return impl_->data.device(); }

  // Backpropagates from this variable: a scalar seeds 1, otherwise pass `seed` (same shape).
  void backward(const Tensor& seed = Tensor()) const;
  // The same, calling `on_leaf_ready` once for each leaf of the graph that requires grad (a
  // parameter) as soon as its gradient is final: right after the last node in the walk that has
  // it as an input, so the caller can use the gradient while the rest of the backward runs
  // (GradSum starts a bucket's all-reduce). A leaf whose gradient no node produced (an input's
  // output gradient was never defined) is reported too, with its grad still undefined. Leaves
  // are reported in the order their gradients become final: the output layer's before the first
  // layer's.
  void backward(const Tensor& seed, const std::function<void(VarImpl&)>& on_leaf_ready) const;

  // A Var sharing this one's data, cut from the graph.
  Var detach() const { return Var(impl_->data); }

  // The variable itself, as the graph holds it: a holder of this pointer keeps the variable
  // but not its data (a Var does).
  const std::shared_ptr<VarImpl>& impl() const { return h_->impl; }

 private:
  std::shared_ptr<VarHandle> h_;
  VarImpl* impl_ = nullptr;  // h_->impl, one indirection less
};

// What a backward closure gets: the gradient arriving at the op's output, and for each input
// whether it wants a gradient and (lazily zero-allocated) the buffer to accumulate into.
class GradSlots {
 public:
  // gout_dead: the gradient handed to the backward is released right after it (not the root's,
  // not a retain_grad variable's), so one input may take its buffer over (steal).
  explicit GradSlots(const std::vector<std::shared_ptr<VarImpl>>& inputs, bool gout_dead = false)
      : inputs_(inputs), gout_dead_(gout_dead) {}
  bool needs(size_t i) const { return inputs_[i] && inputs_[i]->requires_grad; }
  Tensor& operator[](size_t i);  // the input's grad, zeros on first use
  // The input's grad for an op that can overwrite instead of accumulate: on first use a new
  // uninitialized buffer with fresh = true, which the caller must then write whole (a GEMM with
  // beta 0, a copy); otherwise the existing grad with fresh = false. Saves the zero fill.
  Tensor& slot(size_t i, bool& fresh);
  // For an input whose gradient is the output's gradient unchanged (a residual add, a reshape):
  // when that input has no gradient yet and gout is dead, contiguous, of its numel, dtype and
  // device, the input takes gout's buffer (viewed in its shape) instead of a copy, and true is
  // returned. Once per backward call: a second input must not share the buffer (accumulating
  // into one would change the other). Otherwise false, and the caller copies as before.
  bool steal(size_t i, const Tensor& gout);
  // Hands input i the gradient t (contiguous, of its shape, dtype and device): t itself, taken
  // over, when the input has none yet; otherwise t is added into it.
  void take(size_t i, const Tensor& t);

 private:
  const std::vector<std::shared_ptr<VarImpl>>& inputs_;
  bool gout_dead_ = false;
};

using BackwardFn = std::function<void(const Tensor& gout, GradSlots& gin)>;

struct Node {
  const char* name;
  std::vector<std::shared_ptr<VarImpl>> inputs;
  BackwardFn backward;
};

// Wraps an op's output. When grad mode is on and any input requires grad, records `fn` (and so
// everything it captured); otherwise drops it at once, releasing what it saved.
Var make_result(Tensor out, const char* name, std::vector<Var> inputs, BackwardFn fn);

// Grad mode (thread-local, on by default).
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace saobp
