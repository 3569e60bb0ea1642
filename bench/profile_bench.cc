// What the step profiler costs a training step on the host: the calls the
// trainer makes every step (begin_step, seven phase changes, end_step,
// collect), with the real steady_clock and the host allocator's peak memory,
// and the same with a detailed step (spans kept) and with a trace of it.
//
//   profile_bench [--steps N]
//
// Prints the mean cost per step in nanoseconds, best of 5 repeats.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>

#include "core/allocator.h"
#include "core/elapsed.h"
#include "profile/step_profiler.h"
#include "profile/step_trace.h"
#include "profile/trace.h"

namespace {

using namespace tandem::profile;
using Clock = std::chrono::steady_clock;

double ns_per_step(int64_t steps, bool detailed, bool trace) {
  StepProfilerOptions o;
  o.peak_memory = [] { return tandem::host_memory::stats().peak_in_use; };
  o.reset_peak_memory = [] { tandem::host_memory::reset_peak(); };
  StepProfiler p(o);
  Trace t(0, 1, ClockOrigin::now());
  const Phase phases[] = {Phase::DataWait, Phase::Forward,   Phase::BackwardCompute, Phase::CommWait,
                          Phase::Optimizer, Phase::Logging};
  const auto start = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    p.begin_step(s, detailed);
    for (Phase ph : phases) p.enter(ph);
    p.count_micro_step();
    p.add_comm(1.0, 0.5);
    p.end_step();
    for (const StepRecord& r : p.collect())
      if (trace) trace_step(t, r);
  }
  const double ns = tandem::nanoseconds_since(start);
  return ns / static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step profiler overhead per training step"};
  int64_t steps = 200000;
  app.add_option("--steps", steps, "steps per repeat");
  CLI11_PARSE(app, argc, argv);
  const auto clock_ns = [] {
    const int n = 1000000;
    const auto a = Clock::now();
    Clock::time_point x{};
    for (int i = 0; i < n; ++i) x = std::max(x, Clock::now());
    return tandem::nanoseconds_between(a, x) / n;
  }();
  fmt::print("steady_clock::now(): {:.1f} ns\n\n", clock_ns);
  fmt::print("{:<34}{:>14}\n", "per step", "ns (best of 5)");
  for (auto [name, detailed, trace] : {std::tuple{"metrics only (every step)", false, false},
                                       std::tuple{"detailed step (spans kept)", true, false},
                                       std::tuple{"detailed step + trace events", true, true}}) {
    double best = 1e300;
    for (int rep = 0; rep < 5; ++rep) best = std::min(best, ns_per_step(detailed ? steps / 10 : steps, detailed, trace));
    fmt::print("{:<34}{:>14.0f}\n", name, best);
  }
  return 0;
}
