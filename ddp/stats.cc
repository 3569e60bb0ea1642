#include "ddp/stats.h"

#include <algorithm>
#include <utility>

namespace tandem::ddp {

CommTimes comm_times(const IterationStats& s) {
  CommTimes t;
  std::vector<std::pair<double, double>> iv;
  for (const BucketStats& b : s.buckets)
    if (b.comm_end_ms > b.comm_start_ms) iv.emplace_back(b.comm_start_ms, b.comm_end_ms);
  std::sort(iv.begin(), iv.end());
  const double compute_end = s.backward_compute_ms;
  size_t i = 0;
  while (i < iv.size()) {
    double a = iv[i].first, b = iv[i].second;
    for (++i; i < iv.size() && iv[i].first <= b; ++i) b = std::max(b, iv[i].second);
    t.busy_ms += b - a;
    t.overlap_ms += std::max(0.0, std::min(b, compute_end) - std::max(a, 0.0));
  }
  return t;
}

}  // namespace tandem::ddp
