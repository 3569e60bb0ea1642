#include "optim/adamw.h"

#include "core/check.h"
#include "kernels/device_stream.h"
#include "optim/cpu/adamw_cpu.h"

#if TANDEM_WITH_CUDA
#include "optim/cuda/adamw_cuda.h"
#endif

namespace tandem::optim {

namespace {

std::vector<std::vector<Tensor>> params_of(const std::vector<AdamW::ParamGroup>& groups) {
  std::vector<std::vector<Tensor>> out;
  for (const auto& g : groups) out.push_back(g.params);
  return out;
}

void check_options(const AdamWOptions& o, size_t group) {
  TANDEM_CHECK(o.lr >= 0.0, "AdamW: group {}: invalid learning rate {}", group, o.lr);
  TANDEM_CHECK(o.eps >= 0.0, "AdamW: group {}: invalid eps {}", group, o.eps);
  TANDEM_CHECK(o.betas.first >= 0.0 && o.betas.first < 1.0, "AdamW: group {}: invalid beta1 {} (need 0 <= beta1 < 1)",
               group, o.betas.first);
  TANDEM_CHECK(o.betas.second >= 0.0 && o.betas.second < 1.0,
               "AdamW: group {}: invalid beta2 {} (need 0 <= beta2 < 1)", group, o.betas.second);
  TANDEM_CHECK(o.weight_decay >= 0.0, "AdamW: group {}: invalid weight_decay {}", group, o.weight_decay);
}

}  // namespace

AdamW::AdamW(std::vector<Tensor> params, Options options) : AdamW(std::vector<ParamGroup>{{std::move(params), options}}) {}

AdamW::AdamW(std::vector<ParamGroup> groups) : Optimizer("AdamW", params_of(groups)) {
  for (size_t g = 0; g < groups.size(); ++g) {
    check_options(groups[g].options, g);
    options_.push_back(groups[g].options);
  }
}

const AdamW::Options& AdamW::options(size_t group) const {
  check_group(group);
  return options_[group];
}

void AdamW::set_lr(size_t group, double lr) {
  check_group(group);
  TANDEM_CHECK(lr >= 0.0, "AdamW: group {}: invalid learning rate {}", group, lr);
  options_[group].lr = lr;
  lr_changed(group);
}

std::vector<std::string> AdamW::state_names(size_t) const { return {"step", "exp_avg", "exp_avg_sq"}; }

void AdamW::update_group(size_t group, const TensorList& tensors, const float* found_inf) {
  const Options& o = options_[group];
  const AdamWHyper hyper{o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, device_lr(group)};
  if (device().is_cpu()) {
    adamw_step_cpu(tensors, hyper, found_inf);
  } else {
    TANDEM_CUDA_ONLY(adamw_step_cuda(tensors, hyper, found_inf, kernels::stream_of(param_group(group).front())));
  }
}

}  // namespace tandem::optim
