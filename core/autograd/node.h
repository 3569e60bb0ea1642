// The autograd graph: nodes that turn output gradients into input gradients.
//
// Every differentiable op that runs with grad mode on and at least one input
// that requires grad creates one Node. The node holds an Edge per input,
// pointing at the node that produced that input (its grad_fn) or, for a leaf
// that requires grad, at the leaf's AccumulateGrad node; inputs that need no
// gradient get an empty edge. Nodes keep what backward needs as SavedTensors,
// which are freed after backward unless retain_graph is set; running backward
// through a node a second time then fails with a clear error.
//
// Nodes are numbered in creation order (sequence_nr); among the nodes whose
// gradients are complete, the engine runs the most recently created first, so
// backward visits the graph in reverse order of the forward pass, which is the
// order DDP expects gradients to become ready in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem {

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which input slot of fn receives the gradient
  bool valid() const { return fn != nullptr; }
};

// What a gradient flowing along an edge must look like.
struct InputMeta {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
};

// A tensor saved for backward: kept detached (no cycle through the graph), with
// the storage version at save time to catch in-place modification.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor unpack(const Node& owner) const;  // throws if released or modified in place
  void release() { tensor_ = Tensor(); released_ = true; }
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
  bool released_ = false;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads[i] is the gradient of the node's i-th output (undefined if that output got none).
  // Returns one gradient per next edge (undefined for edges that need none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors; called after backward unless retain_graph is set.
  virtual void release_saved() {}

  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t num_outputs() const { return num_outputs_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<InputMeta>& input_meta() const { return input_meta_; }

  // Wires this node to `inputs` and sets it as grad_fn of `outputs`. Called by ops (see function.h).
  void connect(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs);

  // Post-hooks run each time a backward pass reaches this node: after apply,
  // and also when every gradient that arrived was undefined (the engine then
  // skips apply), as PyTorch's node post-hooks. DDP hooks a parameter's
  // AccumulateGrad this way, so that a parameter the graph reaches with no
  // gradient still counts as ready, where a tensor hook would never fire.
  // Handles are unique per node; a hook may add or remove hooks.
  uint64_t add_post_hook(std::function<void()> hook);
  void remove_post_hook(uint64_t handle);
  void run_post_hooks();

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> input_meta_;
  uint32_t num_outputs_ = 0;

 private:
  uint64_t sequence_nr_;
  std::vector<std::pair<uint64_t, std::function<void()>>> post_hooks_;
  uint64_t next_post_hook_ = 1;
};

// Sink node of a leaf that requires grad: adds the incoming gradient into
// leaf.grad() and then runs the leaf's post-accumulate-grad hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// The edge along which a gradient for `t` must flow (empty if t needs none).
Edge gradient_edge(const Tensor& t);

// True when an op with these inputs must record a node.
bool any_requires_grad(const std::vector<const Tensor*>& inputs);

}  // namespace tandem
