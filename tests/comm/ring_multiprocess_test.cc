// The ring backend across real processes on localhost: every collective and
// dtype at 2, 3 and 4 ranks, and the failures that must end in an error
// naming the rank at fault instead of a hang.
#include <gtest/gtest.h>

#include "core/stream.h"
#include "tests/comm/run_job.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

using testing::run_job;

class RingCollectives : public ::testing::TestWithParam<int> {};

TEST_P(RingCollectives, EveryCollectiveDtypeAndSizeMatchesTheReference) {
  auto run = run_job(GetParam(), {TANDEM_COMM_WORKER, "collectives", "--backend", "ring"});
  EXPECT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
  for (int r = 0; r < GetParam(); ++r) EXPECT_NE(run.output_of(r).find(", 0 wrong"), std::string::npos) << run.output();
}

TEST(RingCollectivesOnGpu, RanksSharingOneGpuReduceCudaTensors) {
  TANDEM_REQUIRE_GPU();  // NCCL refuses two ranks on one GPU; the ring stages through pinned host memory
  auto run = run_job(2, {TANDEM_COMM_WORKER, "collectives", "--backend", "ring", "--device", "cuda"});
  EXPECT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingCollectives, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(RingFailures, RendezvousTimeoutNamesTheRankThatNeverArrived) {
  // Three ranks are expected, two are started.
  auto run = run_job(2, {TANDEM_COMM_WORKER, "rendezvous"},
                     {{"WORLD_SIZE", "3"}, {"LOCAL_WORLD_SIZE", "3"}, {"TANDEM_COMM_TIMEOUT_MS", "1500"}},
                     /*stop_on_failure=*/false);
  ASSERT_EQ(run.result.ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(run.result.ranks[r].exit_code, 2) << run.output();
    EXPECT_NE(run.output_of(r).find("rank(s) 2 of world size 3 never arrived"), std::string::npos) << run.output();
  }
}

TEST(RingFailures, ARankWithAWrongTokenIsRejectedAndNamedByTheOthers) {
  auto run = run_job(2,
                     {"/bin/sh", "-c",
                      std::string("if [ $RANK = 1 ]; then export TANDEM_STORE_TOKEN=forged; fi; exec ") +
                          TANDEM_COMM_WORKER + " rendezvous"},
                     {{"TANDEM_COMM_TIMEOUT_MS", "1500"}}, /*stop_on_failure=*/false);
  ASSERT_EQ(run.result.ranks.size(), 2u);
  EXPECT_EQ(run.result.ranks[1].exit_code, 2) << run.output();
  EXPECT_NE(run.output_of(1).find("rejected this client: wrong or missing token"), std::string::npos) << run.output();
  EXPECT_EQ(run.result.ranks[0].exit_code, 2) << run.output();
  EXPECT_NE(run.output_of(0).find("rank(s) 1 of world size 2 never arrived"), std::string::npos) << run.output();
}

class RingKilledPeer : public ::testing::TestWithParam<int> {};

TEST_P(RingKilledPeer, OthersFailNamingTheDeadRankInsteadOfHanging) {
  const int world = GetParam(), victim = 1;
  auto run = run_job(world, {TANDEM_COMM_WORKER, "kill_mid_allreduce", std::to_string(victim)},
                     {{"TANDEM_COMM_TIMEOUT_MS", "60000"}}, /*stop_on_failure=*/false);
  ASSERT_EQ(static_cast<int>(run.result.ranks.size()), world);
  EXPECT_EQ(run.result.ranks[victim].exit_code, -9) << run.output();
  // Survivors exit 0 only if their error names the dead rank (see comm_worker.cc).
  for (int r = 0; r < world; ++r) {
    if (r != victim) {
      EXPECT_EQ(run.result.ranks[r].exit_code, 0) << "rank " << r << "\n" << run.output();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingKilledPeer, ::testing::Values(3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace tandem
