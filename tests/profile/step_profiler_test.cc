// The step profiler's bookkeeping on a fake clock: which phase gets which
// time, how micro-steps add up, what a detailed step keeps, and the errors
// for a loop that uses it wrongly. No test here sleeps or times anything.
#include "profile/step_profiler.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "tests/profile/fake_clock.h"

namespace tandem::profile {
namespace {

using testing::FakeClock;

StepProfilerOptions on(FakeClock& clock) {
  StepProfilerOptions o;
  o.now = [&clock] { return clock.now(); };
  return o;
}

double span_ms(const PhaseSpan& s) { return std::chrono::duration<double, std::milli>(s.end - s.start).count(); }

StepRecord only(StepProfiler& p) {
  std::vector<StepRecord> r = p.collect();
  EXPECT_EQ(r.size(), 1u);
  return r.empty() ? StepRecord{} : r.front();
}

TEST(StepProfiler, EachPhaseGetsTheTimeUntilTheNextPhaseBegins) {
  FakeClock clock;
  StepProfiler p(on(clock));
  p.begin_step(7);
  clock.advance_ms(1);  // before any phase: other
  p.enter(Phase::DataWait);
  clock.advance_ms(2);
  p.enter(Phase::Forward);
  clock.advance_ms(3);
  p.enter(Phase::BackwardCompute);
  clock.advance_ms(4);
  p.enter(Phase::CommWait);
  clock.advance_ms(5);
  p.enter(Phase::Optimizer);
  clock.advance_ms(6);
  p.leave();
  clock.advance_ms(7);  // between phases: other
  p.enter(Phase::Logging);
  clock.advance_ms(8);
  p.end_step();  // closes logging

  StepRecord r = only(p);
  EXPECT_EQ(r.step, 7);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::DataWait), 2);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::H2D), 0);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::Forward), 3);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::BackwardCompute), 4);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::CommWait), 5);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::Optimizer), 6);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::Logging), 8);
  EXPECT_DOUBLE_EQ(r.step_ms, 36);
  EXPECT_DOUBLE_EQ(r.other_ms(), 8);
  EXPECT_EQ(r.start, FakeClock::at_ms(0));
  EXPECT_EQ(r.end, FakeClock::at_ms(36));
  EXPECT_FALSE(r.device_timed);
  EXPECT_TRUE(r.spans.empty()) << "only detailed steps keep spans";
}

TEST(StepProfiler, MicroStepsOfOneStepAddUp) {
  FakeClock clock;
  StepProfiler p(on(clock));
  p.begin_step(1);
  for (int m = 0; m < 3; ++m) {
    p.enter(Phase::DataWait);
    p.count_micro_step();
    clock.advance_ms(1);
    p.enter(Phase::Forward);
    clock.advance_ms(2);
    p.enter(Phase::BackwardCompute);
    clock.advance_ms(10);
  }
  p.enter(Phase::Optimizer);
  clock.advance_ms(4);
  p.end_step();
  StepRecord r = only(p);
  EXPECT_EQ(r.micro_steps, 3);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::DataWait), 3);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::Forward), 6);
  EXPECT_DOUBLE_EQ(r.ms_of(Phase::BackwardCompute), 30);
  EXPECT_DOUBLE_EQ(r.step_ms, 43);
  EXPECT_DOUBLE_EQ(r.other_ms(), 0);
}

