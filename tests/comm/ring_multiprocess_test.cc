// The ring backend across real processes on localhost: every collective and
// dtype at 2, 3 and 4 ranks, and the failures that must end in an error
// naming the rank at fault instead of a hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "comm/ring_process_group.h"
#include "core/allocator.h"
#include "core/stream.h"
#include "tests/comm/ring_testing.h"
#include "tests/comm/run_job.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

using testing::run_job;

// (world size, TANDEM_RING_TRANSPORT, TANDEM_RING_SINGLE_COPY): ranks on one
// host take shared memory unless told tcp; under single copy's auto the
// worker's all_reduces are on shared buffers reduced in place, and its other
// modes (shared buffers off) read the peers' buffers directly (on, at every
// size; auto from its threshold when tensors are on huge pages) or go round
// the ring (off); all must give the reference results.
class RingCollectives : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(RingCollectives, EveryCollectiveDtypeAndSizeMatchesTheReference) {
  const auto [world, transport, single_copy] = GetParam();
  // "auto+huge": auto with TANDEM_HOST_HUGE_PAGES=1, which auto needs.
  const bool huge = single_copy == "auto+huge";
  // Where the kernel has no transparent huge pages, auto keeps the ring there too.
  const bool on_huge_pages = huge && host_memory::kernel_has_transparent_huge_pages();
  // Single copy's cases keep shared buffers off, or the worker's all_reduces would never reach it.
  const std::string shared = single_copy == "auto" ? "auto" : "off";
  auto run = run_job(world, {TANDEM_COMM_WORKER, "collectives", "--backend", "ring"},
                     {{"TANDEM_RING_TRANSPORT", transport},
                      {"TANDEM_RING_SINGLE_COPY", huge ? "auto" : single_copy},
                      {"TANDEM_RING_SHARED_BUFFERS", shared},
                      {"TANDEM_HOST_HUGE_PAGES", huge ? "1" : "0"}});
  EXPECT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
  const std::string used = transport == "auto" ? "shm" : transport;
  const std::string copy = used == "tcp"          ? "off: the ranks are not all on one host with the shm transport"
                           : single_copy == "off" ? "off: asked for"
                           : single_copy == "on"  ? "from 0 bytes"
                           : on_huge_pages        ? "from " + std::to_string(comm::kRingSingleCopyMinBytes) + " bytes"
                                                  : "off: host tensors are not on huge pages on every rank";
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(run.output_of(r).find(", 0 wrong"), std::string::npos) << run.output();
    EXPECT_NE(run.output_of(r).find("transport " + used + " (pid"), std::string::npos) << run.output();
    EXPECT_NE(run.output_of(r).find("single copy " + copy), std::string::npos) << run.output();
    // Auto: every all_reduce of the worker is on shared buffers, reduced in place, wherever the ring is shm.
    EXPECT_NE(run.output_of(r).find(used == "tcp"      ? "shared buffers off: the ranks are not all on one host"
                                    : shared == "off" ? "shared buffers off: asked for"
                                    : comm::testing::kernel_maps_memfds_through_proc()
                                        ? "shared buffers from 0 bytes"
                                        : "shared buffers off: rank "),
              std::string::npos)
        << run.output();
  }
}

TEST(RingCollectivesOnGpu, RanksSharingOneGpuReduceCudaTensors) {
  TANDEM_REQUIRE_GPU();  // NCCL refuses two ranks on one GPU; the ring stages through pinned host memory
  auto run = run_job(2, {TANDEM_COMM_WORKER, "collectives", "--backend", "ring", "--device", "cuda"});
  EXPECT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingCollectives,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values("auto", "tcp", "shm"),
                                            ::testing::Values("auto")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(SingleCopy, RingCollectives,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values("shm"),
                                            ::testing::Values("on", "off", "auto+huge")),
                         [](const auto& info) {
                           std::string mode = std::get<2>(info.param);
                           if (mode == "auto+huge") mode = "auto_on_huge_pages";
                           return std::to_string(std::get<0>(info.param)) + "ranks_single_copy_" + mode;
                         });

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

