// Optimizer: what SGD and AdamW share. It owns parameter groups (PyTorch's
// param_groups: each group is a list of f32 parameters with its own
// hyper-parameters, e.g. no weight decay for biases and LayerNorm weights) and
// the per-parameter state, created on the device the first time a parameter
// has a gradient. step() updates every parameter whose grad() is defined and
// skips the others (their state does not change), in one fused update per
// group. All parameters live on one device.
//
// step(found_inf) is how mixed precision skips a step without a host round
// trip: the kernels read the flag from device memory and change nothing where
// it is non-zero, including the step counts, so the next step's bias
// correction is as if the skipped one never happened.
//
// Capturable (PyTorch's capturable=True with a tensor lr): each group's
// learning rate is also kept in device memory (one f64 per group on the
// parameters' device), set_lr writes it there with a small fill on the current
// stream, and the update kernels read it when they run. The step counts and
// found_inf already live on the device, so no per-step host scalar is baked
// into the launches of step(): a CUDA graph that captured them stays right as
// the schedule moves the lr, provided set_lr runs outside the graph. The
// results are bit-identical to the host-scalar path; the state_dict is the same.
//
// state_dict() names every state tensor "state.<i>.<name>", with i the
// parameter's index across the groups in order (PyTorch's state_dict ids) and
// name as in PyTorch ("step", "exp_avg", "exp_avg_sq", "momentum_buffer").
// Hyper-parameters are not part of it: they come from the configuration, and
// the learning rate from the schedule at the restored step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/tensor_list.h"

namespace tandem::optim {

class Optimizer {
 public:
  using StateDict = std::map<std::string, Tensor>;

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step() { step(Tensor()); }
  // found_inf: undefined, or a one-element f32 tensor on the parameters' device.
  void step(const Tensor& found_inf);
  // set_to_none (PyTorch's default) drops the gradients; otherwise they are zeroed in place
  // (which keeps a gradient that is a view into a DDP bucket attached to it).
  void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& param_group(size_t group) const;
  std::vector<Tensor> params() const;  // every group's, in order
  std::vector<Tensor> grads() const;   // the defined gradients of params(), in order
  Device device() const { return device_; }
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;

  // Off by default; turning it on copies every group's current lr to the device.
  void set_capturable(bool on);
  bool capturable() const { return lr_on_device_.defined(); }

  // The live state tensors (not copies) of every parameter that has state.
  StateDict state_dict() const;
  // Copies state written by state_dict() (any device) into this optimizer's
  // state. Every entry is checked before anything is copied: an unknown or
  // malformed name, a shape or dtype that does not fit the parameter, or a
  // parameter with only part of its state is an error naming the key.
  void load_state_dict(const StateDict& state);

 protected:
  Optimizer(const char* name, std::vector<std::vector<Tensor>> groups);
  const char* name() const { return name_; }
  void check_group(size_t group) const;

  // The state a parameter of `group` keeps: "step" (a 0-dim f32 count) and
  // tensors of the parameter's shape. Must not change after construction.
  virtual std::vector<std::string> state_names(size_t group) const = 0;
  // Updates group `group`: `tensors` holds one entry per parameter with a
  // gradient, operands {param, grad, state tensors in state_names order
  // without "step"} and step = the "step" count; found_inf is a pointer on
  // the parameters' device, or null.
  virtual void update_group(size_t group, const TensorList& tensors, const float* found_inf) = 0;
  // Capturable: group's lr in device memory (for the kernels' lr_ptr); otherwise null.
  const double* device_lr(size_t group) const;
  // Subclasses' set_lr call it after storing the new lr: the capturable copy follows.
  void lr_changed(size_t group);

 private:
  size_t param_index(size_t group, size_t i) const { return group_first_[group] + i; }
  std::map<std::string, Tensor>& state_of(size_t group, size_t i);
  std::string key(size_t index, const std::string& name) const;

  const char* name_;
  std::vector<std::vector<Tensor>> groups_;
  std::vector<size_t> group_first_;                  // index of each group's first parameter
  std::vector<std::map<std::string, Tensor>> state_;  // by parameter index; empty until the first gradient
  Device device_;
  Tensor lr_on_device_;  // capturable: f64 [groups] on device_; undefined otherwise
};

}  // namespace tandem::optim
