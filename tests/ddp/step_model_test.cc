// The step model (ddp/step_model.h) against what can be computed by hand: the
// alpha-beta fit on exact synthetic tables, the comm thread on small cases,
// and bucket re-forming against DDP's own assignment.
#include "ddp/step_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/errors.h"

namespace tandem::ddp {
namespace {

using tandem::testing::throws_error_containing;

std::vector<LinkSample> exact_table(int world, double alpha_us, double beta_us_per_byte) {
  std::vector<LinkSample> out;
  const double k = 2.0 * (world - 1) / world;
  for (double bytes = 1024; bytes <= 64 << 20; bytes *= 4)
    out.push_back({bytes, alpha_us + beta_us_per_byte * bytes * k});
  return out;
}

TEST(LinkFit, RecoversAlphaAndBetaFromAnExactTable) {
  for (int world : {2, 3, 4}) {
    const LinkFit f = fit_link(world, exact_table(world, 35.0, 2.5e-3));
    EXPECT_NEAR(f.alpha_us, 35.0, 1e-9 * 35.0) << world;
    EXPECT_NEAR(f.beta_us_per_byte, 2.5e-3, 1e-12) << world;
    EXPECT_LT(f.max_abs_rel_residual, 1e-12);
    EXPECT_EQ(f.samples, 9u);
    EXPECT_EQ(f.world_size, world);
  }
}

TEST(LinkFit, TimeGrowsWithTheRingsBusFactor) {
  LinkFit f;
  f.world_size = 4;
  f.alpha_us = 10;
  f.beta_us_per_byte = 0.001;
  EXPECT_DOUBLE_EQ(f.time_us(1000), 10 + 0.001 * 1000 * 1.5);
  f.world_size = 1;
  EXPECT_EQ(f.time_us(1000), 0) << "one rank sends nothing";
}

TEST(LinkFit, IsTheLeastSquaresOfRelativeError) {
  // Three samples no line fits: at the optimum of sum ((fit - t) / t)^2 its gradient in (alpha, beta) is zero.
  const std::vector<LinkSample> s = {{1000, 10}, {1000000, 1010}, {10000, 30}};
  const LinkFit f = fit_link(2, s);  // bus factor 1
  double g_alpha = 0, g_beta = 0;
  for (const LinkSample& x : s) {
    const double r = (f.time_us(x.bytes) - x.us) / (x.us * x.us);
    g_alpha += r;
    g_beta += r * x.bytes;
  }
  EXPECT_NEAR(g_alpha, 0, 1e-12);
  EXPECT_NEAR(g_beta, 0, 1e-9);
  EXPECT_GT(f.max_abs_rel_residual, 0.01) << "the samples are not on a line";
}

TEST(LinkFit, KeepsAlphaNonNegativeByFittingALineThroughTheOrigin) {
  // t = 2 * bytes - 100 would fit exactly, with alpha < 0: not a link.
  const LinkFit f = fit_link(2, {{100, 100}, {200, 300}});
  EXPECT_EQ(f.alpha_us, 0);
  // Through the origin: b = sum(w x t) / sum(w x^2) with w = 1/t^2 (bus factor 1 at 2 ranks).
  const double b = (100.0 / 100 + 200.0 / 300) / (100.0 * 100 / (100 * 100) + 200.0 * 200 / (300 * 300));
  EXPECT_NEAR(f.beta_us_per_byte, b, 1e-12);
}

TEST(LinkFit, RefusesTablesThatCannotBeFitted) {
  EXPECT_TRUE(throws_error_containing([] { fit_link(1, exact_table(2, 1, 1)); }, "world size 1"));
  EXPECT_TRUE(throws_error_containing([] { fit_link(2, {{100, 5}, {100, 6}}); }, "1 distinct message sizes"));
  EXPECT_TRUE(throws_error_containing([] { fit_link(2, {{100, 5}, {200, 0}}); }, "must be positive"));
}

TEST(SimulateComm, OneBucketFinishingAfterBackwardIsExposed) {
  const SimulatedBackward s = simulate_comm({100}, {10}, {5}, 12);
  ASSERT_EQ(s.buckets.size(), 1u);
  EXPECT_EQ(s.buckets[0].start_ms, 10);
  EXPECT_EQ(s.buckets[0].end_ms, 15);
  EXPECT_EQ(s.exposed_comm_ms, 3);
  EXPECT_EQ(s.comm_busy_ms, 5);
}

TEST(SimulateComm, BucketsWithGapsStartWhenReady) {
  const SimulatedBackward s = simulate_comm({1, 1, 1}, {2, 10, 20}, {3, 3, 3}, 20);
  EXPECT_EQ(s.buckets[0].start_ms, 2);
  EXPECT_EQ(s.buckets[1].start_ms, 10);
  EXPECT_EQ(s.buckets[2].start_ms, 20);
  EXPECT_EQ(s.buckets[2].end_ms, 23);
  EXPECT_EQ(s.exposed_comm_ms, 3);
}

TEST(SimulateComm, CommSlowerThanComputeQueuesBehindThePreviousBucket) {
  const SimulatedBackward s = simulate_comm({1, 1, 1}, {1, 2, 3}, {5, 5, 5}, 4);
  EXPECT_EQ(s.buckets[1].start_ms, 6);
  EXPECT_EQ(s.buckets[2].start_ms, 11);
  EXPECT_EQ(s.buckets[2].end_ms, 16);
  EXPECT_EQ(s.exposed_comm_ms, 12);
}

TEST(SimulateComm, CommFasterThanComputeIsHiddenEntirely) {
  const SimulatedBackward s = simulate_comm({1, 1, 1}, {1, 5, 9}, {1, 1, 1}, 12);
  EXPECT_EQ(s.buckets[2].end_ms, 10);
  EXPECT_EQ(s.exposed_comm_ms, 0);
}

TEST(SimulateComm, LaunchLatencyDelaysAStartUnlessTheBucketWaitsBehindAnotherAndTheTailAddsToTheExposedPart) {
  // Ready at 1 and 2, comm 3 each, launch 0.5: bucket 0 runs 1.5-4.5; bucket 1, queued
  // since 2.5, starts as bucket 0 ends and ends at 7.5; backward 6: 1.5 + tail 1.
  const SimulatedBackward s = simulate_comm({1, 1}, {1, 2}, {3, 3}, 6, CommOverheads{1, 1, 0.5, 1});
  EXPECT_EQ(s.buckets[0].start_ms, 1.5);
  EXPECT_EQ(s.buckets[1].start_ms, 4.5);
  EXPECT_EQ(s.buckets[1].end_ms, 7.5);
  EXPECT_EQ(s.exposed_comm_ms, 2.5);
  EXPECT_EQ(simulate_comm({1}, {1}, {1}, 6, CommOverheads{1, 1, 0, 1}).exposed_comm_ms, 1)
      << "the tail is paid even when all is hidden";
  EXPECT_EQ(simulate_comm({}, {}, {}, 6, CommOverheads{1, 1, 0, 1}).exposed_comm_ms, 0) << "no bucket, no tail";
}

TEST(SimulateComm, ABucketWaitsForTheSlowestRankByTheReadyLag) {
  // Ready at 4 here; the slowest rank is 50 % behind: ready there at 6, started 0.5 later.
  CommOverheads o{1, 1, 0.5, 0};
  o.ready_lag = 0.5;
  EXPECT_DOUBLE_EQ(simulate_comm({1}, {4}, {1}, 10, o).buckets[0].start_ms, 6.5);
  o.ready_lag = -0.1;
  EXPECT_TRUE(throws_error_containing([&] { simulate_comm({1}, {4}, {1}, 10, o); }, "ready lag"));
}

TEST(FitLaunch, IsTheLineThroughTheWaitsOfBucketsThatFoundTheThreadFree) {
  auto [launch, lag] = fit_launch({0, 10, 20}, {1, 3, 5});
  EXPECT_DOUBLE_EQ(launch, 1);
  EXPECT_DOUBLE_EQ(lag, 0.2);
}

TEST(FitLaunch, OneReadyTimeGivesTheMeanWaitAndNoLag) {
  auto [launch, lag] = fit_launch({8, 8}, {1, 2});
  EXPECT_DOUBLE_EQ(launch, 1.5);
  EXPECT_DOUBLE_EQ(lag, 0);
  EXPECT_EQ(fit_launch({}, {}), std::make_pair(0.0, 0.0)) << "no bucket waited: nothing to add";
}

TEST(FitLaunch, KeepsBothNonNegative) {
  // Waits that shrink with the ready time: no lag, the mean wait.
  auto [launch, lag] = fit_launch({0, 10}, {3, 1});
  EXPECT_DOUBLE_EQ(launch, 2);
  EXPECT_DOUBLE_EQ(lag, 0);
  // A line through a negative intercept: the lag alone, through the origin.
  std::tie(launch, lag) = fit_launch({10, 20}, {1, 3});
  EXPECT_DOUBLE_EQ(launch, 0);
  EXPECT_DOUBLE_EQ(lag, (10.0 * 1 + 20.0 * 3) / (100 + 400));
  EXPECT_TRUE(throws_error_containing([] { fit_launch({1}, {-1}); }, "waited -1 ms"));
}

TEST(SimulateComm, CommRunsAtTheBackwardPaceUntilBackwardEndsThenAtTheOther) {
  // Link work 4 ms starting at 8, backward ends at 10, scales 2 during and 1.5 after: 2 ms inside do
  // 1 ms of work; the remaining 3 ms of work take 4.5 ms: end at 14.5.
  const SimulatedBackward s = simulate_comm({1}, {8}, {4}, 10, CommOverheads{2, 1.5, 0, 0});
  EXPECT_DOUBLE_EQ(s.buckets[0].end_ms, 14.5);
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 4.5);
  // Entirely inside backward: 1 ms of work at scale 2 from 2 to 4; entirely after: 1 ms at 1.5.
  EXPECT_DOUBLE_EQ(simulate_comm({1}, {2}, {1}, 10, CommOverheads{2, 1.5, 0, 0}).buckets[0].end_ms, 4);
  EXPECT_DOUBLE_EQ(simulate_comm({1}, {12}, {1}, 10, CommOverheads{2, 1.5, 0, 0}).buckets[0].end_ms, 13.5);
}

TEST(SimulateComm, BackwardSlowsByTheStolenShareWhileABucketIsReducedInsideIt) {
  // 10 ms of backward's own work; bucket 0 ready at 4 ms of it, 2 ms of link work at scale 1 from 4 to 6,
  // while backward runs at half pace: 1 ms of its work done by 6, the other 5 ms at full pace: ends at 11.
  // Bucket 1, ready at 6 ms of work, is ready at 7 (not 6) and, with 1 ms of link work from 7 to 8 at
  // half pace again, backward ends at 11.5.
  CommOverheads o;
  o.stolen_share = 0.5;
  SimulatedBackward s = simulate_comm({1}, {4}, {2}, 10, o);
  EXPECT_DOUBLE_EQ(s.buckets[0].end_ms, 6);
  EXPECT_DOUBLE_EQ(s.backward_compute_ms, 11);
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 0);
  s = simulate_comm({1, 1}, {4, 6}, {2, 1}, 10, o);
  EXPECT_DOUBLE_EQ(s.buckets[1].ready_ms, 7);
  EXPECT_DOUBLE_EQ(s.buckets[1].end_ms, 8);
  EXPECT_DOUBLE_EQ(s.backward_compute_ms, 11.5);
  // After backward nothing is stolen: a bucket running past its end leaves it where the stealing put it.
  s = simulate_comm({1}, {9}, {3}, 10, o);
  EXPECT_DOUBLE_EQ(s.backward_compute_ms, 11);  // 9..11 at half pace does the last 1 ms
  EXPECT_DOUBLE_EQ(s.buckets[0].end_ms, 12);
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 1);
  o.stolen_share = 1;
  EXPECT_TRUE(throws_error_containing([&] { simulate_comm({1}, {4}, {2}, 10, o); }, "stolen share 1"));
}

