// Aggregates of step records: per phase mean, median and 90th percentile,
// the overlap percentage and the peak memory, as JSON (profile_rank<R>.json,
// the metrics columns) and as a table for the terminal.
//
// Percentiles interpolate linearly between order statistics (numpy's default
// "linear" method): p90 of 1..10 is 9.1.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profile/step_profiler.h"

namespace tandem::profile {

struct Distribution {
  int64_t count = 0;
  double mean = 0, median = 0, p90 = 0, min = 0, max = 0;
};
Distribution describe(std::vector<double> values);
double percentile(std::vector<double> values, double q);  // q in [0, 100]; values non-empty

struct Summary {
  int64_t steps = 0;
  int64_t first_step = 0, last_step = 0;
  bool device_timed = false;
  Distribution step_ms, other_ms;
  std::array<Distribution, kNumPhases> phases;
  int64_t comm_steps = 0;          // steps that synchronised gradients
  Distribution comm_ms;            // over those steps
  double overlap_ms_total = 0, comm_ms_total = 0;
  std::optional<double> overlap_pct;  // 100 * total overlap / total comm; empty without communication
  size_t peak_memory_bytes = 0;       // the largest step peak

  const Distribution& phase(Phase p) const { return phases[index_of(p)]; }
};
Summary summarize(const std::vector<StepRecord>& steps);

// One step as a line of profile_rank<R>.jsonl (spans are not included).
nlohmann::json to_json(const StepRecord& step);
// The summary as profile_rank<R>.json's "summary".
nlohmann::json to_json(const Summary& summary);
// Phase | mean | median | p90 | share of the mean step, one row per phase, then other, step, comm and memory.
std::string format_table(const Summary& summary);

}  // namespace tandem::profile
