#include "optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "core/check.h"

namespace tandem::optim {

Optimizer::Optimizer(const char* name, std::vector<std::vector<Tensor>> groups) : name_(name), groups_(std::move(groups)) {
  TANDEM_CHECK(!groups_.empty(), "{}: no parameter groups", name_);
  std::map<const TensorImpl*, size_t> seen;  // parameter -> its group
  size_t count = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    TANDEM_CHECK(!groups_[g].empty(), "{}: parameter group {} is empty", name_, g);
    group_first_.push_back(count);
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const Tensor& p = groups_[g][i];
      TANDEM_CHECK(p.defined(), "{}: parameter {} of group {} is undefined", name_, i, g);
      const std::string what = p.name().empty() ? fmt::format("parameter {} of group {}", i, g)
                                                : fmt::format("parameter '{}' (group {})", p.name(), g);
      TANDEM_CHECK(p.dtype() == DType::F32, "{}: {} is {}: optimizers update f32 master parameters", name_, what,
                   p.str());
      TANDEM_CHECK(p.requires_grad(), "{}: {} does not require grad", name_, what);
      TANDEM_CHECK(p.is_leaf(), "{}: {} is not a leaf tensor", name_, what);
      if (count == 0) device_ = p.device();
      TANDEM_CHECK(p.device() == device_, "{}: {} is on {} but the first parameter is on {}: one device per optimizer",
                   name_, what, p.device().str(), device_.str());
      auto [it, inserted] = seen.emplace(p.impl(), g);
      TANDEM_CHECK(inserted, "{}: {} appears more than once (also in group {})", name_, what, it->second);
      ++count;
    }
  }
  state_.resize(count);
}

void Optimizer::check_group(size_t group) const {
  TANDEM_CHECK(group < groups_.size(), "{}: parameter group {} does not exist ({} groups)", name_, group,
               groups_.size());
}

const std::vector<Tensor>& Optimizer::param_group(size_t group) const {
  check_group(group);
  return groups_[group];
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.begin(), g.end());
  return out;
}

std::vector<Tensor> Optimizer::grads() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_)
    for (const Tensor& p : g)
      if (Tensor grad = p.grad(); grad.defined()) out.push_back(grad);
  return out;
}

std::map<std::string, Tensor>& Optimizer::state_of(size_t group, size_t i) {
  auto& st = state_[param_index(group, i)];
  if (st.empty()) {
    const Tensor& p = groups_[group][i];
    for (const std::string& name : state_names(group))
      st[name] = Tensor::zeros(name == "step" ? Shape{} : p.shape(), DType::F32, device_);
  }
  return st;
}

void Optimizer::step(const Tensor& found_inf) {
  const float* flag = nullptr;
  if (found_inf.defined()) {
    TANDEM_CHECK(found_inf.numel() == 1 && found_inf.dtype() == DType::F32 && found_inf.device() == device_,
                 "{}.step: found_inf must be one f32 element on {}, got {}", name_, device_.str(), found_inf.str());
    flag = static_cast<const float*>(found_inf.data_ptr());
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<std::string> names = state_names(g);
    TensorList list;
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const Tensor& p = groups_[g][i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      TANDEM_CHECK(p.dtype() == DType::F32 && p.device() == device_ && grad.dtype() == DType::F32 &&
                       grad.device() == device_ && grad.numel() == p.numel(),
                   "{}.step: parameter {} of group {} ({}) or its gradient ({}) is no longer an f32 tensor on {}",
                   name_, i, g, p.str(), grad.str(), device_.str());
      auto& st = state_of(g, i);
      TensorListEntry e;
      e.ptr[0] = static_cast<float*>(p.data_ptr());
      e.ptr[1] = static_cast<float*>(grad.data_ptr());
      size_t slot = 2;
      for (const std::string& name : names) {
        float* data = static_cast<float*>(st.at(name).data_ptr());
        if (name == "step") e.step = data;
        else e.ptr[slot++] = data;
      }
      e.numel = p.numel();
      list.push_back(e);
      p.bump_version();
    }
    if (!list.empty()) update_group(g, list, flag);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (Tensor& p : g) {
      if (set_to_none) p.set_grad(Tensor());
      else if (Tensor grad = p.grad(); grad.defined()) grad.zero_();
    }
}

void Optimizer::set_capturable(bool on) {
  if (!on) {
    lr_on_device_ = Tensor();
    return;
  }
  lr_on_device_ = Tensor::zeros({static_cast<int64_t>(groups_.size())}, DType::F64, device_);
  for (size_t g = 0; g < groups_.size(); ++g) lr_changed(g);
}

const double* Optimizer::device_lr(size_t group) const {
  if (!capturable()) return nullptr;
  return static_cast<const double*>(lr_on_device_.data_ptr()) + group;
}

void Optimizer::lr_changed(size_t group) {
  if (capturable()) lr_on_device_.narrow(static_cast<int64_t>(group), 1).fill_(lr(group));
}

std::string Optimizer::key(size_t index, const std::string& name) const { return fmt::format("state.{}.{}", index, name); }

Optimizer::StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [name, t] : state_[i]) out[key(i, name)] = t;
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  // Where each parameter index lives.
  std::vector<std::pair<size_t, size_t>> where;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i) where.emplace_back(g, i);

  std::map<size_t, std::set<std::string>> given;  // parameter index -> names present
  for (const auto& [k, t] : state) {
    constexpr std::string_view prefix = "state.";
    const size_t dot = k.find('.', prefix.size());
    size_t index = 0;
    bool ok = k.starts_with(prefix) && dot != std::string::npos && dot + 1 < k.size();
    if (ok) {
      auto [end, ec] = std::from_chars(k.data() + prefix.size(), k.data() + dot, index);
      ok = ec == std::errc() && end == k.data() + dot;
    }
    TANDEM_CHECK(ok, "{}.load_state_dict: key '{}' is not of the form state.<parameter index>.<name>", name_, k);
    TANDEM_CHECK(index < where.size(), "{}.load_state_dict: key '{}' names parameter {} but the optimizer has {}",
                 name_, k, index, where.size());
    const auto [g, i] = where[index];
    const std::string name = k.substr(dot + 1);
    const std::vector<std::string> names = state_names(g);
    TANDEM_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
                 "{}.load_state_dict: key '{}': parameters of group {} keep no state '{}'", name_, k, g, name);
    const Shape expected = name == "step" ? Shape{} : groups_[g][i].shape();
    TANDEM_CHECK(t.defined() && t.dtype() == DType::F32 && t.shape() == expected,
                 "{}.load_state_dict: key '{}' is {} but the parameter needs f32{}", name_, k,
                 t.defined() ? t.str() : std::string("undefined"), shape_str(expected));
    given[index].insert(name);
  }
  for (const auto& [index, names] : given) {
    for (const std::string& name : state_names(where[index].first))
      TANDEM_CHECK(names.count(name), "{}.load_state_dict: '{}' is missing (parameter {} has other state)", name_,
                   key(index, name), index);
  }
  // Like PyTorch, the loaded state replaces the old one: parameters it does not mention start afresh.
  for (size_t index = 0; index < state_.size(); ++index)
    if (!given.count(index)) state_[index].clear();
  for (const auto& [index, names] : given) {
    auto& st = state_of(where[index].first, where[index].second);
    for (const std::string& name : names) st.at(name).copy_(state.at(key(index, name)));
  }
}

}  // namespace tandem::optim
