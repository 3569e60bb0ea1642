#include "optim/sgd.h"

#include "core/check.h"
#include "kernels/device_stream.h"
#include "optim/cpu/sgd_cpu.h"

#if TANDEM_WITH_CUDA
#include "optim/cuda/sgd_cuda.h"
#endif

namespace tandem::optim {

namespace {

std::vector<std::vector<Tensor>> params_of(const std::vector<SGD::ParamGroup>& groups) {
  std::vector<std::vector<Tensor>> out;
  for (const auto& g : groups) out.push_back(g.params);
  return out;
}

void check_options(const SGDOptions& o, size_t group) {
  TANDEM_CHECK(o.lr >= 0.0, "SGD: group {}: invalid learning rate {}", group, o.lr);
  TANDEM_CHECK(o.momentum >= 0.0, "SGD: group {}: invalid momentum {}", group, o.momentum);
  TANDEM_CHECK(o.weight_decay >= 0.0, "SGD: group {}: invalid weight_decay {}", group, o.weight_decay);
  TANDEM_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: group {}: Nesterov momentum requires a momentum and zero dampening", group);
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, Options options) : SGD(std::vector<ParamGroup>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup> groups) : Optimizer("SGD", params_of(groups)) {
  for (size_t g = 0; g < groups.size(); ++g) {
    check_options(groups[g].options, g);
    options_.push_back(groups[g].options);
  }
}

const SGD::Options& SGD::options(size_t group) const {
  check_group(group);
  return options_[group];
}

void SGD::set_lr(size_t group, double lr) {
  check_group(group);
  TANDEM_CHECK(lr >= 0.0, "SGD: group {}: invalid learning rate {}", group, lr);
  options_[group].lr = lr;
  lr_changed(group);
}

std::vector<std::string> SGD::state_names(size_t group) const {
  if (options_.at(group).momentum == 0.0) return {};
  return {"step", "momentum_buffer"};
}

void SGD::update_group(size_t group, const TensorList& tensors, const float* found_inf) {
  const Options& o = options_[group];
  const SgdHyper hyper{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, device_lr(group)};
  if (device().is_cpu()) {
    sgd_step_cpu(tensors, hyper, found_inf);
  } else {
    TANDEM_CUDA_ONLY(sgd_step_cuda(tensors, hyper, found_inf, kernels::stream_of(param_group(group).front())));
  }
}

}  // namespace tandem::optim
