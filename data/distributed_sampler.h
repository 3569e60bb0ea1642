// DistributedSampler: which examples each rank reads in an epoch, with the
// semantics of torch.utils.data.DistributedSampler.
//
// Every rank builds the same epoch order: a permutation of the dataset
// determined by (seed, epoch) when shuffling, else 0..n-1. The order is padded
// by repeating its start up to total_size = world_size * ceil(n / world_size),
// or, with drop_last, cut to world_size * floor(n / world_size). Rank r takes
// positions r, r + world_size, r + 2 * world_size, ... So every rank gets
// exactly num_samples indices and runs the same number of steps; without
// padding the shards are disjoint and together cover the (kept) dataset.
//
// Differences from PyTorch: the permutation is Philox-based (data/permutation.h),
// so the same on every platform but not PyTorch's; and (seed, epoch) select
// independent streams (PyTorch seeds with seed + epoch, so seed 1 epoch 0
// equals seed 0 epoch 1). With SamplerOptions::lengths the permutation is
// grouped by length first (Hugging Face's group_by_length).
//
// For resuming, state() is the epoch and the number of this rank's samples
// already consumed; load_state checks it was saved under the same world size,
// seed and dataset size.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tandem::data {

struct SamplerOptions {
  int64_t world_size = 1;
  int64_t rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // cut the tail instead of padding with repeated indices
  // group_by_length (data/length_grouping.h): every example's length (dataset_size entries) to
  // group the epoch's order by, before the padding and the sharding; null: no grouping.
  std::shared_ptr<const std::vector<int64_t>> lengths = nullptr;
  int64_t batch_size = 1;  // with lengths: the per-rank batch (the grouping's global batch is x world_size)
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // samples of this rank's shard already consumed in `epoch`
  // What the position is relative to; load_state refuses a state from another configuration.
  int64_t world_size = 1;
  int64_t dataset_size = 0;
  uint64_t seed = 0;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, SamplerOptions options);

  void set_epoch(int64_t epoch);  // also rewinds the position to 0
  int64_t epoch() const { return epoch_; }
  int64_t dataset_size() const { return dataset_size_; }
  const SamplerOptions& options() const { return options_; }

  int64_t num_samples() const { return num_samples_; }  // per rank, the same on every rank
  int64_t total_size() const { return num_samples_ * options_.world_size; }

  // The epoch order over all ranks (total_size entries, after padding or cutting).
  std::vector<int64_t> global_indices() const;
  // This rank's shard of it, in order (num_samples entries).
  std::vector<int64_t> indices() const;

  int64_t position() const { return position_; }
  void set_position(int64_t position);  // in [0, num_samples]
  SamplerState state() const;
  void load_state(const SamplerState& state);

 private:
  int64_t dataset_size_;
  SamplerOptions options_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
};

}  // namespace tandem::data
