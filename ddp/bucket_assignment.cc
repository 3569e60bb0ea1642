#include "ddp/bucket_assignment.h"

#include <algorithm>
#include <map>

#include "core/check.h"

namespace tandem::ddp {

size_t bucket_cap_bytes(double mb) {
  const double b = mb * 1024.0 * 1024.0;
  return b >= 1e18 ? static_cast<size_t>(1e18) : static_cast<size_t>(b);
}

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

BucketIndices bucket_indices(const std::vector<BucketSpec>& layout) {
  BucketIndices out;
  for (const BucketSpec& b : layout) {
    out.counts.push_back(static_cast<int64_t>(b.params.size()));
    out.indices.insert(out.indices.end(), b.params.begin(), b.params.end());
  }
  return out;
}

std::vector<BucketSpec> buckets_from_indices(const std::vector<ParamDesc>& params, const BucketIndices& in) {
  int64_t total = 0;
  for (int64_t c : in.counts) {
    TANDEM_CHECK(c > 0, "bucket layout: a bucket of {} parameters", c);
    total += c;
  }
  TANDEM_CHECK(total == static_cast<int64_t>(in.indices.size()) && in.indices.size() == params.size(),
               "bucket layout: {} buckets holding {} parameters with {} indices, for {} parameters on this rank",
               in.counts.size(), total, in.indices.size(), params.size());
  std::vector<bool> seen(params.size(), false);
  std::vector<BucketSpec> out;
  size_t next = 0;
  for (size_t bi = 0; bi < in.counts.size(); ++bi) {
    BucketSpec b;
    for (int64_t k = 0; k < in.counts[bi]; ++k, ++next) {
      const int64_t i = in.indices[next];
      TANDEM_CHECK(i >= 0 && static_cast<size_t>(i) < params.size() && !seen[static_cast<size_t>(i)],
                   "bucket layout: bucket {} holds parameter index {}, {}", bi, i,
                   i >= 0 && static_cast<size_t>(i) < params.size() ? "already in a bucket"
                                                                    : fmt::format("of {} parameters", params.size()));
      seen[static_cast<size_t>(i)] = true;
      const ParamDesc& p = params[static_cast<size_t>(i)];
      if (b.params.empty()) {
        b.dtype = p.dtype;
        b.device = p.device;
      }
      TANDEM_CHECK(p.dtype == b.dtype && p.device == b.device,
                   "bucket layout: bucket {} mixes {} on {} with parameter {} ({} on {})", bi, dtype_name(b.dtype),
                   b.device.str(), i, dtype_name(p.dtype), p.device.str());
      b.params.push_back(static_cast<int>(i));
      b.bytes += p.bytes;
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace tandem::ddp
