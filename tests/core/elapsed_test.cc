// core/elapsed.h: each helper against the chrono arithmetic it names, on time
// points built from exact durations (and a clock whose now() the test sets).
#include "core/elapsed.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// A clock whose now() is whatever the test set.
struct SetClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<SetClock>;
  static constexpr bool is_steady = true;
  static inline time_point current{};
  static time_point now() { return current; }
};

TEST(Elapsed, BetweenGivesTheDifferenceInTheNamedUnit) {
  const Steady::time_point a{10s};
  const Steady::time_point b = a + 1500us;
  EXPECT_DOUBLE_EQ(milliseconds_between(a, b), 1.5);
  EXPECT_DOUBLE_EQ(seconds_between(a, b), 0.0015);
  EXPECT_DOUBLE_EQ(microseconds_between(a, b), 1500.0);
  EXPECT_DOUBLE_EQ(nanoseconds_between(a, b), 1.5e6);
}

TEST(Elapsed, BetweenIsNegativeWhenTheSecondPointIsEarlier) {
  const Steady::time_point a{10s};
  EXPECT_DOUBLE_EQ(milliseconds_between(a + 250us, a), -0.25);
}

TEST(Elapsed, KeepsFractionsBelowTheUnit) {
  const Steady::time_point a{};
  EXPECT_DOUBLE_EQ(milliseconds_between(a, a + 1ns), 1e-6);
}

TEST(Elapsed, SinceMeasuresToTheClocksNow) {
  const SetClock::time_point t0{5s};
  SetClock::current = t0 + 2500ms;
  EXPECT_DOUBLE_EQ(seconds_since(t0), 2.5);
  EXPECT_DOUBLE_EQ(milliseconds_since(t0), 2500.0);
  EXPECT_DOUBLE_EQ(nanoseconds_since(t0), 2.5e9);
}

TEST(Elapsed, AsDurationConvertsBackToTheSteadyClock) {
  EXPECT_EQ(milliseconds_as_duration(2.5), 2500us);
  EXPECT_EQ(seconds_as_duration(0.75), 750ms);
  EXPECT_EQ(milliseconds_as_duration(-1.0), -1ms);
  // duration_cast truncates: 1.9 ns is 1 ns.
  EXPECT_EQ(milliseconds_as_duration(1.9e-6), 1ns);
}

TEST(Elapsed, AsDurationRoundTripsThroughBetween) {
  const Steady::time_point a{3s};
  EXPECT_DOUBLE_EQ(milliseconds_between(a, a + milliseconds_as_duration(12.25)), 12.25);
}

}  // namespace
}  // namespace tandem