TEST(FitCommScales, RecoversTheTwoPacesFromBucketsThatSawBoth) {
  // Scales 3 during and 1.5 after: bucket 0 all inside (2 ms of link work: 6 ms), bucket 1 all after
  // (2 ms: 3 ms), bucket 2 split (3 ms inside do 1 ms, 1 ms of work left: 1.5 ms after).
  const auto [during, after] = fit_comm_scales({6, 0, 3}, {0, 3, 1.5}, {2, 2, 2});
  EXPECT_NEAR(during, 3, 1e-12);
  EXPECT_NEAR(after, 1.5, 1e-12);
}

TEST(FitCommScales, OnePhaseOnlyGivesBothTheOverallRatio) {
  const auto [during, after] = fit_comm_scales({0, 0}, {3, 5}, {1, 3});
  EXPECT_DOUBLE_EQ(during, 2);
  EXPECT_DOUBLE_EQ(after, 2);
  EXPECT_TRUE(throws_error_containing([] { fit_comm_scales({0}, {0}, {1}); }, "took no time"));
  EXPECT_TRUE(throws_error_containing([] { fit_comm_scales({0}, {0, 1}, {1}); }, "1 inside times, 2 after times"));
}

TEST(SimulateComm, RefusesMismatchedOrUnorderedInputs) {
  EXPECT_TRUE(throws_error_containing([] { simulate_comm({1, 1}, {1}, {1, 1}, 2); }, "2 bucket sizes, 1 ready times"));
  EXPECT_TRUE(throws_error_containing([] { simulate_comm({1, 1}, {5, 1}, {1, 1}, 6); }, "bucket 1 is ready at 1 ms"));
  EXPECT_TRUE(throws_error_containing([] { simulate_comm({1}, {1}, {-1}, 6); }, "link time -1 ms"));
  EXPECT_TRUE(throws_error_containing(
      [] {
        simulate_comm({1}, {1}, {1}, 6, CommOverheads{0, 1, 0, 0});
      },
      "must be positive"));
}

