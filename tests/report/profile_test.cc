// Combining ranks' step samples into a profile, and the scaling table.
#include "report/profile.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "report/stats.h"

namespace tandem::report {
namespace {

StepSample sample(double step, double fwd, double data = 0, bool logging = false) {
  StepSample s;
  s.step_ms = step;
  s.forward_ms = fwd;
  s.data_wait_ms = data;
  s.logging_step = logging;
  return s;
}

RunFacts facts(int world, int64_t batch) {
  RunFacts f;
  f.world_size = world;
  f.per_device_batch = batch;
  f.train_examples = 1000;
  return f;
}

TEST(Summarize, MedianAndPercentilesInterpolateLikeNumpy) {
  const Summary s = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p10, 1.3);  // numpy.percentile([1,2,3,4], 10)
  EXPECT_DOUBLE_EQ(s.p90, 3.7);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_EQ(s.n, 4u);
  EXPECT_EQ(summarize({}).n, 0u);
}

TEST(Aggregate, StepTimeIsTheSlowestRankAndPhasesTheRankMean) {
  // Two ranks, three steps.
  const std::vector<std::vector<StepSample>> ranks = {{sample(10, 2, 1), sample(12, 2, 0), sample(11, 2, 5)},
                                                      {sample(14, 4, 0), sample(9, 4, 3), sample(13, 4, 0)}};
  const Profile p = aggregate(facts(2, 8), ranks, 5, {100, 300}, 42);
  EXPECT_DOUBLE_EQ(p.median.step_ms, 13);  // max per step: 14, 12, 13
  EXPECT_DOUBLE_EQ(p.median.forward_ms, 3);
  EXPECT_DOUBLE_EQ(p.median.data_wait_ms, 3);  // max per step: 1, 3, 5
  EXPECT_EQ(p.step_samples_ms, (std::vector<double>{14, 12, 13}));
  EXPECT_EQ(p.peak_memory_bytes, 300);
  EXPECT_DOUBLE_EQ(p.checkpoint_ms, 42);
  EXPECT_EQ(p.warmup_steps, 5);
  // 2 ranks x 8 sequences every 13 ms.
  EXPECT_DOUBLE_EQ(p.samples_per_second, 16 / 0.013);
  EXPECT_DOUBLE_EQ(p.epoch_seconds(), 1000 / (16 / 0.013));
}

TEST(Aggregate, ReadyAndBucketTimesAreTheMedianOverStepsOfTheRankMean) {
  RunFacts f = facts(2, 8);
  f.gradient_names = {"head", "embedding"};
  f.gradient_bytes = {4, 40};
  f.bucket_bytes = {44};
  auto timed = [](double step, std::vector<double> ready, std::vector<double> bucket) {
    StepSample s = sample(step, 1);
    s.gradient_ready_ms = std::move(ready);
    s.bucket_ready_ms = {bucket[0]};
    s.bucket_comm_start_ms = {bucket[1]};
    s.bucket_comm_end_ms = {bucket[2]};
    return s;
  };
  StepSample before_rebuild = timed(10, {9, 9}, {9, 9, 9});
  before_rebuild.bucket_ready_ms = {1, 2};  // the first layout had two buckets
  before_rebuild.bucket_comm_start_ms = {1, 2};
  before_rebuild.bucket_comm_end_ms = {1, 2};
  const std::vector<std::vector<StepSample>> ranks = {
      {before_rebuild, timed(10, {1, 3}, {3, 4, 6}), timed(10, {2, 5}, {5, 6, 9}), timed(10, {3, 7}, {7, 8, 12})},
      {before_rebuild, timed(10, {3, 5}, {5, 6, 8}), timed(10, {4, 7}, {7, 8, 11}), timed(10, {5, 9}, {9, 10, 14})}};
  const Profile p = aggregate(f, ranks, 0, {0, 0}, -1);
  // Gradients, every step: rank means {2, 4}, {3, 6}, {4, 8}, {9, 9}: medians 3.5 and 7.
  EXPECT_EQ(p.gradient_ready_ms, (std::vector<double>{3.5, 7}));
  // Buckets, the three steps after the rebuild: ready 4, 6, 8; start 5, 7, 9; end 7, 10, 13.
  EXPECT_EQ(p.bucket_ready_ms, (std::vector<double>{6}));
  EXPECT_EQ(p.bucket_comm_start_ms, (std::vector<double>{7}));
  EXPECT_EQ(p.bucket_comm_end_ms, (std::vector<double>{10}));
}

TEST(Aggregate, LoggingOverheadIsTheDifferenceOfMedians) {
  std::vector<StepSample> steps;
  for (int i = 0; i < 12; ++i) steps.push_back(i % 4 == 3 ? sample(15, 1, 0, true) : sample(10, 1));
  const Profile p = aggregate(facts(1, 8), {steps}, 0, {0}, -1);
  EXPECT_DOUBLE_EQ(p.logging_overhead_ms, 5);
}

TEST(Aggregate, TooFewLoggingStepsLeaveTheOverheadUnknown) {
  const Profile p = aggregate(facts(1, 8), {{sample(15, 1, 0, true), sample(10, 1), sample(10, 1)}}, 0, {0}, -1);
  EXPECT_LT(p.logging_overhead_ms, 0);
}

TEST(Aggregate, RanksWithDifferentStepCountsAreAnError) {
  EXPECT_THROW(aggregate(facts(2, 8), {{sample(1, 1)}, {sample(1, 1), sample(1, 1)}}, 0, {0, 0}, -1), Error);
  EXPECT_THROW(aggregate(facts(1, 8), {}, 0, {}, -1), Error);
}

Profile measured(int world, double samples_per_second) {
  Profile p;
  p.facts = facts(world, 8);
  p.samples_per_second = samples_per_second;
  return p;
}

TEST(ScalingTable, SpeedupIsTheThroughputRatioAndEfficiencySpeedupOverN) {
  const auto rows = scaling_table({measured(4, 300), measured(1, 100), measured(2, 180)});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].world_size, 1);
  EXPECT_DOUBLE_EQ(rows[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 1.8);
  EXPECT_DOUBLE_EQ(rows[1].efficiency, 0.9);
  EXPECT_DOUBLE_EQ(rows[2].speedup, 3.0);
  EXPECT_DOUBLE_EQ(rows[2].efficiency, 0.75);
}

TEST(ScalingTable, NegativeScalingShowsAsSpeedupBelowOne) {
  // Seed 001's AG News: 4 GPUs at 0.46x of one.
  const auto rows = scaling_table({measured(1, 1000), measured(4, 460)});
  EXPECT_DOUBLE_EQ(rows[1].speedup, 0.46);
  EXPECT_DOUBLE_EQ(rows[1].efficiency, 0.115);
}

TEST(ScalingTable, WithoutOneRankTheSmallestWorldSizeIsAssumedPerfect) {
  const auto rows = scaling_table({measured(2, 200), measured(4, 300)});
  EXPECT_DOUBLE_EQ(rows[0].speedup, 2.0);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 3.0);
}

}  // namespace
}  // namespace tandem::report