// Names in /dev/shm (where shm_open would leave a segment behind).
std::set<std::string> dev_shm() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) names.insert(e.path().filename().string());
  return names;
}

// Lines of /proc/net/unix for the abstract sockets that ring ranks with these pids listened on.
std::vector<std::string> ring_sockets_of(const std::vector<int>& pids) {
  std::ifstream in("/proc/net/unix");
  std::vector<std::string> found;
  for (std::string line; std::getline(in, line);)
    for (int pid : pids)
      if (line.find("@tandem-ring-" + std::to_string(pid) + "-") != std::string::npos) found.push_back(line);
  return found;
}

// (world size, TANDEM_RING_TRANSPORT, TANDEM_RING_SINGLE_COPY,
// TANDEM_RING_SHARED_BUFFERS): over shm the 64 MiB all_reduce reduces shared
// buffers in place (shared buffers on), reads the peers' buffers directly
// (single copy on) or goes round the ring (both off).
class RingKilledPeer
    : public ::testing::TestWithParam<std::tuple<int, std::string, std::string, std::string>> {};

TEST_P(RingKilledPeer, OthersFailNamingTheDeadRankInsteadOfHangingAndLeaveNothingBehind) {
  const auto [world, transport, single_copy, shared] = GetParam();
  if (shared == "on") TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  const int victim = 1;
  const std::set<std::string> shm_before = dev_shm();
  // The idle timeout (60 s) outlives the job's limit (50 s): the job only ends
  // in time if every survivor saw the death itself, not a timeout.
  auto run = run_job(world, {TANDEM_COMM_WORKER, "kill_mid_allreduce", std::to_string(victim)},
                     {{"TANDEM_COMM_TIMEOUT_MS", "60000"},
                      {"TANDEM_RING_TRANSPORT", transport},
                      {"TANDEM_RING_SINGLE_COPY", single_copy},
                      {"TANDEM_RING_SHARED_BUFFERS", shared}},
                     /*stop_on_failure=*/false, std::chrono::seconds(50));
  ASSERT_EQ(static_cast<int>(run.result.ranks.size()), world) << run.result.message;
  EXPECT_NE(run.result.exit_code, 124) << run.result.message << "\n" << run.output();
  EXPECT_EQ(run.result.ranks[victim].exit_code, -9) << run.output();
  // Survivors exit 0 only if their error names the dead rank (see comm_worker.cc).
  std::vector<int> pids;
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(run.output_of(r).find("transport " + transport + " (pid"), std::string::npos) << run.output();
    if (transport == "shm") {
      EXPECT_NE(run.output_of(r).find(single_copy == "off" ? "single copy off" : "single copy from"), std::string::npos)
          << run.output();
      EXPECT_NE(run.output_of(r).find(shared == "off" ? "shared buffers off" : "shared buffers from"),
                std::string::npos)
          << run.output();
    }
    const std::string out = run.output_of(r);
    if (size_t at = out.find("(pid "); at != std::string::npos) pids.push_back(std::stoi(out.substr(at + 5)));
    if (r != victim) {
      EXPECT_EQ(run.result.ranks[r].exit_code, 0) << "rank " << r << "\n" << run.output();
    }
  }
  EXPECT_EQ(static_cast<int>(pids.size()), world) << run.output();
  // Shared memory lives in memfds, which have no name to leave behind; the
  // hand-off sockets are abstract and close with their processes.
  EXPECT_EQ(dev_shm(), shm_before);
  EXPECT_EQ(ring_sockets_of(pids), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingKilledPeer,
                         ::testing::Values(std::make_tuple(2, "shm", "off", "on"), std::make_tuple(3, "shm", "off", "on"),
                                           std::make_tuple(4, "shm", "off", "on"), std::make_tuple(2, "shm", "on", "off"),
                                           std::make_tuple(3, "shm", "on", "off"), std::make_tuple(4, "shm", "on", "off"),
                                           std::make_tuple(3, "shm", "off", "off"), std::make_tuple(4, "shm", "off", "off"),
                                           std::make_tuple(3, "tcp", "auto", "auto"), std::make_tuple(4, "tcp", "auto", "auto")),
                         [](const auto& info) {
                           const std::string copy = std::get<2>(info.param) == "on" ? "_single_copy" : "";
                           const std::string shared = std::get<3>(info.param) == "on" ? "_shared_buffers" : "";
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + copy +
                                  shared;
                         });

