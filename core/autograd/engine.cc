#include "core/autograd/engine.h"

#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/check.h"
#include "core/copy_kernels.h"
#include "core/op_scope.h"
#include "core/stream.h"

namespace tandem {

namespace {

// Gradients waiting for one node, one slot per output of that node.
struct InputBuffer {
  std::vector<Tensor> grads;

  // owned[slot]: grads[slot] is a private copy that may be added into.
  void add(uint32_t slot, const Tensor& g, std::vector<bool>& owned) {
    if (!g.defined()) return;
    Tensor& cur = grads[slot];
    if (!cur.defined()) {
      cur = g;
      return;
    }
    // Sum into a private copy: `cur` may be referenced elsewhere.
    if (!owned[slot]) {
      cur = cur.clone();
      owned[slot] = true;
    }
    TANDEM_CHECK(cur.shape() == g.shape() && cur.dtype() == g.dtype() && cur.device() == g.device(),
                 "gradients flowing into the same tensor disagree: {} vs {}", cur.str(), g.str());
    if (cur.device().is_cpu()) {
      accumulate_host(cur.data_ptr(), g.data_ptr(), g.dtype(), g.numel());
    } else {
#if TANDEM_WITH_CUDA
      accumulate_cuda(cur.data_ptr(), g.data_ptr(), g.dtype(), g.numel(),
                      cuda::current_stream(g.device().index).handle());
#endif
    }
  }
};

struct NodeState {
  int dependencies = 0;
  InputBuffer buffer;
  std::vector<bool> owned;
};

// AccumulateGrad runs as soon as its gradient is complete, so hooks (and DDP's
// bucket launches) are not held back behind unrelated work.
uint64_t priority(const Node* n) {
  return dynamic_cast<const AccumulateGrad*>(n) ? std::numeric_limits<uint64_t>::max() : n->sequence_nr();
}

struct ByPriority {
  bool operator()(const Node* a, const Node* b) const { return priority(a) < priority(b); }
};

void validate_outputs(const Node& node, const std::vector<Tensor>& out) {
  const auto& edges = node.next_edges();
  TANDEM_CHECK(out.size() == edges.size(), "{} returned {} gradients for {} inputs", node.name(), out.size(),
               edges.size());
  const auto& meta = node.input_meta();
  for (size_t i = 0; i < out.size(); ++i) {
    if (!edges[i].valid() || !out[i].defined()) continue;
    const InputMeta& m = meta[i];
    TANDEM_CHECK(out[i].shape() == m.shape && out[i].dtype() == m.dtype && out[i].device() == m.device,
                 "{} returned an invalid gradient for input {}: got {} but the input is {}{} {}", node.name(), i,
                 out[i].str(), dtype_name(m.dtype), shape_str(m.shape), m.device.str());
  }
}

thread_local bool tls_in_backward = false;
thread_local std::vector<std::function<void()>> tls_callbacks;

// Marks this thread as inside backward; drops unrun callbacks if backward fails.
struct BackwardScope {
  BackwardScope() {
    TANDEM_CHECK(!tls_in_backward, "backward called from inside another backward on the same thread");
    tls_in_backward = true;
    tls_callbacks.clear();
  }
  ~BackwardScope() {
    tls_in_backward = false;
    tls_callbacks.clear();
  }
};

}  // namespace

bool in_backward() { return tls_in_backward; }

void queue_backward_callback(std::function<void()> callback) {
  TANDEM_CHECK(tls_in_backward, "queue_backward_callback outside of a backward pass");
  tls_callbacks.push_back(std::move(callback));
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  TANDEM_CHECK(roots.size() == grads.size(), "backward: {} roots but {} gradients", roots.size(), grads.size());
  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  BackwardScope scope;

  std::unordered_map<Node*, NodeState> state;
  std::vector<std::pair<Edge, Tensor>> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TANDEM_CHECK(r.defined(), "backward on an undefined tensor");
    TANDEM_CHECK(r.requires_grad(), "backward on {}: the tensor does not require grad and has no grad_fn", r.str());
    Tensor g = grads[i];
    if (!g.defined()) {
      TANDEM_CHECK(r.numel() == 1, "backward on {}: a gradient can be implied only for one-element outputs", r.str());
      g = Tensor::full(r.shape(), 1.0, r.dtype(), r.device());
    }
    TANDEM_CHECK(g.shape() == r.shape() && g.dtype() == r.dtype() && g.device() == r.device(),
                 "backward: gradient {} does not match output {}", g.str(), r.str());
    root_edges.emplace_back(gradient_edge(r), g);
  }

  // Count, for every reachable node, how many edges lead into it.
  std::vector<Node*> stack;
  for (auto& [edge, g] : root_edges) {
    Node* n = edge.fn.get();
    if (!state.count(n)) {
      state[n];
      stack.push_back(n);
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      Node* m = e.fn.get();
      auto [it, inserted] = state.try_emplace(m);
      it->second.dependencies++;
      if (inserted) stack.push_back(m);
    }
  }
  for (auto& [n, s] : state) {
    s.buffer.grads.resize(n->num_outputs());
    s.owned.assign(n->num_outputs(), false);
  }

  std::priority_queue<Node*, std::vector<Node*>, ByPriority> ready;
  for (auto& [edge, g] : root_edges) {
    NodeState& s = state[edge.fn.get()];
    s.buffer.add(edge.input_nr, g, s.owned);
  }
  for (auto& [edge, g] : root_edges) {
    Node* n = edge.fn.get();
    if (state[n].dependencies == 0) {
      state[n].dependencies = -1;  // queued
      ready.push(n);
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    NodeState& s = state[node];
    std::vector<Tensor> in = std::move(s.buffer.grads);
    bool any = false;
    for (const Tensor& t : in) any = any || t.defined();
    std::vector<Tensor> out;
    if (any) {
      std::optional<OpScope> scope;  // name() builds a string: only when someone observes
      if (op_observer() != nullptr) scope.emplace(node->name(), /*backward=*/true);
      out = node->apply(std::move(in));
      validate_outputs(*node, out);
    }
    node->run_post_hooks();  // also when apply was skipped: the node was reached
    if (!retain_graph) node->release_saved();
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      NodeState& ns = state[e.fn.get()];
      if (i < out.size()) ns.buffer.add(e.input_nr, out[i], ns.owned);
      if (--ns.dependencies == 0) {
        ns.dependencies = -1;
        ready.push(e.fn.get());
      }
    }
  }

  // Callbacks may queue further callbacks; run until none are left.
  for (size_t i = 0; i < tls_callbacks.size(); ++i) {
    auto cb = std::move(tls_callbacks[i]);
    cb();
  }
}

}  // namespace tandem