// The model, data and training loop shared by the DDP multi-process tests
// (ddp_worker runs one rank; ddp_test computes the single-process reference).
//
// A small MLP whose optional `branch` layer is used only when a step asks for
// it, trained with plain SGD (p -= lr * grad) on a mean-squared-error loss.
// The data of step s is a fixed global batch of world * micro_steps * batch
// rows drawn from Philox; rank r's micro-step m takes its own slice of it, so N
// ranks with batch B see exactly the rows one process sees with batch N*B.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "optim/adamw.h"

namespace tandem::testing {

class ScenarioMlp : public nn::Module {
 public:
  explicit ScenarioMlp(uint64_t seed);
  // slow_backward_ms > 0 puts an identity between fc1 and the rest whose backward
  // sleeps that long: the buckets of the upper layers are then reduced while
  // backward still computes, which makes compute/comm overlap observable.
  // cut_branch_gradient keeps the branch's output in the forward value but
  // makes its backward return an undefined gradient: backward then reaches the
  // branch's parameters with no gradient.
  Tensor forward(const Tensor& x, bool use_branch, int slow_backward_ms = 0, bool cut_branch_gradient = false) const;

 private:
  std::shared_ptr<nn::Linear> fc1_, branch_, fc2_, fc3_;
};

constexpr int64_t kScenarioIn = 12;
constexpr int64_t kScenarioOut = 3;

// Rows [first, first + count) of step `step`'s global batch.
Tensor scenario_inputs(int64_t step, int64_t first, int64_t count);
Tensor scenario_targets(int64_t step, int64_t first, int64_t count);
// Whether the optional branch layer is used by `rank` in micro-step `micro` of
// step `step`: "never", "always", "alternate" (differs between ranks on every
// step), "rank0" (rank 0 only) or "early" (micro-step 0 only, so that with
// gradient accumulation a parameter's gradient comes from an early no_sync
// micro-step and not from the synchronising one); "cut_rank0" and "cut_all"
// use it everywhere, with its gradient cut on rank 0 or on every rank.
bool scenario_branch_used(const std::string& mode, int64_t step, int rank, int64_t micro);
// Whether the branch's gradient is cut (see ScenarioMlp::forward) for this rank.
bool scenario_branch_gradient_cut(const std::string& mode, int rank);
// mean((y - t)^2)
Tensor mse(const Tensor& y, const Tensor& t);
// p -= lr * p.grad for every parameter with a gradient, then clears the gradients in place.
void sgd_step(nn::Module& m, double lr);
// The AdamW runs' parameter groups: {weight matrices} (decayed), {biases} (not).
std::vector<std::vector<Tensor>> scenario_param_groups(const nn::Module& m);
optim::AdamWOptions scenario_adamw_options(double lr, bool decayed);
std::unique_ptr<optim::AdamW> scenario_adamw(const nn::Module& m, double lr);

}  // namespace tandem::testing