// --- Ranks that issue different collectives ------------------------------------
// The timeout is far longer than a test may take: these errors must come from
// the first frame (or fingerprint) that differs, not from a timeout.

std::map<std::string, std::string> long_timeout(bool debug = false) {
  // OFF explicitly: it takes precedence over a TORCH_DISTRIBUTED_DEBUG the caller's shell may set.
  return {{"TANDEM_COMM_TIMEOUT_MS", "120000"}, {"TANDEM_DISTRIBUTED_DEBUG", debug ? "DETAIL" : "OFF"}};
}

// Every rank exits 2 and its output contains each of `needles`.
void expect_every_rank_fails_with(const testing::JobRun& run, int world, const std::vector<std::string>& needles) {
  ASSERT_EQ(static_cast<int>(run.result.ranks.size()), world) << run.output();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(run.result.ranks[r].exit_code, 2) << "rank " << r << "\n" << run.output();
    for (const auto& n : needles) EXPECT_NE(run.output_of(r).find(n), std::string::npos) << "rank " << r << " lacks '" << n << "'\n" << run.output();
  }
}

TEST(RingDesync, ADifferentElementCountFailsAtTheFirstFrameNamingThePeerAndBothSizes) {
  // 2 ranks, 100 vs 99 f32: the segments are 50 + 50 and 50 + 49 elements, so
  // both ranks find a 196-byte frame against a 200-byte one (rank 0 in message
  // 0, rank 1 in message 1, whose header goes out ahead of its payload); which
  // finds it first varies, and the other quotes it as the group's first failure.
  auto run = run_job(2, {TANDEM_COMM_WORKER, "desync", "count"}, long_timeout(), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 2,
                               {"(left neighbour", "sent (sequence 1, ", "where this rank expected (sequence 1, ",
                                "196 bytes (all_reduce f32", "200 bytes (all_reduce f32"});
}

TEST(RingDesync, ARankThatSkipsACollectiveIsCaughtAtItsNextFrame) {
  // Rank 1's next all_reduce (1000 elements) is the others' collective #1 (100 elements).
  auto run = run_job(3, {TANDEM_COMM_WORKER, "desync", "skip"}, long_timeout(), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 3, {"where this rank expected (sequence 1, ", "the ranks issued different collectives"});
}

TEST(RingDesync, ADifferentDtypeOfTheSameSizeIsCaughtByTheFrame) {
  auto run = run_job(2, {TANDEM_COMM_WORKER, "desync", "dtype"}, long_timeout(), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 2, {"all_reduce i32", "all_reduce f32", "where this rank expected (sequence 1"});
}

TEST(RingDesync, ABroadcastFromADifferentRootIsCaughtByTheFrame) {
  // Ranks 0 and 2 broadcast from root 0, rank 1 from root 1. Rank 2 receives
  // rank 1's frame; rank 1 finds rank 0's unexpected broadcast frame at the next
  // op. Which of them fails first varies, so each rank is only required to quote
  // a broadcast frame, and the job as a whole to show both roots.
  auto run = run_job(3, {TANDEM_COMM_WORKER, "desync", "root"}, long_timeout(), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 3, {"(broadcast from root ", "where this rank expected"});
  EXPECT_NE(run.output_of(2).find("sent (sequence 1, 400 bytes (broadcast from root 1 f32, message 0)) where this "
                                  "rank expected (sequence 1, 400 bytes (broadcast from root 0 f32, message 0))"),
            std::string::npos)
      << run.output();
}

