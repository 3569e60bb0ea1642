#include "profile/step_trace.h"

#include <fmt/format.h>

#include "core/elapsed.h"

namespace tandem::profile {

namespace {

int lane_of(const PhaseSpan& s, bool gpu_run) {
  if (gpu_run && !s.device) return lane::kHost;
  switch (s.phase) {
    case Phase::DataWait:
    case Phase::Logging: return lane::kHost;
    case Phase::H2D: return lane::kCopy;
    case Phase::Optimizer: return lane::kOptimizer;
    case Phase::Forward:
    case Phase::BackwardCompute:
    case Phase::CommWait: return lane::kCompute;
  }
  return lane::kHost;
}

Clock::time_point after(Clock::time_point t, double ms) {
  return t + milliseconds_as_duration(ms);
}

}  // namespace

void trace_step(Trace& trace, const StepRecord& step) {
  nlohmann::json args = {{"step", step.step}, {"step_ms", step.step_ms}, {"micro_steps", step.micro_steps}};
  if (auto pct = step.overlap_pct()) args["overlap_pct"] = *pct;
  args["peak_memory_bytes"] = step.peak_memory_bytes;
  trace.span(lane::kSteps, fmt::format("step {}", step.step), step.start, step.end, std::move(args));
  for (const PhaseSpan& s : step.spans)
    trace.span(lane_of(s, step.device_timed), std::string(phase_name(s.phase)), s.start, s.end,
               {{"step", step.step}, {"clock", s.device ? "device" : "host"}});
}

void trace_buckets(Trace& trace, int64_t step, const ddp::IterationStats& stats,
                   const std::vector<std::vector<std::string>>& param_names) {
  if (!stats.synchronized) return;
  for (size_t i = 0; i < stats.buckets.size(); ++i) {
    const ddp::BucketStats& b = stats.buckets[i];
    if (b.comm_end_ms <= 0 && b.comm_start_ms <= 0) continue;  // its times are unknown (see comm_complete)
    nlohmann::json args = {{"step", step},
                           {"bucket", i},
                           {"bytes", b.bytes},
                           {"num_params", b.num_params},
                           {"params", i < param_names.size() ? param_names[i] : std::vector<std::string>{}},
                           {"ready_ms", b.ready_ms},
                           {"queued_ms", b.comm_start_ms - b.ready_ms}};
    trace.span(lane::kComm, fmt::format("allreduce bucket {}", i), after(stats.backward_start, b.comm_start_ms),
               after(stats.backward_start, b.comm_end_ms), std::move(args));
  }
}

void trace_batch(Trace& trace, const data::Batch& batch) {
  if (batch.build_start == Clock::time_point{}) return;  // not built by a DataLoader
  trace.span(lane::loader(batch.worker), fmt::format("batch {}", batch.index), batch.build_start, batch.build_end,
             {{"epoch", batch.epoch}, {"index", batch.index}, {"rows", batch.labels.defined() ? batch.labels.size(0) : 0}});
}

}  // namespace tandem::profile
