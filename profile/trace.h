// A timeline of one rank in the Chrome trace event format (JSON), which
// Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// Each span is a complete event ("ph": "X", "ts" and "dur" in microseconds)
// on a lane (a "tid", named by thread_name metadata): steps, host, compute,
// comm (one event per bucket all-reduce), optimizer, copy (GPU), and one lane
// per data-loader worker. The rank is the process: pid = rank + 1 (Perfetto
// treats pid 0 as the kernel's idle task), named "rank R".
//
// Clocks: "ts" counts from the rank's origin, a steady_clock reading taken
// together with a wall-clock (system_clock) reading at the start of the job;
// "otherData" carries that wall-clock origin (unix_origin_us), so
// merge_traces() can put all ranks on one timeline: it shifts each rank by
// the difference of its wall-clock origin from the earliest one. Ranks on one
// machine share the clock exactly; across machines the alignment is as good
// as their clock synchronisation (NTP/PTP).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tandem::profile {

struct ClockOrigin {
  std::chrono::steady_clock::time_point steady;
  int64_t unix_us = 0;  // system_clock at (almost) the same instant, microseconds since 1970
  static ClockOrigin now();
};

namespace lane {
inline constexpr int kSteps = 1;
inline constexpr int kHost = 2;
inline constexpr int kCompute = 3;
inline constexpr int kComm = 4;
inline constexpr int kOptimizer = 5;
inline constexpr int kCopy = 6;
inline constexpr int kLoaderInline = 99;  // batches built by next() itself (0 workers)
inline int loader(int worker) { return worker < 0 ? kLoaderInline : 100 + worker; }
std::string name(int lane);
}  // namespace lane

class Trace {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  Trace(int rank, int world_size, ClockOrigin origin);

  void span(int lane, std::string name, TimePoint start, TimePoint end, nlohmann::json args = nullptr);
  size_t size() const { return spans_.size(); }
  int rank() const { return rank_; }
  // {"traceEvents": [metadata..., spans sorted by start], "displayTimeUnit": "ms", "otherData": {...}}
  nlohmann::json to_json() const;

 private:
  struct Span {
    int lane;
    std::string name;
    double ts_us, dur_us;
    nlohmann::json args;
  };
  int rank_, world_size_;
  ClockOrigin origin_;
  std::vector<Span> spans_;
};

// All ranks' traces (each with the name of the file it came from, for
// errors) in one: each rank keeps its own pid, timestamps move to the
// earliest rank's wall-clock origin, events are sorted by time. Throws
// tandem::Error naming the file for anything that is not a Tandem trace, and
// for a rank that appears twice.
nlohmann::json merge_traces(const std::vector<std::pair<std::string, nlohmann::json>>& traces);

}  // namespace tandem::profile
