// One CUDA graph per training step (config key cuda_graph), as
// torch.compile(mode="reduce-overhead") does on one GPU: TrainStep::compute
// (forward; backward with DDP's NCCL all-reduces on its comm stream; unscale,
// clip, the optimizer step, the loss-scale update, zero_grad) is captured once
// and then replayed, one graph launch per step instead of a few hundred kernel
// launches.
//
// What makes a replay right:
// - Per-step scalars live in device memory: the TrainStep must be capturable
//   (train/step.h). Its begin() and end(), which write the step count and the
//   scheduled lr, run outside the graph, before and after each replay.
// - Fixed addresses: each batch is copied into static input tensors before the
//   replay; the loss and the gradient norm are copied into static outputs
//   inside the graph, and each step hands out copies of them (a caller may keep
//   a step's result while later steps run, as with the eager step).
// - Memory. The rule relied on (CUDA runtime API, cudaMallocFromPoolAsync and
//   cudaFreeAsync): during capture the allocator's cudaMallocFromPoolAsync
//   becomes an allocation node whose memory the graph owns, not the pool, and
//   cudaFreeAsync becomes a free node, which must be given a graph allocation.
//   So (1) nothing that existed before the capture may be freed inside it, and
//   (2) what the capture allocates must be freed inside it, or the graph
//   cannot be launched again while that memory lives. Parameters, gradient
//   buckets, optimizer state, the loss scale and the static tensors therefore
//   exist before the capture (the eager warm-up steps create the lazy ones),
//   and the capture checks (1) and (2) by address (core/allocation_ledger.h):
//   a step that breaks either is an error at capture time naming cuda_graph,
//   not a failed replay.
// - Warm-up: the first warmup_steps steps run eagerly (DDP rebuilds its
//   buckets at the start of its second iteration; the optimizer creates its
//   state and the scaler its scale on the first step).
// - Shapes: one graph per sequence of input shapes (rows x sequence length of
//   each micro-batch). The loader pads every row to one length, so that is one
//   graph for full batches and one or two more around an epoch's shorter last
//   batch; each holds its own activation memory.
// - Gradient accumulation: a step's micro-batches (each with its own static
//   inputs) are captured together, DDP's no_sync on all but the last, as
//   TrainStep::compute runs them.
//
// What it refuses (config::validate and this constructor, naming cuda_graph):
// a CPU device, a backend whose all-reduces complete on host threads (the
// ring), ZeRO-1, find_unused_parameters and
// static_graph (host reads of the used-parameter map), and comm hooks other
// than allreduce (the compression hooks keep a buffer from one step to the
// next, PowerSGD host state too). DDP's device timing is off in a captured
// iteration (ddp/reducer.h): events recorded in a capture cannot be queried.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/cuda_graph.h"
#include "core/stream.h"
#include "train/step.h"

namespace tandem::train {

struct GraphStepOptions {
  int64_t warmup_steps = 3;  // eager steps before the first capture; at least 2 with DDP
};

class GraphStep {
 public:
  // `step` must be capturable and outlive the GraphStep; its model on a GPU.
  explicit GraphStep(TrainStep& step, GraphStepOptions options = {});

  // TrainStep::run's contract. For a replayed step the observer sees DataWait and each batch,
  // then Forward for the whole launch (its phases are one launch).
  StepResult run(int64_t step, const std::function<data::Batch()>& next_batch, StepObserver* observer = nullptr);

  int64_t graphs() const { return static_cast<int64_t>(graphs_.size()); }  // captured so far
  int64_t replays() const { return replays_; }

 private:
  using Shapes = std::vector<std::pair<int64_t, int64_t>>;  // (rows, sequence length) per micro-batch
  struct Captured {
    std::vector<data::Batch> inputs;  // the static inputs the graph reads, one per micro-batch
    Tensor loss, grad_norm;           // the static outputs it writes (grad_norm: with clipping only)
    cuda::Graph graph;
  };
  Captured& graph_for(const std::vector<data::Batch>& batches);
  std::unique_ptr<Captured> capture(const std::vector<data::Batch>& batches);

  TrainStep& step_;
  GraphStepOptions options_;
  Device device_;
  cuda::Stream capture_stream_;
  int64_t eager_steps_ = 0;
  int64_t replays_ = 0;
  StepResult last_eager_;  // the outputs' shapes and dtypes, for the static outputs
  std::map<Shapes, std::unique_ptr<Captured>> graphs_;
};

}  // namespace tandem::train
