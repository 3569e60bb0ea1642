// profile/op_profile.h on an injected clock: per-step means of each op's
// calls and time, forward and backward apart, largest first.
#include "profile/op_profile.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace tandem::profile {
namespace {

using Clock = std::chrono::steady_clock;

struct FakeClock {
  Clock::time_point t{};
  void advance_ms(double ms) {
    t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }
};

class OpProfileTest : public ::testing::Test {
 protected:
  OpProfileTest() : ops_(OpProfileOptions{nullptr, [this] { return clock_.t; }}) { set_op_observer(&ops_); }
  ~OpProfileTest() override { set_op_observer(nullptr); }
  void op(const char* name, double ms, bool backward = false) {
    OpScope s(name, backward);
    clock_.advance_ms(ms);
  }
  FakeClock clock_;
  OpProfile ops_;
};

TEST_F(OpProfileTest, GivesEachOpsCallsAndMillisecondsPerStep) {
  op("linear", 2);
  op("linear", 4);
  clock_.advance_ms(10);  // between ops: no op's time
  op("LinearBackward", 6, true);
  ops_.end_step();
  op("linear", 3);
  op("LinearBackward", 2, true);
  ops_.end_step();
  ASSERT_EQ(ops_.steps(), 2);
  const std::vector<OpRow> rows = ops_.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "linear");
  EXPECT_FALSE(rows[0].backward);
  EXPECT_DOUBLE_EQ(rows[0].calls_per_step, 1.5);
  EXPECT_NEAR(rows[0].ms_per_step, 4.5, 1e-9);
  EXPECT_EQ(rows[1].name, "LinearBackward");
  EXPECT_TRUE(rows[1].backward);
  EXPECT_NEAR(rows[1].ms_per_step, 4.0, 1e-9);
  EXPECT_NEAR(ops_.ms_per_step(), 8.5, 1e-9);
}

TEST_F(OpProfileTest, KeepsAForwardAndABackwardOfOneNameApart) {
  op("attention", 1);
  op("attention", 5, true);
  ops_.end_step();
  const std::vector<OpRow> rows = ops_.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].backward);
  EXPECT_FALSE(rows[1].backward);
}

TEST_F(OpProfileTest, NestedScopesCountOnceForTheOutermost) {
  {
    OpScope outer("LayerNormBackward", true);
    clock_.advance_ms(1);
    op("add", 2);  // called inside the backward
  }
  ops_.end_step();
  const std::vector<OpRow> rows = ops_.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "LayerNormBackward");
  EXPECT_NEAR(rows[0].ms_per_step, 3.0, 1e-9);
}

TEST_F(OpProfileTest, EndingAStepInsideAnOpIsAnErrorNamingIt) {
  OpScope open("embedding");
  try {
    ops_.end_step();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the step ended inside 'embedding'"), std::string::npos) << e.what();
  }
}

TEST_F(OpProfileTest, NoStepsGiveNoRows) {
  op("linear", 1);  // not closed by end_step: not a step
  EXPECT_TRUE(ops_.rows().empty());
  EXPECT_EQ(ops_.ms_per_step(), 0.0);
}

}  // namespace
}  // namespace tandem::profile
