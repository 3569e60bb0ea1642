// ZeroRedundancyOptimizer: ZeRO stage 1 (Rajbhandari et al. 2020), the
// optimizer state sharded across the ranks, as llm.c and DeepSpeed do it.
//
// The parameters (every group, in order) are laid end to end in one flat
// space of P elements, padded to a multiple of the world size N; rank r owns
// the contiguous shard [r*P/N, (r+1)*P/N). A step:
//   1. packs each parameter's gradient into a flat buffer (zeros where a
//      parameter has none) and reduce-scatters it with Avg: rank r receives
//      the average over the ranks of its own shard, P/N elements instead of P;
//   2. the shard optimizer (any optim::Optimizer, built by the caller's
//      factory) updates this rank's shard only, so its state (AdamW's two
//      moments) is P/N elements per rank instead of P;
//   3. all-gathers the updated shards so that every rank holds every
//      parameter again, and copies them back into the model.
// Communication per step is a reduce-scatter plus an all-gather, the same
// bytes as DDP's one all-reduce (a ring all-reduce is exactly those two).
//
// The shard optimizer's parameters are pieces of the shard: a model
// parameter that straddles a shard boundary is split, and each piece keeps
// its group's hyper-parameters (weight decay for matrices, none for biases),
// so element for element the update is the unsharded optimizer's. What is not
// elementwise needs the whole gradient: clip_grad_norm_ takes the norm over
// every rank's shard (one all-reduce of a scalar).
//
// The model is not wrapped in DistributedDataParallel: backward computes
// local gradients and step() does all the communication, after backward (no
// overlap with it, as in llm.c; PyTorch's ZeroRedundancyOptimizer instead sits
// behind DDP's all-reduce and broadcasts each shard from its owner). At
// construction rank 0's parameters are broadcast, as DDP would.
//
// Where it differs from unsharded training on purpose: a parameter without a
// gradient on every rank still gets a zero gradient (a fixed flat layout), so
// AdamW's weight decay and moments move it; the stateful parts of a
// checkpoint are per rank (state_dict() is this rank's shard).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "comm/process_group.h"
#include "core/tensor.h"
#include "optim/optimizer.h"

namespace tandem::ddp {

class ZeroRedundancyOptimizer {
 public:
  // One non-empty group of the shard: the index of the model's group it comes
  // from, and its pieces (f32 leaf tensors over this rank's shard).
  struct ShardGroup {
    size_t group = 0;
    std::vector<Tensor> pieces;
  };
  // Builds the optimizer of this rank's shard; groups the shard does not reach are left out.
  using ShardOptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(const std::vector<ShardGroup>&)>;

  // timeout: how long each collective may take before it is an error naming this rank and the op.
  ZeroRedundancyOptimizer(std::vector<std::vector<Tensor>> param_groups, std::shared_ptr<comm::ProcessGroup> group,
                          const ShardOptimizerFactory& make_shard_optimizer,
                          std::chrono::milliseconds timeout = std::chrono::seconds(300));

  // Reduce-scatters the gradients (average over the ranks) into this rank's shard.
  void reduce_scatter_gradients();
  // The total norm of the averaged gradient (every rank's shard); when above
  // max_norm, scales the shard's gradient by max_norm / (norm + 1e-6) as
  // torch.nn.utils.clip_grad_norm_. Returns the norm before clipping (a 0-dim
  // f32 tensor on the parameters' device). After reduce_scatter_gradients().
  Tensor clip_grad_norm_(double max_norm);
  // Updates this rank's shard and all-gathers every rank's into the model.
  void step_and_gather();
  // All of it: reduce_scatter_gradients(), step_and_gather().
  void step();
  // Drops the model parameters' gradients.
  void zero_grad();

  // The shard optimizer (for the learning-rate schedule and the state); null
  // when the shard holds no parameter element (more ranks than elements).
  optim::Optimizer* shard_optimizer() { return shard_optimizer_.get(); }
  // [begin, end) of this rank's shard in the flat space (end may pass the last
  // parameter element: padding).
  std::pair<int64_t, int64_t> shard_range() const { return {shard_begin_, shard_begin_ + shard_size_}; }
  int64_t num_elements() const { return total_; }  // parameter elements, unpadded
  // Bytes of optimizer state this rank holds (the shard optimizer's state tensors).
  int64_t state_bytes() const;

 private:
  struct Slot {
    Tensor param;
    int64_t offset = 0;  // in the flat space
  };
  void finish(const std::shared_ptr<comm::Work>& work, const char* what) const;
  void pack_parameters(Tensor& flat) const;
  void unpack_parameters(const Tensor& flat);

  std::shared_ptr<comm::ProcessGroup> group_;
  std::chrono::milliseconds timeout_;
  std::vector<Slot> slots_;
  int64_t total_ = 0, shard_size_ = 0, shard_begin_ = 0;
  Tensor flat_grad_;     // [N * shard_size]
  Tensor shard_grad_;    // [shard_size]: this rank's averaged gradient
  Tensor shard_param_;   // [shard_size]: this rank's parameters; the pieces are views of it
  Tensor flat_param_;    // [N * shard_size]: every rank's, after the all-gather
  std::vector<Tensor> pieces_;
  std::unique_ptr<optim::Optimizer> shard_optimizer_;
};

}  // namespace tandem::ddp
