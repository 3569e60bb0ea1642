// StepProfiler: where the time of each training step goes, phase by phase
// (profile/phase.h), plus the step's communication overlap and peak memory.
//
// The training loop brackets each step with begin_step/end_step and moves
// through phases with enter(); a phase ends when the next one is entered, on
// leave(), or at end_step. Time outside every phase is the step's "other".
//
// Timing: the host's steady_clock always (an injected clock in tests). On a
// GPU run (options.device_timer), device phases (is_device_phase) are also
// timed with CUDA events on the current stream, and their reported time is
// the GPU's. Events are only queried, never waited for: a finished step stays
// pending until collect() finds all its events complete, which is the case
// once the host has synchronised for its own reasons (a logging step reads
// the loss). On the CPU a step is complete the moment it ends.
//
// Detailed steps (begin_step(step, true)) also keep every phase interval as a
// span for the timeline trace; device spans get host times only when the
// timer is anchored (DeviceTimer::anchor).
//
// Not thread-safe: one training thread drives it (DDP's end-of-autograd hook
// runs on that thread).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "profile/device_timer.h"
#include "profile/phase.h"

namespace tandem::profile {

using Clock = std::chrono::steady_clock;

struct PhaseSpan {
  Phase phase = Phase::DataWait;
  Clock::time_point start, end;  // host steady_clock (device spans: mapped through the anchor)
  bool device = false;           // timed on the GPU
};

struct StepRecord {
  int64_t step = 0;
  Clock::time_point start, end;  // host
  double step_ms = 0;            // host wall time from begin_step to end_step
  std::array<double, kNumPhases> ms{};       // reported time per phase (the GPU's for device phases on a GPU run)
  std::array<double, kNumPhases> host_ms{};  // the training thread's time in each phase
  bool device_timed = false;
  bool detailed = false;
  int micro_steps = 0;             // forward passes in the step (gradient accumulation)
  bool has_comm = false;           // the step synchronised gradients across ranks
  double comm_ms = 0;              // busy time of the step's bucket all-reduces (their union)
  double overlap_ms = 0;           // the part of comm_ms that ran during the autograd pass
  size_t peak_memory_bytes = 0;    // allocator high-water mark during the step
  std::vector<PhaseSpan> spans;    // detailed steps only, in the order they began

  double ms_of(Phase p) const { return ms[index_of(p)]; }
  double other_ms() const;                    // step_ms minus the host time spent in phases
  std::optional<double> overlap_pct() const;  // 100 * overlap_ms / comm_ms; empty without communication
};

struct StepProfilerOptions {
  std::function<Clock::time_point()> now;  // empty: steady_clock::now
  // The allocator's peak since its last reset, and the reset (run at each step start); may be empty.
  std::function<size_t()> peak_memory;
  std::function<void()> reset_peak_memory;
  std::shared_ptr<DeviceTimer> device_timer;  // a GPU run
};

class StepProfiler {
 public:
  explicit StepProfiler(StepProfilerOptions options = {});

  void begin_step(int64_t step, bool detailed = false);
  bool in_step() const { return in_step_; }
  void enter(Phase phase);  // closes the open phase, if any, and opens `phase`
  void leave();             // closes the open phase
  std::optional<Phase> current() const { return open_; }
  void count_micro_step() { ++current_.micro_steps; }
  int micro_steps() const { return current_.micro_steps; }
  // A device interval timed by someone else (the loader's copy events), counted for `phase`.
  void add_device_interval(Phase phase, DeviceTimer::Mark begin, DeviceTimer::Mark end);
  // The step's gradient synchronisation (see comm_sample.h); adds up if called more than once.
  void add_comm(double comm_ms, double overlap_ms);
  void end_step();
  void abandon_step();  // drops an open step (an epoch ran dry before the step's first batch)

  // Finished steps whose times are all known, oldest first; never blocks.
  std::vector<StepRecord> collect();
  size_t pending() const { return pending_.size(); }

  Clock::time_point now() const { return now_(); }
  bool device_timed() const { return options_.device_timer != nullptr; }

 private:
  struct DeviceInterval {
    Phase phase;
    DeviceTimer::Mark begin, end;
  };
  struct Pending {
    StepRecord record;
    std::vector<DeviceInterval> device;
  };
  bool resolve(Pending& p) const;

  StepProfilerOptions options_;
  std::function<Clock::time_point()> now_;
  bool in_step_ = false;
  StepRecord current_;
  std::vector<DeviceInterval> current_device_;
  std::optional<Phase> open_;
  Clock::time_point open_since_;
  DeviceTimer::Mark open_mark_;
  std::deque<Pending> pending_;
};

}  // namespace tandem::profile
