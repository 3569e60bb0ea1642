// The launcher: rank variables, stopping everyone when one rank fails, job
// timeouts, a stop asked for before the ranks start, and the `tandem launch`
// command line.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <sys/wait.h>

#include "comm/launcher.h"
#include "tests/comm/run_job.h"

namespace tandem {
namespace {

using testing::run_job;

TEST(Launcher, EveryRankGetsItsVariables) {
  auto run = run_job(3, {"/bin/sh", "-c",
                         "echo vars $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $TANDEM_STORE_HOSTED"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.message << run.output();
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(run.output_of(r).find("vars " + std::to_string(r) + " " + std::to_string(r) + " 3 3 127.0.0.1 1"),
              std::string::npos)
        << run.output();
}

TEST(Launcher, SecondNodeRanksAreOffsetByTheNodeRank) {
  std::vector<std::pair<int, std::string>> lines;
  comm::LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_port = 1;  // not contacted: node 1 does not host the store
  o.command = {"/bin/sh", "-c", "echo $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE port $MASTER_PORT"};
  o.timeout = std::chrono::seconds(30);
  o.on_line = [&](int rank, bool, const std::string& line) { lines.emplace_back(rank, line); };
  auto result = comm::launch(o);
  ASSERT_EQ(result.exit_code, 0) << result.message;
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::make_pair(2, std::string("2/6 local 0/2 port 1")));
  EXPECT_EQ(lines[1], std::make_pair(3, std::string("3/6 local 1/2 port 1")));
}

TEST(Launcher, AFailingRankStopsTheOthersAndIsNamedWithItsExitCode) {
  auto run = run_job(3, {"/bin/sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60"});
  EXPECT_EQ(run.result.exit_code, 3);
  EXPECT_EQ(run.result.failed_rank, 1);
  EXPECT_NE(run.result.message.find("rank 1 exited with code 3"), std::string::npos) << run.result.message;
  for (int r : {0, 2}) {
    EXPECT_TRUE(run.result.ranks[r].stopped_by_launcher);
    EXPECT_EQ(run.result.ranks[r].exit_code, -SIGTERM);
  }
}

TEST(Launcher, ARankKilledByASignalIsReported) {
  auto run = run_job(2, {"/bin/sh", "-c", "if [ $RANK = 0 ]; then kill -9 $$; fi; exec sleep 60"});
  EXPECT_EQ(run.result.exit_code, 128 + 9);
  EXPECT_NE(run.result.message.find("rank 0 was killed by signal 9"), std::string::npos) << run.result.message;
}

TEST(Launcher, TheJobTimeoutStopsEveryRank) {
  auto run = run_job(2, {"/bin/sh", "-c", "exec sleep 60"}, {}, true, std::chrono::milliseconds(300));
  EXPECT_EQ(run.result.exit_code, 124);
  EXPECT_NE(run.result.message.find("did not finish within 300 ms"), std::string::npos) << run.result.message;
}

TEST(Launcher, AStopAskedForBeforeTheRanksStartStartsNoneAndSaysWhy) {
  // SIGTERM or Ctrl-C while the job is being set up (tandem launch's
  // handlers call request_launch_stop): no rank may start after it.
  comm::request_launch_stop(SIGTERM);
  auto run = run_job(3, {"/bin/sh", "-c", "exec sleep 60"});
  EXPECT_EQ(run.result.exit_code, 128 + SIGTERM);
  EXPECT_TRUE(run.result.ranks.empty());
  EXPECT_NE(run.result.message.find("interrupted by signal 15 before any rank started"), std::string::npos)
      << run.result.message;
  EXPECT_EQ(run_job(1, {"/bin/true"}).result.exit_code, 0) << "the stop was taken, not left for the next job";
}

TEST(Launcher, AMissingProgramIsAnErrorNamingIt) {
  auto run = run_job(1, {"/nonexistent/program"});
  EXPECT_EQ(run.result.exit_code, 127);
  EXPECT_NE(run.output().find("cannot run '/nonexistent/program' for rank 0"), std::string::npos) << run.output();
}

// Runs a shell command line, returning its exit status and combined output.
int shell(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, k);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LaunchCommand, PrefixesOutputAndExitsWithTheFailingRanksCode) {
  // Rank 1 fails only after rank 0 has printed (a marker file), since a failing
  // rank makes the launcher stop the others, possibly before they print.
  const std::string marker = fmt::format("/tmp/tandem_launch_marker_{}", ::getpid());
  std::remove(marker.c_str());
  std::string out;
  int code = shell(std::string("timeout 60 ") + TANDEM_BINARY +
                       " launch --nproc-per-node 2 --prefix-output -- /bin/sh -c 'echo hello; if [ $RANK = 0 ]; "
                       "then touch " + marker + "; else while [ ! -e " + marker + " ]; do sleep 0.01; done; fi; "
                       "exit $((RANK * 5))'",
                   &out);
  std::remove(marker.c_str());
  EXPECT_EQ(code, 5) << out;
  EXPECT_NE(out.find("[rank 0] hello"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] hello"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 exited with code 5"), std::string::npos) << out;
}

TEST(LaunchCommand, RunsRingRanksEndToEnd) {
  std::string out;
  int code = shell(std::string("timeout 120 ") + TANDEM_BINARY + " launch --nproc-per-node 2 -- " +
                       TANDEM_COMM_WORKER + " rendezvous",
                   &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("rank 1: rendezvous ok (rank 1/2 (local 1/2) from tandem launch"), std::string::npos) << out;
}

// 4000 took 32 s of forking; 100000 never finished.
TEST(LaunchCommand, ANegativeOrNanTimeoutIsAnErrorNamingTheOption) {
  for (const char* value : {"-1", "nan", "1e10"}) {
    std::string out;
    const int code = shell(std::string("timeout 30 ") + TANDEM_BINARY + " launch --nproc-per-node 1 --timeout " +
                               value + " -- true",
                           &out);
    EXPECT_EQ(code, 1) << value << ": " << out;
    EXPECT_NE(out.find("--timeout must be in [0, 1e9] seconds (0: never), got "), std::string::npos) << out;
  }
}

TEST(LaunchCommand, MoreRanksPerNodeThanTheLimitIsAnErrorNamingTheOption) {
  std::string out;
  int code = shell(std::string("timeout 30 ") + TANDEM_BINARY + " launch --nproc-per-node 4000 -- true", &out);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, 124) << "timed out";
  EXPECT_NE(out.find("--nproc-per-node: Value 4000 not in range 1 to 1024"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem
