// Communication busy time and overlap from DDP stats, against a brute-force
// count on a fine time grid.
#include "profile/comm_sample.h"

#include <gtest/gtest.h>

#include <random>

namespace tandem::profile {
namespace {

ddp::IterationStats stats_with(double compute_end, std::vector<std::pair<double, double>> comm) {
  ddp::IterationStats s;
  s.synchronized = true;
  s.backward_compute_ms = compute_end;
  for (auto [a, b] : comm) {
    ddp::BucketStats bs;
    bs.comm_start_ms = a;
    bs.comm_end_ms = b;
    s.buckets.push_back(bs);
  }
  return s;
}

TEST(CommSample, BusyTimeIsTheUnionOfBucketIntervals) {
  // [1,3] and [2,5] overlap (4 ms together), [7,8] after a gap: 5 ms busy.
  CommSample c = comm_sample(stats_with(100, {{1, 3}, {2, 5}, {7, 8}}));
  EXPECT_TRUE(c.synchronized);
  EXPECT_DOUBLE_EQ(c.busy_ms, 5);
  EXPECT_DOUBLE_EQ(c.overlap_ms, 5) << "all of it during compute";
}

TEST(CommSample, OverlapIsTheBusyTimeBeforeTheAutogradPassEnded) {
  CommSample c = comm_sample(stats_with(4, {{1, 3}, {2, 5}, {7, 8}}));
  EXPECT_DOUBLE_EQ(c.busy_ms, 5);
  EXPECT_DOUBLE_EQ(c.overlap_ms, 3);  // [1,4]
}

TEST(CommSample, NoSyncIterationsHaveNoCommunication) {
  ddp::IterationStats s = stats_with(4, {{1, 3}});
  s.synchronized = false;
  CommSample c = comm_sample(s);
  EXPECT_FALSE(c.synchronized);
  EXPECT_EQ(c.busy_ms, 0);
}

TEST(CommSample, MatchesACountOnAFineGridForRandomBuckets) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> start(0, 900), len(1, 200), end_of_compute(100, 1000);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::pair<double, double>> iv;
    for (int k = 0; k < 6; ++k) {
      int a = start(rng);
      iv.emplace_back(a, a + len(rng));
    }
    const int compute_end = end_of_compute(rng);
    int busy = 0, overlap = 0;  // unit cells [t, t+1) covered by some interval
    for (int t = 0; t < 1200; ++t) {
      bool covered = false;
      for (auto [a, b] : iv) covered |= a <= t && t + 1 <= b;
      busy += covered;
      overlap += covered && t + 1 <= compute_end;
    }
    CommSample c = comm_sample(stats_with(compute_end, iv));
    EXPECT_DOUBLE_EQ(c.busy_ms, busy) << trial;
    EXPECT_DOUBLE_EQ(c.overlap_ms, overlap) << trial;
  }
}

}  // namespace
}  // namespace tandem::profile
