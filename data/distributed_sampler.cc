#include "data/distributed_sampler.h"

#include <numeric>

#include "core/check.h"
#include "data/length_grouping.h"
#include "data/permutation.h"

namespace tandem::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, SamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  TANDEM_CHECK(options.world_size >= 1, "DistributedSampler: world_size must be at least 1, got {}",
               options.world_size);
  TANDEM_CHECK(options.rank >= 0 && options.rank < options.world_size, "DistributedSampler: rank {} is outside [0, {})",
               options.rank, options.world_size);
  TANDEM_CHECK(dataset_size >= 1, "DistributedSampler: the dataset is empty");
  if (options.lengths) {
    TANDEM_CHECK(static_cast<int64_t>(options.lengths->size()) == dataset_size,
                 "DistributedSampler: {} lengths for {} examples", options.lengths->size(), dataset_size);
    TANDEM_CHECK(options.batch_size >= 1, "DistributedSampler: batch_size must be at least 1, got {}",
                 options.batch_size);
  }
  const int64_t w = options.world_size;
  num_samples_ = options.drop_last ? dataset_size / w : (dataset_size + w - 1) / w;
  TANDEM_CHECK(
      num_samples_ >= 1,
      "DistributedSampler: {} examples are fewer than the world size {} with drop_last: rank {} would get none",
      dataset_size, w, options.rank);
}

void DistributedSampler::set_epoch(int64_t epoch) {
  TANDEM_CHECK(epoch >= 0, "DistributedSampler: epoch must be non-negative, got {}", epoch);
  epoch_ = epoch;
  position_ = 0;
}

std::vector<int64_t> DistributedSampler::global_indices() const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = seeded_permutation(dataset_size_, options_.seed, static_cast<uint64_t>(epoch_));
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  if (options_.lengths) order = group_by_length(std::move(order), *options_.lengths, options_.batch_size * options_.world_size);
  const auto total = static_cast<size_t>(total_size());
  if (order.size() >= total) {
    order.resize(total);
  } else {
    // Repeat the order from its start until it is long enough (as PyTorch does, also when the
    // padding is longer than the dataset).
    const size_t n = order.size();
    order.reserve(total);
    for (size_t i = 0; order.size() < total; ++i) order.push_back(order[i % n]);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all = global_indices();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(options_.rank); i < all.size(); i += static_cast<size_t>(options_.world_size))
    mine.push_back(all[i]);
  return mine;
}

void DistributedSampler::set_position(int64_t position) {
  TANDEM_CHECK(position >= 0 && position <= num_samples_, "DistributedSampler: position {} is outside [0, {}]",
               position, num_samples_);
  position_ = position;
}

SamplerState DistributedSampler::state() const {
  return {epoch_, position_, options_.world_size, dataset_size_, options_.seed};
}

void DistributedSampler::load_state(const SamplerState& state) {
  TANDEM_CHECK(state.world_size == options_.world_size,
               "DistributedSampler: the state was saved with world size {}, this run has {}", state.world_size,
               options_.world_size);
  TANDEM_CHECK(state.dataset_size == dataset_size_,
               "DistributedSampler: the state was saved for {} examples, this dataset has {}", state.dataset_size,
               dataset_size_);
  TANDEM_CHECK(state.seed == options_.seed, "DistributedSampler: the state was saved with seed {}, this run has {}",
               state.seed, options_.seed);
  set_epoch(state.epoch);
  set_position(state.position);
}

}  // namespace tandem::data
