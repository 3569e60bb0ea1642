// The communication side of a step, from DDP's per-iteration stats.
//
// busy_ms is the time during which at least one bucket all-reduce was in
// flight (the union of the buckets' [comm_start, comm_end] intervals, so gaps
// between buckets do not count and concurrent ones count once); overlap_ms is
// the part of that union inside the autograd pass, i.e. communication hidden
// behind backward compute. overlap % = 100 * overlap_ms / busy_ms.
#pragma once

#include "ddp/stats.h"

namespace tandem::profile {

struct CommSample {
  bool synchronized = false;  // false for no_sync iterations (nothing was reduced)
  double busy_ms = 0;
  double overlap_ms = 0;
};

CommSample comm_sample(const ddp::IterationStats& stats);

}  // namespace tandem::profile