std::vector<GradientTiming> gradients(const std::vector<size_t>& bytes, const std::vector<double>& fractions) {
  std::vector<GradientTiming> out;
  for (size_t i = 0; i < bytes.size(); ++i) out.push_back({"g" + std::to_string(i), bytes[i], fractions[i]});
  return out;
}

TEST(BucketsForCaps, MatchesDdpsAssignmentInReadyOrder) {
  // Listed out of ready order: re-forming must sort by ready time first, as DDP's rebuild uses the ready order.
  const auto g = gradients({400, 1000, 300, 5000, 200, 700}, {0.9, 0.1, 0.5, 1.0, 0.3, 0.2});
  const std::vector<int> ready_order = {1, 5, 4, 2, 0, 3};
  std::vector<ParamDesc> params;
  for (const auto& x : g) params.push_back({x.bytes, DType::F32, Device::cpu()});
  for (auto [first, cap] : {std::pair<size_t, size_t>{1000, 1500}, {0, 0}, {500, 1 << 20}, {1 << 20, 1 << 20}}) {
    const auto mine = buckets_for_caps(g, {first, cap});
    const auto ddps = assign_buckets(params, ready_order, first, cap);
    ASSERT_EQ(mine.size(), ddps.size()) << first << " " << cap;
    for (size_t b = 0; b < mine.size(); ++b) {
      EXPECT_EQ(mine[b].params, ddps[b].params);
      EXPECT_EQ(mine[b].bytes, ddps[b].bytes);
    }
  }
}

