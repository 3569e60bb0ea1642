// One optimizer step of training: the same code for `tandem train`, the
// benchmarks (`tandem bench ...`, find-batch-size) and anyone who embeds Tandem.
//
// A step draws `accumulation_steps` micro-batches. Each runs forward (through
// DDP when there is one), the cross-entropy loss divided by the number of
// micro-batches and multiplied by the loss scale, and backward; every
// micro-batch but the last runs under DDP's no_sync, so gradients are
// all-reduced once per step, overlapped with the last backward. Then: unscale
// the gradients, clip their norm (max_grad_norm > 0), the optimizer step (which
// the scaler skips when a gradient overflowed), the scaler update, zero_grad and
// the schedule step. A window of micro-batches may span the end of an epoch:
// the batch source decides where batches come from.
//
// Nothing reads back to the host: the loss and the gradient norm stay on the
// device until a caller that logs asks for them. A StepObserver sees each phase
// begin (profile::Phase) and each micro-batch arrive, which is all the trainer's
// profiler and the benchmarks' timers need.
//
// Capturable (StepOptions::capturable, PyTorch's capturable=True): no per-step
// host scalar reaches a kernel. The optimizer reads each group's lr from device
// memory (optim/optimizer.h) and the dropout kernels read the step count from a
// device i64 that begin() writes (nn::ForwardContext::device_step); the step
// counts, found_inf and the loss scale were on the device already. compute()
// then launches the same kernels with the same arguments every step, which is
// what lets train/graph_step.h capture it once and replay it. Results are
// bit-identical to the default path. Not with ZeRO-1.
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
  bool capturable = false;  // per-step scalars from device memory (see above)
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

  // run() is begin(step); compute(...); end(). A caller that replays compute() as a CUDA graph
  // calls begin and end around each replay: they hold the step's host-side bookkeeping.
  // begin: the step number dropout follows (capturable: a fill of the device step count).
  void begin(int64_t step);
  // Forward, backward, unscale, clip, the optimizer and scaler steps and zero_grad.
  StepResult compute(const std::function<data::Batch()>& next_batch, StepObserver* observer = nullptr);
  // The schedule's step (capturable: a fill of each group's device lr).
  void end();

  const StepOptions& options() const { return options_; }
  ddp::DistributedDataParallel* ddp() const { return ddp_; }  // null without DDP
  bool uses_zero() const { return zero_ != nullptr; }
  const optim::Optimizer& optimizer() const { return optimizer_; }

 private:
  nn::TextClassifier& model_;
  ddp::DistributedDataParallel* ddp_;
  ddp::ZeroRedundancyOptimizer* zero_ = nullptr;
  optim::Optimizer& optimizer_;
  optim::GradScaler& scaler_;
  optim::LRScheduler* scheduler_;
  nn::ForwardContext ctx_;
  StepOptions options_;
  Tensor device_step_;  // capturable: the step count dropout reads, i64 0-dim on the model's device
};

}  // namespace tandem::train
