#include "train/step.h"

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "optim/clip_grad.h"

namespace tandem::train {

using profile::Phase;

TrainStep::TrainStep(nn::TextClassifier& model, ddp::DistributedDataParallel* ddp, optim::Optimizer& optimizer,
                     optim::GradScaler& scaler, optim::LRScheduler* scheduler, nn::ForwardContext context, StepOptions options)
    : model_(model),
      ddp_(ddp),
      optimizer_(optimizer),
      scaler_(scaler),
      scheduler_(scheduler),
      ctx_(context),
      options_(options) {
  TANDEM_CHECK(options_.accumulation_steps >= 1, "train step: accumulation_steps must be >= 1, got {}",
               options_.accumulation_steps);
  if (options_.capturable) {
    optimizer_.set_capturable(true);
    device_step_ = Tensor::zeros({}, DType::I64, optimizer_.device());
    ctx_.device_step = static_cast<const int64_t*>(device_step_.data_ptr());
  }
}

namespace {

optim::Optimizer& shard_optimizer_of(ddp::ZeroRedundancyOptimizer& zero) {
  TANDEM_CHECK(zero.shard_optimizer(), "train step: this rank's ZeRO shard holds no parameter (more ranks than elements)");
  return *zero.shard_optimizer();
}

}  // namespace

TrainStep::TrainStep(nn::TextClassifier& model, ddp::ZeroRedundancyOptimizer& zero, optim::GradScaler& scaler,
                     optim::LRScheduler* scheduler, nn::ForwardContext context, StepOptions options)
    : TrainStep(model, nullptr, shard_optimizer_of(zero), scaler, scheduler, context, std::move(options)) {
  zero_ = &zero;
  TANDEM_CHECK(!scaler.enabled(), "train step: ZeRO-1 does not support fp16 loss scaling yet");
  TANDEM_CHECK(!options_.capturable, "train step: a capturable step does not support ZeRO-1");
}

StepResult TrainStep::run(int64_t step, const std::function<data::Batch()>& next_batch, StepObserver* observer) {
  begin(step);
  StepResult r = compute(next_batch, observer);
  end();
  return r;
}

void TrainStep::begin(int64_t step) {
  if (options_.capturable) device_step_.fill_(static_cast<double>(step));  // exact below 2^53
  else ctx_.step = static_cast<uint64_t>(step);
}

void TrainStep::end() {
  if (scheduler_) scheduler_->step();
}

StepResult TrainStep::compute(const std::function<data::Batch()>& next_batch, StepObserver* observer) {
  StepObserver none;
  StepObserver& obs = observer ? *observer : none;
  const int64_t accum = options_.accumulation_steps;
  StepResult r;
  for (int64_t micro = 0; micro < accum; ++micro) {
    obs.enter(Phase::DataWait);
    const data::Batch batch = next_batch();
    const bool last = micro + 1 == accum;
    obs.on_batch(batch, ddp_ != nullptr && last);
    ctx_.calls = static_cast<uint64_t>(micro) << 8;  // distinct dropout streams per micro-batch
    auto forward_backward = [&] {
      obs.enter(Phase::Forward);
      auto forward = [&] { return model_.forward(batch.ids, batch.mask, ctx_); };
      Tensor logits = ddp_ ? ddp_->forward(forward) : forward();
      Tensor loss = kernels::cross_entropy(logits, batch.labels, options_.label_smoothing, options_.class_weights);
      // The mean over the step's rows: each micro-batch contributes 1/accum (equal-sized micro-batches).
      Tensor scaled = scaler_.scale(accum > 1 ? kernels::scale(loss, 1.0 / static_cast<double>(accum)) : loss);
      {
        NoGradGuard no_grad;  // nothing writes the loss in place afterwards, so the first needs no copy
        r.loss_sum = r.loss_sum.defined() ? kernels::add(r.loss_sum, loss.detach()) : loss.detach();
      }
      obs.enter(Phase::BackwardCompute);
      scaled.backward();  // with DDP, the last micro-batch's backward also launches the all-reduces
    };
    if (ddp_ && !last) {
      auto no_sync = ddp_->no_sync();  // accumulate locally; the last micro-batch reduces the sum
      forward_backward();
    } else {
      forward_backward();
    }
    ++r.micro_batches;
    r.samples += batch.labels.size(0);
  }

  obs.enter(Phase::Optimizer);
  if (zero_) {
    zero_->reduce_scatter_gradients();
    if (options_.max_grad_norm > 0) r.grad_norm = zero_->clip_grad_norm_(options_.max_grad_norm);
    zero_->step_and_gather();
    zero_->zero_grad();
    return r;
  }
  scaler_.unscale_(optimizer_);
  if (options_.max_grad_norm > 0) r.grad_norm = optim::clip_grad_norm_(optimizer_.params(), options_.max_grad_norm);
  scaler_.step(optimizer_);
  scaler_.update();
  optimizer_.zero_grad(options_.zero_grad_to_none);
  return r;
}

}  // namespace tandem::train
