#include "profile/comm_sample.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tandem::profile {

CommSample comm_sample(const ddp::IterationStats& stats) {
  CommSample s;
  s.synchronized = stats.synchronized;
  if (!stats.synchronized) return s;
  std::vector<std::pair<double, double>> iv;
  for (const ddp::BucketStats& b : stats.buckets)
    if (b.comm_end_ms > b.comm_start_ms) iv.emplace_back(b.comm_start_ms, b.comm_end_ms);
  std::sort(iv.begin(), iv.end());
  const double compute_end = stats.backward_compute_ms;
  auto add = [&](double a, double b) {
    s.busy_ms += b - a;
    s.overlap_ms += std::max(0.0, std::min(b, compute_end) - std::max(a, 0.0));
  };
  size_t i = 0;
  while (i < iv.size()) {
    double a = iv[i].first, b = iv[i].second;
    for (++i; i < iv.size() && iv[i].first <= b; ++i) b = std::max(b, iv[i].second);
    add(a, b);
  }
  return s;
}

}  // namespace tandem::profile
