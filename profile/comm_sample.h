// The communication side of a step, from DDP's per-iteration stats
// (ddp::comm_times derives both numbers; this adds whether anything was
// reduced). busy_ms is the time during which at least one bucket all-reduce
// was in flight; overlap_ms the part of it inside the autograd pass.
// overlap % = 100 * overlap_ms / busy_ms.
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
