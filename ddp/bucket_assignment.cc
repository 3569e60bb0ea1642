#include "ddp/bucket_assignment.h"

#include <algorithm>
#include <map>

#include "core/check.h"

namespace tandem::ddp {

std::vector<BucketSpec> assign_buckets(const std::vector<ParamDesc>& params, const std::vector<int>& order,
                                       size_t first_cap_bytes, size_t cap_bytes) {
  TANDEM_CHECK(order.size() == params.size(), "bucket assignment: order has {} entries for {} parameters",
               order.size(), params.size());
  std::vector<bool> seen(params.size(), false);
  for (int i : order) {
    TANDEM_CHECK(i >= 0 && static_cast<size_t>(i) < params.size() && !seen[static_cast<size_t>(i)],
                 "bucket assignment: order is not a permutation (index {})", i);
    seen[static_cast<size_t>(i)] = true;
  }

  struct Open {
    BucketSpec spec;
    size_t cap;
    size_t first_position;
  };
  // Key: (dtype, device kind, device index).
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::pair<size_t, BucketSpec>> closed;  // (position of first parameter, bucket)
  std::map<std::tuple<int, int, int>, bool> closed_one;  // per group: has its first bucket closed?
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const int i = order[pos];
    const ParamDesc& p = params[static_cast<size_t>(i)];
    auto key = std::make_tuple(static_cast<int>(p.dtype), static_cast<int>(p.device.kind), p.device.index);
    auto it = open.find(key);
    if (it == open.end()) {
      Open o{BucketSpec{{}, 0, p.dtype, p.device}, closed_one[key] ? cap_bytes : first_cap_bytes, pos};
      it = open.emplace(key, std::move(o)).first;
    }
    Open& b = it->second;
    b.spec.params.push_back(i);
    b.spec.bytes += p.bytes;
    if (b.spec.bytes >= b.cap) {
      closed.emplace_back(b.first_position, std::move(b.spec));
      open.erase(it);
      closed_one[key] = true;
    }
  }
  for (auto& [key, b] : open) closed.emplace_back(b.first_position, std::move(b.spec));
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketSpec> out;
  for (auto& [pos, spec] : closed) out.push_back(std::move(spec));
  return out;
}

}  // namespace tandem::ddp
