// SGD (torch.optim.SGD: momentum, dampening, Nesterov, L2 weight decay added
// to the gradient), fused: each parameter group is updated by one multi-tensor
// update (optim/cuda/sgd.cu, optim/cpu/sgd_cpu.cc). Hyper-parameters have
// PyTorch's names and defaults. With momentum, a parameter keeps
// "momentum_buffer" and "step" (the step that makes it 1 initialises the
// buffer to the gradient, PyTorch's "buffer is None"); without, no state.
#pragma once

#include "optim/optimizer.h"

namespace tandem::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  using Options = SGDOptions;
  struct ParamGroup {
    std::vector<Tensor> params;
    Options options;
  };

  explicit SGD(std::vector<Tensor> params, Options options = {});
  explicit SGD(std::vector<ParamGroup> groups);

  const Options& options(size_t group) const;
  double lr(size_t group) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override;

 protected:
  std::vector<std::string> state_names(size_t group) const override;
  void update_group(size_t group, const TensorList& tensors, const float* found_inf) override;

 private:
  std::vector<Options> options_;
};

}  // namespace tandem::optim
