// One optimizer step of training: the same code for `tandem train`, the
// benchmarks (`tandem bench ...`, find-batch-size) and anyone who embeds Tandem.
//
// A step draws `accumulation_steps` micro-batches. Each runs forward (through
// DDP when there is one), the cross-entropy loss divided by the number of
// micro-batches and multiplied by the loss scale, and backward; every
// micro-batch but the last runs under DDP's no_sync, so gradients are
// all-reduced once per step, overlapped with the last backward. Then: unscale
// the gradients, clip their norm (max_grad_norm > 0), the optimizer step (which
// the scaler skips when a gradient overflowed), the scaler update, the schedule
// step and zero_grad. A window of micro-batches may span the end of an epoch:
// the batch source decides where batches come from.
//
// Nothing reads back to the host: the loss and the gradient norm stay on the
// device until a caller that logs asks for them. A StepObserver sees each phase
// begin (profile::Phase) and each micro-batch arrive, which is all the trainer's
// profiler and the benchmarks' timers need.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "data/data_loader.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/zero_redundancy_optimizer.h"
#include "nn/transformer.h"
#include "optim/grad_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "profile/phase.h"

namespace tandem::train {

// Watches a step; the default does nothing.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // The step moves into `phase` (DataWait, Forward, BackwardCompute, Optimizer); a phase ends where the next begins.
  virtual void enter(profile::Phase /*phase*/) {}
  // A micro-batch arrived. `synchronised`: its backward all-reduces the gradients (DDP's last micro-batch).
  virtual void on_batch(const data::Batch& /*batch*/, bool /*synchronised*/) {}
};

struct StepOptions {
  int64_t accumulation_steps = 1;
  double max_grad_norm = 0;   // > 0: clip the gradients' total norm to this
  double label_smoothing = 0;
  Tensor class_weights;  // f32 [classes] on the model's device (train::class_weights); undefined: unweighted loss
  // zero_grad frees the gradients (false keeps them: with gradient_as_bucket_view they are views of DDP's buckets).
  bool zero_grad_to_none = true;
};

// What one step did; the tensors stay on the device.
struct StepResult {
  Tensor loss_sum;            // sum of the micro-batches' mean losses (not divided, not scaled)
  Tensor grad_norm;           // total gradient norm before clipping; undefined without clipping
  int64_t micro_batches = 0;
  int64_t samples = 0;        // rows trained on this rank
};

class TrainStep {
 public:
  // The references must outlive the TrainStep; `ddp` and `scheduler` may be null.
  // `context` carries the compute dtype and the dropout seed; the step sets its step and call counters.
  TrainStep(nn::TextClassifier& model, ddp::DistributedDataParallel* ddp, optim::Optimizer& optimizer, optim::GradScaler& scaler,
            optim::LRScheduler* scheduler, nn::ForwardContext context, StepOptions options);
  // ZeRO-1: the model is not wrapped in DDP; `zero` reduce-scatters the gradients after the last
  // micro-batch, clips by the whole gradient's norm, updates its shard and all-gathers the
  // parameters (the schedule drives zero.shard_optimizer()). No fp16 loss scaling.
  TrainStep(nn::TextClassifier& model, ddp::ZeroRedundancyOptimizer& zero, optim::GradScaler& scaler,
            optim::LRScheduler* scheduler, nn::ForwardContext context, StepOptions options);

  // Runs step number `step` (the count of steps before it: dropout masks follow it) on micro-batches from
  // `next_batch`, which must return one each time it is called.
  StepResult run(int64_t step, const std::function<data::Batch()>& next_batch, StepObserver* observer = nullptr);

 private:
  nn::TextClassifier& model_;
  ddp::DistributedDataParallel* ddp_;
  ddp::ZeroRedundancyOptimizer* zero_ = nullptr;
  optim::Optimizer& optimizer_;
  optim::GradScaler& scaler_;
  optim::LRScheduler* scheduler_;
  nn::ForwardContext ctx_;
  StepOptions options_;
};

}  // namespace tandem::train