TEST(StepProfiler, DetailedStepKeepsContiguousSpansInTheOrderTheyBegan) {
  FakeClock clock;
  StepProfiler p(on(clock));
  p.begin_step(3, /*detailed=*/true);
  const Phase order[] = {Phase::DataWait, Phase::Forward, Phase::BackwardCompute, Phase::CommWait, Phase::Optimizer};
  for (Phase ph : order) {
    p.enter(ph);
    clock.advance_ms(1 + static_cast<double>(index_of(ph)));
  }
  p.end_step();
  StepRecord r = only(p);
  ASSERT_EQ(r.spans.size(), 5u);
  EXPECT_EQ(r.spans.front().start, r.start);
  EXPECT_EQ(r.spans.back().end, r.end);
  for (size_t i = 0; i < r.spans.size(); ++i) {
    EXPECT_EQ(r.spans[i].phase, order[i]);
    EXPECT_FALSE(r.spans[i].device);
    EXPECT_DOUBLE_EQ(span_ms(r.spans[i]), r.ms_of(order[i]));
    if (i > 0) {
      EXPECT_EQ(r.spans[i].start, r.spans[i - 1].end);
    }
  }
}

TEST(StepProfiler, StepsAreCollectedOnceInOrder) {
  FakeClock clock;
  StepProfiler p(on(clock));
  for (int s = 1; s <= 3; ++s) {
    p.begin_step(s);
    p.enter(Phase::Forward);
    clock.advance_ms(s);
    p.end_step();
  }
  std::vector<StepRecord> r = p.collect();
  ASSERT_EQ(r.size(), 3u);
  for (int s = 1; s <= 3; ++s) EXPECT_EQ(r[static_cast<size_t>(s - 1)].step, s);
  EXPECT_TRUE(p.collect().empty());
  EXPECT_EQ(p.pending(), 0u);
}

TEST(StepProfiler, AnAbandonedStepLeavesNoRecord) {
  FakeClock clock;
  StepProfiler p(on(clock));
  p.begin_step(5);
  p.enter(Phase::DataWait);
  p.abandon_step();
  EXPECT_FALSE(p.in_step());
  EXPECT_TRUE(p.collect().empty());
  p.begin_step(5);  // begins afresh
  p.end_step();
  EXPECT_EQ(only(p).step, 5);
}

TEST(StepProfiler, PeakMemoryIsResetWhenAStepBeginsAndReadWhenItEnds) {
  FakeClock clock;
  size_t peak = 1000, resets = 0;
  StepProfilerOptions o = on(clock);
  o.peak_memory = [&] { return peak; };
  o.reset_peak_memory = [&] {
    ++resets;
    peak = 0;
  };
  StepProfiler p(o);
  p.begin_step(1);
  EXPECT_EQ(resets, 1u);
  peak = 4096;  // what the step allocated at most
  p.end_step();
  EXPECT_EQ(only(p).peak_memory_bytes, 4096u);
}

TEST(StepProfiler, OverlapPercentIsOverlapOverCommunicationTime) {
  FakeClock clock;
  StepProfiler p(on(clock));
  p.begin_step(1);
  p.add_comm(8.0, 6.0);
  p.end_step();
  StepRecord r = only(p);
  EXPECT_TRUE(r.has_comm);
  ASSERT_TRUE(r.overlap_pct().has_value());
  EXPECT_DOUBLE_EQ(*r.overlap_pct(), 75.0);

  p.begin_step(2);
  p.end_step();
  EXPECT_FALSE(only(p).overlap_pct().has_value()) << "no communication, no percentage";
}

TEST(StepProfiler, MisuseIsAnErrorNamingTheStep) {
  FakeClock clock;
  StepProfiler p(on(clock));
  EXPECT_THROW(p.enter(Phase::Forward), Error);
  EXPECT_THROW(p.end_step(), Error);
  p.begin_step(4);
  try {
    p.begin_step(5);
    FAIL() << "a second begin_step must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 4"), std::string::npos) << e.what();
  }
}

TEST(StepProfiler, PhaseNamesRoundTrip) {
  for (Phase ph : kAllPhases) EXPECT_EQ(parse_phase(phase_name(ph)), ph);
  EXPECT_EQ(parse_phase("backward"), std::nullopt);
  EXPECT_FALSE(is_device_phase(Phase::DataWait));
  EXPECT_FALSE(is_device_phase(Phase::Logging));
  EXPECT_TRUE(is_device_phase(Phase::CommWait));
}

}  // namespace
}  // namespace tandem::profile