TEST(BucketCaps, ConvertsMegabytesAsDdpDoesWithTheFirstCapNeverAboveTheOther) {
  const BucketCaps c = BucketCaps::from_mb(1, 25);
  EXPECT_EQ(c.first_bytes, bucket_cap_bytes(1));
  EXPECT_EQ(c.first_bytes, 1u << 20);
  EXPECT_EQ(c.bytes, 25u << 20);
  const BucketCaps small = BucketCaps::from_mb(1, 0.5);
  EXPECT_EQ(small.first_bytes, 512u * 1024);
  EXPECT_EQ(small.bytes, 512u * 1024);
}

TEST(PredictStep, OneRankIsTheComputeAlone) {
  ComputeTimes c{1, 10, 20, 5, 2};
  LinkFit one;
  const StepPrediction p = predict_step({}, c, one, BucketCaps::from_mb(1, 25));
  EXPECT_TRUE(p.layout.empty());
  EXPECT_EQ(p.step_ms, 38);
  EXPECT_EQ(p.backward.exposed_comm_ms, 0);
}

TEST(PredictStep, FormsBucketsTimesThemOnTheLinkAndAddsTheExposedPart) {
  // Three gradients ready at 25 %, 50 % and 100 % of a 40 ms backward; caps put the first two together.
  const auto g = gradients({1000, 1000, 4000}, {0.25, 0.5, 1.0});
  LinkFit link;
  link.world_size = 2;  // bus factor 1
  link.alpha_us = 1000;
  link.beta_us_per_byte = 2;  // 1000 bytes: 3 ms; 2000 bytes: 5 ms; 4000 bytes: 9 ms
  const ComputeTimes c{0.5, 10, 40, 5, 1.5};
  const StepPrediction p = predict_step(g, c, link, {2000, 2000});
  ASSERT_EQ(p.layout.size(), 2u);
  EXPECT_EQ(p.layout[0].bytes, 2000u);
  // Bucket 0 ready at 20 ms, done at 25; bucket 1 ready at 40, done at 49: 9 ms exposed.
  EXPECT_DOUBLE_EQ(p.backward.buckets[0].ready_ms, 20);
  EXPECT_DOUBLE_EQ(p.backward.buckets[0].end_ms, 25);
  EXPECT_DOUBLE_EQ(p.backward.buckets[1].start_ms, 40);
  EXPECT_DOUBLE_EQ(p.backward.exposed_comm_ms, 9);
  EXPECT_DOUBLE_EQ(p.step_ms, 0.5 + 10 + 40 + 5 + 1.5 + 9);
}

