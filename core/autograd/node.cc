#include "core/autograd/node.h"

#include <atomic>
#include <limits>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/copy_kernels.h"

#if TANDEM_WITH_CUDA
#include "core/stream.h"
#endif

namespace tandem {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  tensor_ = t.detach();
  version_ = t.storage()->version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  TANDEM_CHECK(!released_,
               "{}: trying to backward through the graph a second time (its saved tensors were freed after the "
               "first backward); call backward(..., retain_graph=true) the first time if you need this",
               owner.name());
  if (tensor_.defined()) {
    TANDEM_CHECK(tensor_.storage()->version() == version_,
                 "{}: a tensor saved for backward ({}) was modified in place afterwards (version {} -> {})",
                 owner.name(), tensor_.str(), version_, tensor_.storage()->version());
  }
  return tensor_;
}

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1)) {}

void Node::connect(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
  next_edges_.clear();
  input_meta_.clear();
  for (const Tensor* in : inputs) {
    next_edges_.push_back(gradient_edge(*in));
    input_meta_.push_back(InputMeta{in->shape(), in->dtype(), in->device()});
  }
  num_outputs_ = static_cast<uint32_t>(outputs.size());
  auto self = shared_from_this();
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* impl = outputs[i]->impl();
    impl->grad_fn = self;
    impl->output_nr = i;
    impl->requires_grad = true;
  }
}

uint64_t Node::add_post_hook(std::function<void()> hook) {
  TANDEM_CHECK(hook != nullptr, "{}: add_post_hook with an empty function", name());
  const uint64_t handle = next_post_hook_++;
  post_hooks_.emplace_back(handle, std::move(hook));
  return handle;
}

void Node::remove_post_hook(uint64_t handle) {
  std::erase_if(post_hooks_, [handle](const auto& h) { return h.first == handle; });
}

void Node::run_post_hooks() {
  if (post_hooks_.empty()) return;
  auto hooks = post_hooks_;  // a copy: a hook may add or remove hooks
  for (auto& [handle, hook] : hooks) hook();
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {
  num_outputs_ = 1;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  std::shared_ptr<TensorImpl> impl = leaf_.lock();
  if (!impl || !grads[0].defined()) return {};
  Tensor param(impl);
  const Tensor& g = grads[0];
  const std::string& label = impl->name.empty() ? param.str() : impl->name;
  TANDEM_CHECK(g.shape() == param.shape() && g.dtype() == param.dtype() && g.device() == param.device(),
               "gradient {} does not match parameter {} ({})", g.str(), param.str(), label);
  NoGradGuard no_grad;
  Tensor existing = param.grad();
  if (!existing.defined()) {
    // The first gradient is taken as it is when nothing else can see it, as
    // PyTorch's AccumulateGrad steals an unshared gradient: no copy per
    // parameter per step. Otherwise a fresh copy: the incoming tensor may be
    // shared with other edges (add's backward passes one gradient to both
    // inputs) or a view of a larger buffer, and accumulating into it later
    // would leak into them.
    const bool unshared = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                          g.offset_bytes() == 0 && g.nbytes() == g.storage()->nbytes();
    param.set_grad(unshared ? g : g.clone());
  } else {
    TANDEM_CHECK(existing.shape() == param.shape(), "accumulated gradient {} of {} has the wrong shape",
                 existing.str(), label);
    existing.bump_version();
    if (existing.device().is_cpu()) {
      accumulate_host(existing.data_ptr(), g.data_ptr(), g.dtype(), g.numel());
    } else {
#if TANDEM_WITH_CUDA
      accumulate_cuda(existing.data_ptr(), g.data_ptr(), g.dtype(), g.numel(),
                      cuda::current_stream(g.device().index).handle());
#endif
    }
  }
  // Copy the list: a hook may register or remove hooks.
  auto hooks = impl->post_accumulate_hooks;
  for (auto& [handle, hook] : hooks) hook(param);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.requires_grad()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (!impl->grad_accumulator) impl->grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return {impl->grad_accumulator, 0};
}

bool any_requires_grad(const std::vector<const Tensor*>& inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

}  // namespace tandem