// --- TANDEM_DISTRIBUTED_DEBUG=DETAIL: fingerprints compared before each op ------------

TEST(DebugDetail, ADifferentElementCountIsNamedOnEveryRankBeforeTheOpRuns) {
  auto run = run_job(3, {TANDEM_COMM_WORKER, "desync", "count"}, long_timeout(true), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 3,
                               {"collective #1 of group 'default' differs between ranks: rank 0 issued "
                                "all_reduce(sum, f32, 100 elements) but rank 1 issued all_reduce(sum, f32, 99 elements)"});
}

TEST(DebugDetail, ASkippedCollectiveIsNamedOnEveryRank) {
  auto run = run_job(2, {TANDEM_COMM_WORKER, "desync", "skip"}, long_timeout(true), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 2,
                               {"collective #1 of group 'default' differs between ranks: rank 0 issued "
                                "all_reduce(sum, f32, 100 elements) but rank 1 issued all_reduce(sum, f32, 1000 elements)"});
}

TEST(DebugDetail, ADifferentBroadcastRootIsNamed) {
  auto run = run_job(2, {TANDEM_COMM_WORKER, "desync", "root"}, long_timeout(true), /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 2, {"rank 0 issued broadcast(f32, 100 elements, root 0) but rank 1 issued "
                                        "broadcast(f32, 100 elements, root 1)"});
}

TEST(DebugDetail, TorchDistributedDebugTurnsItOnToo) {
  auto run = run_job(2, {TANDEM_COMM_WORKER, "desync", "dtype"},
                     {{"TANDEM_COMM_TIMEOUT_MS", "120000"}, {"TORCH_DISTRIBUTED_DEBUG", "detail"}},
                     /*stop_on_failure=*/false);
  expect_every_rank_fails_with(run, 2, {"rank 0 issued all_reduce(sum, f32, 100 elements) but rank 1 issued "
                                        "all_reduce(sum, i32, 100 elements)"});
}

TEST(DebugDetail, ARankThatNeverIssuesTheCollectiveIsNamedAfterTheTimeout) {
  auto run = run_job(3, {TANDEM_COMM_WORKER, "desync", "missing"},
                     {{"TANDEM_COMM_TIMEOUT_MS", "1500"}, {"TANDEM_DISTRIBUTED_DEBUG", "DETAIL"}},
                     /*stop_on_failure=*/false);
  ASSERT_EQ(run.result.ranks.size(), 3u) << run.output();
  EXPECT_EQ(run.result.ranks[1].exit_code, 0) << run.output();
  for (int r : {0, 2}) {
    EXPECT_EQ(run.result.ranks[r].exit_code, 2) << run.output();
    EXPECT_NE(run.output_of(r).find("all_reduce(sum, f32, 1000 elements): rank(s) 1 did not issue a collective #1"),
              std::string::npos)
        << run.output();
  }
}

TEST(DebugDetail, MatchingCollectivesGiveTheReferenceResults) {
  // The full collectives check (every op, dtype and size against the closed-form reference) with the wrapper on.
  auto run = run_job(3, {TANDEM_COMM_WORKER, "collectives", "--backend", "ring"}, long_timeout(true));
  EXPECT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
  for (int r = 0; r < 3; ++r) EXPECT_NE(run.output_of(r).find(", 0 wrong"), std::string::npos) << run.output();
}

TEST(DebugDetail, AnUnknownLevelIsAnErrorNamingTheVariable) {
  auto run = run_job(1, {TANDEM_COMM_WORKER, "rendezvous"}, {{"TANDEM_DISTRIBUTED_DEBUG", "verbose"}});
  EXPECT_EQ(run.result.exit_code, 2) << run.output();
  EXPECT_NE(run.output().find("TANDEM_DISTRIBUTED_DEBUG='verbose' is not a debug level (OFF, INFO, DETAIL)"),
            std::string::npos)
      << run.output();
}

}  // namespace
}  // namespace tandem
