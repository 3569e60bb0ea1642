#include "data/length_grouping.h"

#include <algorithm>

#include "core/check.h"

namespace tandem::data {

int64_t megabatch_batches(int64_t n, int64_t global_batch) {
  // transformers: mega_batch_mult = min(len(lengths) // (batch_size * 4), 50), and 1 where that is 0.
  return std::max<int64_t>(1, std::min<int64_t>(50, n / (global_batch * 4)));
}

std::vector<int64_t> group_by_length(std::vector<int64_t> order, const std::vector<int64_t>& lengths,
                                     int64_t global_batch) {
  TANDEM_CHECK(global_batch >= 1, "group_by_length: the batch must hold at least 1 example, got {}", global_batch);
  const auto n = static_cast<int64_t>(lengths.size());
  for (int64_t i : order)
    TANDEM_CHECK(i >= 0 && i < n, "group_by_length: index {} outside the {} lengths given", i, n);
  if (order.empty()) return order;
  const int64_t size = megabatch_batches(static_cast<int64_t>(order.size()), global_batch) * global_batch;
  auto longer = [&](int64_t a, int64_t b) { return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)]; };
  std::vector<size_t> starts;
  for (size_t s = 0; s < order.size(); s += static_cast<size_t>(size)) {
    const auto end = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), s + static_cast<size_t>(size)));
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(s), end, longer);
    starts.push_back(s);
  }
  // Each megabatch's first entry is its longest; the first of the longest megabatch goes to the front.
  size_t best = starts.front();
  for (size_t s : starts)
    if (longer(order[s], order[best])) best = s;
  std::swap(order.front(), order[best]);
  return order;
}

}  // namespace tandem::data
