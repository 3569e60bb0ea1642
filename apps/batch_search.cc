#include "apps/batch_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "core/check.h"

namespace tandem::apps {

BatchSearchResult search_max_batch(const Probe& probe, const BatchSearchOptions& o) {
  const int64_t m = o.multiple_of;
  TANDEM_CHECK(m >= 1, "find-batch-size: --multiple-of must be at least 1");
  const int64_t top = o.max_batch / m * m;
  TANDEM_CHECK(top >= m, "find-batch-size: --max-batch {} is below --multiple-of {}", o.max_batch, m);
  const int64_t start = std::min(top, std::max(m, (o.start + m - 1) / m * m));

  BatchSearchResult r;
  auto trial = [&](int64_t b) {
    ProbeResult p = probe(b);
    r.trials.push_back({b, p.fits, p.peak_bytes, p.fits ? "" : p.error});
    return p.fits;
  };
  int64_t lo = 0, hi = 0;      // largest that fit, smallest that did not (0: none yet)
  for (int64_t b = start;;) {  // grow
    if (!trial(b)) {
      hi = b;
      break;
    }
    lo = b;
    if (b == top) {
      r.hit_upper_bound = true;
      r.max_batch = lo;
      return r;
    }
    b = std::min(top, 2 * b);
  }
  while (lo == 0) {  // shrink: even the start failed
    const int64_t b = hi / 2 / m * m;
    if (b < m) return r;  // nothing fits
    if (trial(b))
      lo = b;
    else
      hi = b;
  }
  while (hi - lo > m) {  // bisect on multiples of m
    const int64_t mid = std::max(lo + m, (lo + hi) / 2 / m * m);
    if (trial(mid))
      lo = mid;
    else
      hi = mid;
  }
  r.max_batch = lo;
  return r;
}

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  const std::string what = e.what();
  for (const char* sign :
       {"out of memory", "out of host memory", "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation"})
    if (what.find(sign) != std::string::npos) return true;
  return false;
}

ProbeResult run_trial(const std::function<int64_t()>& body, int64_t memory_limit) {
  ProbeResult r;
  try {
    r.peak_bytes = body();
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    r.error = e.what();
    return r;
  }
  if (memory_limit > 0 && r.peak_bytes > memory_limit) {
    r.error = fmt::format("peak {:.2f} MiB is over the limit of {:.2f} MiB",
                          static_cast<double>(r.peak_bytes) / (1 << 20), static_cast<double>(memory_limit) / (1 << 20));
    return r;
  }
  r.fits = true;
  return r;
}

}  // namespace tandem::apps
