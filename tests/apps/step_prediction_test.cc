// From bench results to the step model (apps/step_prediction.h): calibration
// on a profile built by hand, scaling between world sizes, link lookup errors.
#include "apps/step_prediction.h"

#include <gtest/gtest.h>

#include "tests/testing/errors.h"

namespace tandem::apps {
namespace {

using tandem::testing::throws_error_containing;

ddp::LinkFit two_rank_link() {
  ddp::LinkFit l;
  l.world_size = 2;        // bus factor 1
  l.alpha_us = 1000;       // 1 ms
  l.beta_us_per_byte = 1;  // + 1 ms per 1000 bytes
  return l;
}

// Two buckets: 1000 bytes ready at 10 ms, reduced 11-15; 3000 bytes ready at 19, reduced 20-26.
// Backward compute 20 ms, the whole backward 30 ms.
report::Profile two_bucket_profile() {
  report::Profile p;
  p.facts.label = "1";
  p.facts.world_size = 2;
  p.facts.bucket_bytes = {1000, 3000};
  p.facts.gradient_names = {"head", "mid", "embedding"};
  p.facts.gradient_bytes = {1000, 1000, 2000};
  p.gradient_ready_ms = {10, 15, 19};
  p.bucket_ready_ms = {10, 19};
  p.bucket_comm_start_ms = {11, 20};
  p.bucket_comm_end_ms = {15, 26};
  p.median.step_ms = 60;
  p.median.data_wait_ms = 1;
  p.median.forward_ms = 15;
  p.median.backward_ms = 30;
  p.median.backward_compute_ms = 20;
  p.median.exposed_comm_ms = 9.5;
  p.median.optimizer_ms = 10;
  return p;
}

TEST(Calibrate, TakesComputeReadyFractionsAndOverheadsFromTheProfile) {
  const Calibration c = calibrate(two_bucket_profile(), two_rank_link(), "b/buckets.json:1");
  EXPECT_EQ(c.world_size, 2);
  EXPECT_EQ(c.compute.forward_ms, 15);
  EXPECT_EQ(c.compute.backward_compute_ms, 20);
  EXPECT_EQ(c.compute.other_ms, 60 - 1 - 15 - 30 - 10);
  ASSERT_EQ(c.gradients.size(), 3u);
  EXPECT_DOUBLE_EQ(c.gradients[1].ready_fraction, 0.75);
  EXPECT_EQ(c.gradients[2].bytes, 2000u);
  // Bucket 0 ran 11-15 inside backward (4 ms for the link's 2), bucket 1 20-26 after it (6 ms for 4).
  EXPECT_DOUBLE_EQ(c.overheads.scale_during_backward, 2);
  EXPECT_DOUBLE_EQ(c.overheads.scale_after_backward, 1.5);
  // Launch: bucket 0 starts 1 ms after ready, bucket 1 1 ms after ready (the thread was free at 15).
  EXPECT_DOUBLE_EQ(c.overheads.launch_ms, 1);
  EXPECT_DOUBLE_EQ(c.overheads.ready_lag, 0);
  // After the autograd pass: 10 ms, of which the last bucket ran 6 past its end.
  EXPECT_DOUBLE_EQ(c.overheads.tail_ms, 4);
}

TEST(Calibrate, LaunchAndLagComeOnlyFromBucketsThatFoundTheCommThreadIdle) {
  report::Profile p = two_bucket_profile();
  // Bucket 1, ready at 12 while bucket 0 ran until 15, starts right as it ends:
  // its wait was the queue, which says nothing about the launch.
  p.bucket_ready_ms = {10, 12};
  p.bucket_comm_start_ms = {11, 15};
  p.bucket_comm_end_ms = {15, 21};
  Calibration c = calibrate(p, two_rank_link(), "b:1");
  EXPECT_DOUBLE_EQ(c.overheads.launch_ms, 1);
  EXPECT_DOUBLE_EQ(c.overheads.ready_lag, 0);
  // Nor does a queued bucket that started well after the thread was free: on an oversubscribed
  // CPU that is the comm thread waiting for a core, not the backend's start-up. (A bucket that
  // finds the thread idle wakes it, and the woken thread runs at once.)
  p.bucket_comm_start_ms = {11, 18};
  p.bucket_comm_end_ms = {15, 24};
  c = calibrate(p, two_rank_link(), "b:1");
  EXPECT_DOUBLE_EQ(c.overheads.launch_ms, 1);
  EXPECT_DOUBLE_EQ(c.overheads.ready_lag, 0);
  // Both found it idle, waiting 1 ms at 10 and 1.5 ms at 19 (the thread was free at 15): a lag of 0.5/9.
  p = two_bucket_profile();
  p.bucket_comm_start_ms = {11, 20.5};
  p.bucket_comm_end_ms = {15, 26.5};
  c = calibrate(p, two_rank_link(), "b:1");
  EXPECT_NEAR(c.overheads.ready_lag, 0.5 / 9, 1e-12);
  EXPECT_NEAR(c.overheads.launch_ms, 1 - 10 * 0.5 / 9, 1e-12);
}

TEST(Calibrate, ItsOwnCaseIsPredictedExactlyWhenTheLinkIsExact) {
  const report::Profile p = two_bucket_profile();
  const Calibration c = calibrate(p, two_rank_link(), "b/buckets.json:1");
  // First cap 1000 bytes, then 3000, re-forms the measured layout: {head}, {mid, embedding}.
  const PredictionRow r = predict_row(c, two_rank_link(), {"3000 B", {1000, 3000}});
  ASSERT_EQ(r.prediction.layout.size(), 2u);
  EXPECT_EQ(r.prediction.layout[1].bytes, 3000u);
  EXPECT_DOUBLE_EQ(r.prediction.step_ms, p.median.step_ms);
}

TEST(Calibrate, RefusesProfilesWithoutReadyTimes) {
  report::Profile p = two_bucket_profile();
  p.gradient_ready_ms.clear();
  EXPECT_TRUE(throws_error_containing([&] { calibrate(p, two_rank_link(), "old/buckets.json:1"); },
                                      "old/buckets.json:1: no gradient ready or bucket times"));
}

TEST(Average, IsTheMeanOfComputeReadyFractionsAndTailWithTheCommOverheadsFittedOverAllBuckets) {
  const Calibration a = calibrate(two_bucket_profile(), two_rank_link(), "b:1");
  report::Profile p = two_bucket_profile();
  p.facts.label = "4";
  p.median.forward_ms = 25;
  p.gradient_ready_ms = {12, 13, 19};
  p.bucket_comm_end_ms = {17, 26};  // bucket 0 took 6 ms inside backward for the link's 2: scale 3
  p.median.backward_ms = 32;        // tail 6
  const Calibration b = calibrate(p, two_rank_link(), "b:4");
  const Calibration m = average({a, b});
  EXPECT_EQ(m.source, "mean of b:1, b:4");
  EXPECT_DOUBLE_EQ(m.compute.forward_ms, 20);
  EXPECT_DOUBLE_EQ(m.gradients[0].ready_fraction, (0.5 + 0.6) / 2);
  EXPECT_DOUBLE_EQ(m.overheads.tail_ms, (4 + 6) / 2.0);
  // One least-squares fit over the four buckets, not the mean of the two cases' scales (2.5): the
  // inside times 4 and 6 ms each did the link's 2 ms, so 1/s = (4 x 2 + 6 x 2) / (4^2 + 6^2).
  EXPECT_DOUBLE_EQ(m.overheads.scale_during_backward, 52.0 / 20);
  EXPECT_DOUBLE_EQ(m.overheads.scale_after_backward, 1.5);
  EXPECT_EQ(m.buckets.size(), 4u);
  report::Profile other = two_bucket_profile();
  other.facts.gradient_names = {"head", "mid", "pooler"};
  EXPECT_TRUE(throws_error_containing(
      [&] {
        average({a, calibrate(other, two_rank_link(), "c:1")});
      },
      "gradients differ"));
}

// two_bucket_profile with bucket 0 reduced 11-`end0` inside a backward of `backward` ms (<= 22),
// and bucket 1 after it, 22-28.
report::Profile busier(double end0, double backward) {
  report::Profile p = two_bucket_profile();
  p.facts.label = "busier";
  p.bucket_comm_start_ms = {11, 22};
  p.bucket_comm_end_ms = {end0, 28};
  p.median.backward_compute_ms = backward;
  p.median.backward_ms = backward + 10;
  return p;
}

TEST(Average, FitsTheStolenShareAsTheSlopeOfBackwardOnTheCommTimeInsideIt) {
  // Busy 4 ms inside a 20 ms backward, and 6 ms inside 20.6: 0.3 ms of backward per ms of comm,
  // and 18.8 ms of backward's own work in both.
  const Calibration m = average({calibrate(two_bucket_profile(), two_rank_link(), "b:1"),
                                 calibrate(busier(17, 20.6), two_rank_link(), "b:2")});
  EXPECT_NEAR(m.overheads.stolen_share, 0.3, 1e-12);
  EXPECT_NEAR(m.compute.backward_compute_ms, 18.8, 1e-12);
  // Ready fractions of that own work: "head" at 10 ms, before any comm; "embedding" at 19 ms, after 4
  // (or 6) ms of it, so 19 - 1.2 (or 1.8) ms of work.
  EXPECT_NEAR(m.gradients[0].ready_fraction, 10 / 18.8, 1e-12);
  EXPECT_NEAR(m.gradients[2].ready_fraction, 17.5 / 18.8, 1e-12);
}

TEST(Average, BoundsTheStolenShareByTheCommThreadsOwnWork) {
  // Busy 4 and 8 ms for the link's 2 ms each: 1/s_during = (4 x 2 + 8 x 2) / (4^2 + 8^2) = 0.3, so the
  // thread did 0.3 ms of link work per busy ms and may take no more than that from backward, whatever
  // the slope (2 ms more backward for 4 ms more busy: 0.5).
  const Calibration m = average({calibrate(two_bucket_profile(), two_rank_link(), "b:1"),
                                 calibrate(busier(19, 22), two_rank_link(), "b:2")});
  EXPECT_NEAR(m.overheads.scale_during_backward, 1 / 0.3, 1e-12);
  EXPECT_NEAR(m.overheads.stolen_share, 0.3, 1e-12);
}

TEST(Calibrate, OneCaseCannotTellAStolenShare) {
  const Calibration c = calibrate(busier(17, 20.6), two_rank_link(), "b:2");
  EXPECT_EQ(c.overheads.stolen_share, 0);
  EXPECT_DOUBLE_EQ(c.compute.backward_compute_ms, 20.6);
}

TEST(ScaleToWorld, GivesEachRankItsShareOfTheCoresAtOrAboveTheCoreCount) {
  const Calibration c = calibrate(two_bucket_profile(), two_rank_link(), "b:1");
  const Calibration s = scale_to_world(c, 4, 2);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_DOUBLE_EQ(s.compute.backward_compute_ms, 40);
  EXPECT_DOUBLE_EQ(s.compute.forward_ms, 30);
  EXPECT_DOUBLE_EQ(s.overheads.launch_ms, 2);
  EXPECT_DOUBLE_EQ(s.overheads.scale_after_backward, 1.5) << "kept: a ratio to each world size's own link";
  EXPECT_DOUBLE_EQ(s.gradients[1].ready_fraction, 0.75);
  EXPECT_TRUE(throws_error_containing([&] { scale_to_world(c, 3, 4); }, "cannot be scaled to 3 ranks on 4 cores"));
}

TEST(Links, OneFitPerWorldSizeAndAClearErrorForAMissingOne) {
  report::AllreduceTable a{"ar2.txt", 2, "ring", {{1000, 3, 2, 1}, {2000, 4, 3, 2}}};
  report::AllreduceTable b{"again2.txt", 2, "ring", a.rows};
  const auto fits = fit_links({a});
  EXPECT_NEAR(fits.at(2).alpha_us, 1, 1e-9) << "in-place times: 2 us and 3 us";
  EXPECT_TRUE(throws_error_containing(
      [&] {
        fit_links({a, b});
      },
      "two all_reduce tables for 2 ranks: ar2.txt and again2.txt"));
  EXPECT_TRUE(
      throws_error_containing([&] { link_for(fits, 3); }, "no all_reduce table for 3 ranks (--link gives 2 ranks)"));
  EXPECT_EQ(link_for(fits, 1).time_us(1e6), 0);
  report::AllreduceTable one_size{"flat.txt", 2, "ring", {{1000, 3, 2, 1}}};
  EXPECT_TRUE(throws_error_containing([&] { fit_links({one_size}); }, "flat.txt: "));
  EXPECT_TRUE(throws_error_containing([&] { fit_links({one_size}); }, "link fit (2 ranks): 1 distinct message sizes"));
}

TEST(CapCases, ParseAsTheBucketBenchDoes) {
  EXPECT_EQ(parse_cap_case("one", 1).label, "one bucket");
  EXPECT_EQ(parse_cap_case("4", 1).caps.bytes, 4u << 20);
  EXPECT_EQ(parse_cap_case("0.5", 1).caps.first_bytes, 512u * 1024) << "the first cap is never above the cap";
  EXPECT_TRUE(throws_error_containing([] { parse_cap_case("big", 1); }, "'big' is not a positive size"));
}

}  // namespace
}  // namespace tandem::apps
