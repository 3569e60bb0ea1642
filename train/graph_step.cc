#include "train/graph_step.h"

#include "core/allocation_ledger.h"
#include "core/check.h"

namespace tandem::train {

GraphStep::GraphStep(TrainStep& step, GraphStepOptions options)
    : step_(step), options_(options), device_(step.optimizer().device()) {
  const StepOptions& o = step_.options();
  TANDEM_CHECK(device_.is_cuda(), "cuda_graph: true needs a GPU; this run's model is on {}", device_.str());
  TANDEM_CHECK(o.capturable, "cuda_graph: the train step must be capturable (StepOptions::capturable)");
  TANDEM_CHECK(!step_.uses_zero(), "cuda_graph: true does not support zero_stage 1");
  TANDEM_CHECK(options_.warmup_steps >= 1, "cuda_graph: at least one eager warm-up step is needed, got {}",
               options_.warmup_steps);
  if (ddp::DistributedDataParallel* d = step_.ddp()) {
    comm::ProcessGroup& g = d->group();
    TANDEM_CHECK(g.device_completion() == comm::DeviceCompletion::OnStream,
                 "cuda_graph: the {} backend completes its all-reduces on host threads, which a CUDA graph cannot "
                 "capture: use ddp_backend nccl (or one process)",
                 g.backend_name());
    TANDEM_CHECK(options_.warmup_steps >= 2,
                 "cuda_graph: with DDP at least 2 eager warm-up steps are needed (the buckets are rebuilt at the "
                 "start of the second), got {}",
                 options_.warmup_steps);
  }
  capture_stream_ = cuda::Stream::create(device_.index);
}

StepResult GraphStep::run(int64_t step, const std::function<data::Batch()>& next_batch, StepObserver* observer) {
  if (eager_steps_ < options_.warmup_steps) {
    ++eager_steps_;
    last_eager_ = step_.run(step, next_batch, observer);
    return last_eager_;
  }
  StepObserver none;
  StepObserver& obs = observer ? *observer : none;
  const int64_t accum = step_.options().accumulation_steps;
  std::vector<data::Batch> batches;
  for (int64_t micro = 0; micro < accum; ++micro) {
    obs.enter(profile::Phase::DataWait);
    batches.push_back(next_batch());
    obs.on_batch(batches.back(), step_.ddp() != nullptr && micro + 1 == accum);
  }
  Captured& g = graph_for(batches);
  for (size_t i = 0; i < batches.size(); ++i) {
    g.inputs[i].ids.copy_(batches[i].ids);
    g.inputs[i].mask.copy_(batches[i].mask);
    g.inputs[i].labels.copy_(batches[i].labels);
  }
  obs.enter(profile::Phase::Forward);  // forward, backward and the update are one launch
  step_.begin(step);
  g.graph.launch(cuda::current_stream(device_.index));
  step_.end();
  ++replays_;
  StepResult r;
  r.loss_sum = g.loss.clone();
  if (g.grad_norm.defined()) r.grad_norm = g.grad_norm.clone();
  r.micro_batches = accum;
  for (const data::Batch& b : batches) r.samples += b.labels.size(0);
  return r;
}

GraphStep::Captured& GraphStep::graph_for(const std::vector<data::Batch>& batches) {
  Shapes key;
  for (const data::Batch& b : batches) {
    TANDEM_CHECK(b.ids.dim() == 2, "cuda_graph: a batch's ids must be [rows, sequence length], got {}", b.ids.str());
    key.emplace_back(b.ids.size(0), b.ids.size(1));
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) it = graphs_.emplace(key, capture(batches)).first;
  return *it->second;
}

std::unique_ptr<GraphStep::Captured> GraphStep::capture(const std::vector<data::Batch>& batches) {
  auto g = std::make_unique<Captured>();
  // Everything the graph reads or writes outside its own memory exists before the capture.
  for (const data::Batch& b : batches) {
    data::Batch in;
    in.ids = Tensor::empty(b.ids.shape(), b.ids.dtype(), device_);
    in.mask = Tensor::empty(b.mask.shape(), b.mask.dtype(), device_);
    in.labels = Tensor::empty(b.labels.shape(), b.labels.dtype(), device_);
    g->inputs.push_back(std::move(in));
  }
  g->loss = Tensor::empty(last_eager_.loss_sum.shape(), last_eager_.loss_sum.dtype(), device_);
  if (last_eager_.grad_norm.defined())
    g->grad_norm = Tensor::empty(last_eager_.grad_norm.shape(), last_eager_.grad_norm.dtype(), device_);

  cuda::device_synchronize();  // the eager steps' work (and frees) done before the capture starts
  cuda_memory::AllocationLedger ledger;
  g->graph = cuda::Graph::capture(capture_stream_, [&] {
    // The step's own tensors (loss, norm, activations, gradients) die in this scope, inside the
    // capture: their frees become the graph's free nodes.
    size_t next = 0;
    StepResult r = step_.compute([&] { return g->inputs.at(next++); });
    g->loss.copy_(r.loss_sum);
    if (g->grad_norm.defined()) g->grad_norm.copy_(r.grad_norm);
  });
  TANDEM_CHECK(ledger.live_bytes() == 0 && ledger.foreign_frees() == 0,
               "cuda_graph: the captured step leaves {} bytes allocated that it does not free and frees {} bytes "
               "allocated before it; such a graph cannot be replayed (something in the step keeps a tensor from "
               "one step to the next)",
               ledger.live_bytes(), ledger.foreign_frees());
  return g;
}

}  // namespace tandem::train
