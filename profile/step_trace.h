// What goes on the timeline for a training step: the step itself and its
// phase spans, each bucket's all-reduce, and the batches the loader built.
//
// Lanes: the step on "steps"; data_wait and logging on "host"; forward,
// backward_compute and comm_wait on "compute"; optimizer on "optimizer"; on a
// GPU run the compute and optimizer lanes hold the GPU-timed spans (h2d on
// "h2d copy") and the "host" lane also holds the host's side of every phase.
// A bucket's all-reduce goes on "comm" from when the backend started it to
// when it finished, with its index, bytes, parameter count and names.
#pragma once

#include <string>
#include <vector>

#include "data/data_loader.h"
#include "ddp/stats.h"
#include "profile/step_profiler.h"
#include "profile/trace.h"

namespace tandem::profile {

void trace_step(Trace& trace, const StepRecord& step);
// `param_names[i]`: the parameters of bucket i (DistributedDataParallel::bucket_parameter_names()).
void trace_buckets(Trace& trace, int64_t step, const ddp::IterationStats& stats,
                   const std::vector<std::vector<std::string>>& param_names);
void trace_batch(Trace& trace, const data::Batch& batch);

}  // namespace tandem::profile
