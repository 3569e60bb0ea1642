#include "profile/step_profiler.h"

#include "core/check.h"
#include "core/elapsed.h"

namespace tandem::profile {

double StepRecord::other_ms() const {
  double in_phases = 0;
  for (double v : host_ms) in_phases += v;
  return step_ms - in_phases;
}

std::optional<double> StepRecord::overlap_pct() const {
  if (!has_comm || comm_ms <= 0) return std::nullopt;
  return 100.0 * overlap_ms / comm_ms;
}

StepProfiler::StepProfiler(StepProfilerOptions options) : options_(std::move(options)) {
  now_ = options_.now ? options_.now : [] { return Clock::now(); };
}

void StepProfiler::begin_step(int64_t step, bool detailed) {
  TANDEM_CHECK(!in_step_, "step profiler: step {} began while step {} was still open", step, current_.step);
  if (options_.reset_peak_memory) options_.reset_peak_memory();
  current_ = StepRecord{};
  current_.step = step;
  current_.detailed = detailed;
  current_.device_timed = device_timed();
  current_device_.clear();
  in_step_ = true;
  current_.start = now_();
}

void StepProfiler::enter(Phase phase) {
  TANDEM_CHECK(in_step_, "step profiler: phase {} entered outside a step", phase_name(phase));
  leave();
  open_ = phase;
  if (device_timed() && is_device_phase(phase)) open_mark_ = options_.device_timer->mark();
  open_since_ = now_();
}

void StepProfiler::leave() {
  if (!open_) return;
  const Clock::time_point t = now_();
  const Phase phase = *open_;
  current_.host_ms[index_of(phase)] += milliseconds_between(open_since_, t);
  if (current_.detailed) current_.spans.push_back(PhaseSpan{phase, open_since_, t, false});
  if (open_mark_) {
    current_device_.push_back(DeviceInterval{phase, std::move(open_mark_), options_.device_timer->mark()});
    open_mark_.reset();
  }
  open_.reset();
}

void StepProfiler::add_device_interval(Phase phase, DeviceTimer::Mark begin, DeviceTimer::Mark end) {
  TANDEM_CHECK(in_step_, "step profiler: a device interval for {} arrived outside a step", phase_name(phase));
  if (begin && end) current_device_.push_back(DeviceInterval{phase, std::move(begin), std::move(end)});
}

void StepProfiler::add_comm(double comm_ms, double overlap_ms) {
  current_.has_comm = true;
  current_.comm_ms += comm_ms;
  current_.overlap_ms += overlap_ms;
}

void StepProfiler::end_step() {
  TANDEM_CHECK(in_step_, "step profiler: end_step without begin_step");
  leave();
  current_.end = now_();
  current_.step_ms = milliseconds_between(current_.start, current_.end);
  if (options_.peak_memory) current_.peak_memory_bytes = options_.peak_memory();
  pending_.push_back(Pending{std::move(current_), std::move(current_device_)});
  current_ = StepRecord{};
  current_device_.clear();
  in_step_ = false;
}

void StepProfiler::abandon_step() {
  open_.reset();
  open_mark_.reset();
  current_ = StepRecord{};
  current_device_.clear();
  in_step_ = false;
}

bool StepProfiler::resolve(Pending& p) const {
  StepRecord& r = p.record;
  r.ms = r.host_ms;
  if (!r.device_timed) return true;
  std::array<double, kNumPhases> device_ms{};
  std::vector<PhaseSpan> device_spans;
  for (const DeviceInterval& d : p.device) {
    std::optional<double> ms = DeviceTimer::elapsed_ms(d.begin, d.end);
    if (!ms) return false;
    device_ms[index_of(d.phase)] += *ms;
    if (r.detailed) {
      auto a = options_.device_timer->host_time(d.begin), b = options_.device_timer->host_time(d.end);
      if (a && b) device_spans.push_back(PhaseSpan{d.phase, *a, *b, true});
    }
  }
  for (Phase ph : kAllPhases)
    if (is_device_phase(ph)) r.ms[index_of(ph)] = device_ms[index_of(ph)];
  r.spans.insert(r.spans.end(), device_spans.begin(), device_spans.end());
  return true;
}

std::vector<StepRecord> StepProfiler::collect() {
  std::vector<StepRecord> out;
  while (!pending_.empty() && resolve(pending_.front())) {
    out.push_back(std::move(pending_.front().record));
    pending_.pop_front();  // drops the marks: their events go back to the pool
  }
  return out;
}

}  // namespace tandem::profile
