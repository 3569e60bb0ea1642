// Aggregates of step records against hand-computed values and numpy.
#include "profile/summary.h"

#include <gtest/gtest.h>

namespace tandem::profile {
namespace {

StepRecord record(int64_t step, double forward, double backward, double comm_wait, double step_ms) {
  StepRecord r;
  r.step = step;
  r.ms[index_of(Phase::Forward)] = r.host_ms[index_of(Phase::Forward)] = forward;
  r.ms[index_of(Phase::BackwardCompute)] = r.host_ms[index_of(Phase::BackwardCompute)] = backward;
  r.ms[index_of(Phase::CommWait)] = r.host_ms[index_of(Phase::CommWait)] = comm_wait;
  r.step_ms = step_ms;
  return r;
}

TEST(ProfileSummary, PercentilesMatchNumpysLinearMethod) {
  // numpy.percentile(..., q) with the default method="linear"
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({5, 1, 3}, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile({2, 4, 4, 4, 5, 5, 7, 9}, 90), 7.6);
  EXPECT_DOUBLE_EQ(percentile({3}, 90), 3);
}

TEST(ProfileSummary, DescribeGivesMeanMedianP90MinMax) {
  Distribution d = describe({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(d.count, 8);
  EXPECT_DOUBLE_EQ(d.mean, 5);
  EXPECT_DOUBLE_EQ(d.median, 4.5);
  EXPECT_DOUBLE_EQ(d.p90, 7.6);
  EXPECT_DOUBLE_EQ(d.min, 2);
  EXPECT_DOUBLE_EQ(d.max, 9);
  EXPECT_EQ(describe({}).count, 0);
}

TEST(ProfileSummary, SummarizesEveryPhaseOverTheSteps) {
  std::vector<StepRecord> steps = {record(3, 1, 10, 2, 20), record(4, 3, 12, 0, 20), record(5, 2, 11, 1, 23)};
  steps[0].peak_memory_bytes = 100;
  steps[1].peak_memory_bytes = 300;
  steps[2].peak_memory_bytes = 200;
  Summary s = summarize(steps);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.first_step, 3);
  EXPECT_EQ(s.last_step, 5);
  EXPECT_DOUBLE_EQ(s.phase(Phase::Forward).mean, 2);
  EXPECT_DOUBLE_EQ(s.phase(Phase::BackwardCompute).median, 11);
  EXPECT_DOUBLE_EQ(s.phase(Phase::CommWait).max, 2);
  EXPECT_DOUBLE_EQ(s.phase(Phase::Optimizer).mean, 0);
  EXPECT_DOUBLE_EQ(s.step_ms.mean, 21);
  // other = step - phases: 20-13, 20-15, 23-14
  EXPECT_DOUBLE_EQ(s.other_ms.mean, (7.0 + 5.0 + 9.0) / 3.0);
  EXPECT_EQ(s.peak_memory_bytes, 300u);
  EXPECT_EQ(s.comm_steps, 0);
  EXPECT_FALSE(s.overlap_pct.has_value());
}

TEST(ProfileSummary, OverlapPercentWeighsStepsByTheirCommunication) {
  std::vector<StepRecord> steps = {record(1, 0, 0, 0, 1), record(2, 0, 0, 0, 1), record(3, 0, 0, 0, 1)};
  steps[0].has_comm = true;
  steps[0].comm_ms = 10;
  steps[0].overlap_ms = 10;  // 100 %
  steps[1].has_comm = true;
  steps[1].comm_ms = 30;
  steps[1].overlap_ms = 0;  // 0 %
  Summary s = summarize(steps);
  EXPECT_EQ(s.comm_steps, 2);
  EXPECT_DOUBLE_EQ(s.comm_ms.mean, 20);
  ASSERT_TRUE(s.overlap_pct.has_value());
  EXPECT_DOUBLE_EQ(*s.overlap_pct, 25.0);  // 10 of 40 ms, not the mean of 100 % and 0 %
}

TEST(ProfileSummary, StepJsonHasEveryPhaseAndNullsForMissingCommunication) {
  StepRecord r = record(9, 1.5, 2, 0, 4);
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["step"], 9);
  for (Phase p : kAllPhases) EXPECT_TRUE(j.contains(std::string(phase_name(p)) + "_ms")) << phase_name(p);
  EXPECT_DOUBLE_EQ(j["forward_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["other_ms"].get<double>(), 0.5);
  EXPECT_TRUE(j["overlap_pct"].is_null());
  EXPECT_TRUE(j["comm_ms"].is_null());
  EXPECT_EQ(j["timing"], "host");
}

TEST(ProfileSummary, SummaryJsonAndTableNameEveryPhase) {
  Summary s = summarize({record(1, 1, 2, 3, 7), record(2, 1, 2, 3, 7)});
  nlohmann::json j = to_json(s);
  std::string table = format_table(s);
  for (Phase p : kAllPhases) {
    EXPECT_TRUE(j["phases_ms"].contains(std::string(phase_name(p))));
    EXPECT_NE(table.find(std::string(phase_name(p))), std::string::npos) << table;
  }
  EXPECT_DOUBLE_EQ(j["phases_ms"]["comm_wait"]["mean"].get<double>(), 3);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_NE(table.find("other"), std::string::npos);
}

}  // namespace
}  // namespace tandem::profile
