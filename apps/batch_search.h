// The search behind `tandem find-batch-size`: the largest per-device batch
// for which a training step fits in memory.
//
// The search doubles the batch from `start` until a trial fails (or reaches
// max_batch), halves from `start` if even that fails, then bisects between
// the largest batch that fit and the smallest that did not, in steps of
// multiple_of. It assumes what fits is monotone in the batch. A trial is a
// Probe, so tests can inject failures without exhausting any memory.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "report/bench_files.h"

namespace tandem::apps {

struct ProbeResult {
  bool fits = false;
  int64_t peak_bytes = 0;
  std::string error;  // why not
};
using Probe = std::function<ProbeResult(int64_t batch)>;

struct BatchSearchOptions {
  int64_t start = 8;
  int64_t max_batch = 65536;
  int64_t multiple_of = 1;
};

struct BatchSearchResult {
  int64_t max_batch = 0;         // 0: not even the smallest candidate fits
  bool hit_upper_bound = false;  // stopped at options.max_batch with everything fitting
  std::vector<report::BatchTrial> trials;
};

BatchSearchResult search_max_batch(const Probe& probe, const BatchSearchOptions& options);

// Whether an exception is an allocation failure: std::bad_alloc, or a tandem
// Error from the host or CUDA allocator or cuBLAS running out of memory.
bool is_out_of_memory(const std::exception& e);

// Runs `body` (which returns the peak bytes it used) as one trial: an
// out-of-memory exception, or a peak above memory_limit (> 0), is a trial
// that does not fit; any other exception propagates (a bug is not a size).
ProbeResult run_trial(const std::function<int64_t()>& body, int64_t memory_limit);

}  // namespace tandem::apps
