// What one DDP iteration did and how long it took, like PyTorch's DDP logging
// data. Times are milliseconds; bucket times are relative to the start of
// backward (the end of forward, as in PyTorch). The absolute steady_clock
// stamps place an iteration on a timeline (the profiler's trace).
//
// Where the times come from: on the CPU, host clocks (the backend's Work
// stamps). With parameters on a GPU and a backend that completes on the
// stream (NCCL), CUDA events: backward_compute_ms is the compute stream's
// time from the start of backward to the end of the autograd pass, and each
// bucket's comm interval is the comm stream's, so compute, overlap and
// exposed time are what the device did, not when the host launched it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::ddp {

struct BucketStats {
  size_t bytes = 0;
  int num_params = 0;
  double ready_ms = 0;       // when its last gradient arrived and it was launched
  double comm_start_ms = 0;  // when the backend started reducing it
  double comm_end_ms = 0;    // when the backend finished
};

struct IterationStats {
  int64_t iteration = 0;
  bool synchronized = false;          // false on no_sync micro-steps
  double forward_ms = 0;
  double backward_compute_ms = 0;     // start of backward to the end of the autograd pass
  double backward_comm_ms = 0;        // time some bucket's reduction was in flight (comm_times' busy_ms)
  double overlap_ms = 0;              // the part of it while backward was still computing
  double exposed_comm_ms = 0;         // end of the autograd pass to all buckets reduced
  int unused_params = 0;              // parameters that got no gradient on this rank
  bool buckets_rebuilt = false;       // this iteration used buckets rebuilt in ready order
  std::vector<BucketStats> buckets;
  std::vector<std::string> ready_order;  // parameter names in the order their gradients became ready
  std::vector<size_t> ready_bytes;       // ... their gradients' bytes
  std::vector<double> ready_ms;          // ... and when each became ready (its hook fired), from the start of backward
  std::chrono::steady_clock::time_point forward_start{}, backward_start{}, autograd_end{};
  // False while some bucket's comm times are still unknown: a backend that completes on the
  // device (NCCL) may finish after backward returned; Reducer::complete_stats() fills them in.
  bool comm_complete = true;
  bool device_timed = false;  // times from CUDA events (see above), not host clocks
};

// The communication of an iteration from its buckets' [comm_start, comm_end]
// intervals: the one place these are derived (the Reducer's stats, train
// logs, benches and the report all read them from here).
//   busy_ms     the union of the intervals: gaps between buckets do not
//               count, concurrent buckets count once;
//   overlap_ms  the part of that union inside [0, backward_compute_ms],
//               i.e. communication hidden behind backward compute.
struct CommTimes {
  double busy_ms = 0;
  double overlap_ms = 0;
};
CommTimes comm_times(const IterationStats& s);

}  // namespace tandem::ddp