TEST(PredictStep, ScalesTheLinksTimeByTheMeasuredCommScale) {
  const auto g = gradients({1000}, {1.0});
  LinkFit link;
  link.world_size = 2;
  link.alpha_us = 1000;
  link.beta_us_per_byte = 2;  // 3 ms, after backward x 1.5 = 4.5 ms, after a 0.5 ms launch, + 0.25 ms tail
  const StepPrediction p = predict_step(g, ComputeTimes{0, 0, 10, 0, 0}, link, {}, CommOverheads{4, 1.5, 0.5, 0.25});
  EXPECT_DOUBLE_EQ(p.backward.buckets[0].end_ms, 15);
  EXPECT_DOUBLE_EQ(p.step_ms, 15.25);
}

TEST(PredictStep, CountsBackwardAsLongAsTheStolenShareMakesIt) {
  const auto g = gradients({1000, 1000}, {0.5, 1.0});
  LinkFit link;
  link.world_size = 2;
  link.alpha_us = 2000;  // 2 ms per bucket
  CommOverheads o;
  o.stolen_share = 0.5;
  // Bucket {0} ready at 5 ms, reduced 5-7 at half pace for backward (1 ms of its work), so backward
  // ends at 11 and bucket {1}, ready then, runs 11-13: 2 ms exposed. Step = 1 + 11 + 2 + 3.
  const StepPrediction p = predict_step(g, ComputeTimes{0, 1, 10, 3, 0}, link, {1000, 1000}, o);
  ASSERT_EQ(p.layout.size(), 2u);
  EXPECT_DOUBLE_EQ(p.backward.backward_compute_ms, 11);
  EXPECT_DOUBLE_EQ(p.backward.exposed_comm_ms, 2);
  EXPECT_DOUBLE_EQ(p.step_ms, 17);
}

TEST(PredictStep, NeedsGradientTimesForMoreThanOneRank) {
  LinkFit link;
  link.world_size = 2;
  EXPECT_TRUE(throws_error_containing([&] { predict_step({}, ComputeTimes{}, link, {}); }, "no gradient ready times"));
}

}  // namespace
}  // namespace tandem::ddp
