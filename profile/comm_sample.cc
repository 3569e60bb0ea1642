#include "profile/comm_sample.h"

namespace tandem::profile {

CommSample comm_sample(const ddp::IterationStats& stats) {
  CommSample s;
  s.synchronized = stats.synchronized;
  if (!stats.synchronized) return s;
  const ddp::CommTimes t = ddp::comm_times(stats);
  s.busy_ms = t.busy_ms;
  s.overlap_ms = t.overlap_ms;
  return s;
}

}  // namespace tandem::profile
