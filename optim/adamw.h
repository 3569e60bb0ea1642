// AdamW (torch.optim.AdamW: Adam with decoupled weight decay and bias
// correction), fused: each parameter group is updated by one multi-tensor
// update (optim/cuda/adamw.cu on CUDA, optim/cpu/adamw_cpu.cc on the CPU) that
// reads p, g, m, v and writes p, m, v once. Hyper-parameters have PyTorch's
// names and defaults; state per parameter: "step", "exp_avg", "exp_avg_sq".
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace tandem::optim {

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW final : public Optimizer {
 public:
  using Options = AdamWOptions;
  struct ParamGroup {
    std::vector<Tensor> params;
    Options options;
  };

  explicit AdamW(std::vector<Tensor> params, Options options = {});
  explicit AdamW(std::vector<ParamGroup> groups);

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
