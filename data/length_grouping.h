// Hugging Face's `group_by_length` (transformers' get_length_grouped_indices):
// batches of texts of similar length, so that padding to each batch's longest
// text (data/batch_padding.h) cuts most of the padding.
//
// An epoch's shuffled order is cut into megabatches of m global batches
// (m = min(50, n / (4 * global batch)), at least 1), each sorted by
// descending length (stably: equal lengths keep their shuffled order), and
// the longest example of all is swapped to the front, so the first step is
// the largest and an out-of-memory shows at once. Batches stay random in
// which texts they hold (each megabatch is a random draw), but inside a
// megabatch they go from long to short. The DistributedSampler applies it to
// the global order before sharding; its ranks take interleaved positions, so
// one step's batches on all ranks come from the same stretch of a sorted
// megabatch and have about the same length (no rank waits for a longer one).
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::data {

// `order` (indices into `lengths`) regrouped as above for batches of `global_batch` examples
// (per-rank batch x world size); an Error if an index is outside `lengths` or global_batch < 1.
std::vector<int64_t> group_by_length(std::vector<int64_t> order, const std::vector<int64_t>& lengths,
                                     int64_t global_batch);

// m above: how many global batches one megabatch holds for n examples.
int64_t megabatch_batches(int64_t n, int64_t global_batch);

}  // namespace tandem::data
