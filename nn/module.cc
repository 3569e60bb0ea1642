#include "nn/module.h"

#include <set>

#include "core/autograd/grad_mode.h"
#include "core/check.h"

namespace tandem::nn {

void Module::check_name(const std::string& name) {
  TANDEM_CHECK(!name.empty() && name.find('.') == std::string::npos, "invalid module member name '{}'", name);
}

Tensor Module::register_parameter(const std::string& name, Tensor value, ParameterUse use) {
  check_name(name);
  TANDEM_CHECK(is_floating(value.dtype()), "parameter '{}' must be floating, got {}", name, value.str());
  value.set_requires_grad(true);
  params_.emplace_back(name, std::move(value));
  param_uses_.push_back(use);
  return params_.back().second;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_name(name);
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name);
  TANDEM_CHECK(module != nullptr, "submodule '{}' is null", name);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool params, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : params ? params_ : buffers_) {
    std::string full = prefix + n;
    t.impl()->name = full;  // so errors about this tensor can name it
    out.emplace_back(std::move(full), t);
  }
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, out);
}

std::vector<Tensor> Module::cast_parameters() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (param_uses_[i] == ParameterUse::CastToComputeDtype) out.push_back(params_[i].second);
  for (const auto& [n, child] : children_) {
    std::vector<Tensor> more = child->cast_parameters();
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, out);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

NamedTensors Module::state_dict() const {
  NamedTensors s;
  s.tensors = named_parameters();
  for (auto& b : named_buffers()) s.tensors.push_back(std::move(b));
  return s;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  NoGradGuard no_grad;
  std::set<std::string> expected;
  for (auto& [name, t] : state_dict().tensors) {
    expected.insert(name);
    const Tensor* src = state.find(name);
    if (!src) {
      TANDEM_CHECK(!strict, "load_state_dict: missing '{}' ({})", name, t.str());
      continue;
    }
    TANDEM_CHECK(src->shape() == t.shape(), "load_state_dict: '{}' has shape {} in the state but {} in the model", name,
                 shape_str(src->shape()), shape_str(t.shape()));
    Tensor dst = t;
    dst.copy_(*src);
  }
  if (strict) {
    for (auto& [name, t] : state.tensors)
      TANDEM_CHECK(expected.count(name), "load_state_dict: unexpected '{}' (not in the model)", name);
  }
}

void Module::to(Device device) {
  for (auto* list : {&params_, &buffers_})
    for (auto& [n, t] : *list)
      if (t.device() != device) {
        t.set_grad(Tensor());  // a gradient on the old device would no longer match
        t.set_data(t.detach().to(device));
      }
  for (auto& [n, child] : children_) child->to(device);
}

}  // namespace tandem::nn
