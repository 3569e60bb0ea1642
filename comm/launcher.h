// The process launcher behind `tandem launch`: one process per local rank.
//
// Each child gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and TANDEM_LAUNCH=1 (see comm/rank_env.h). The
// launcher of node 0 hosts the job's store itself (so a free port can be
// picked without races, and the store outlives any rank); it then also sets
// TANDEM_STORE_HOSTED=1, and TANDEM_STORE_TOKEN (a fresh random token on a
// single node unless one is set; across nodes the user exports one).
//
// If a rank fails (non-zero exit or a signal), the launcher stops the others
// (SIGTERM, then SIGKILL after a grace period) and reports the rank and its
// exit code; a job-wide timeout does the same. Children run in their own
// process group and die with the launcher (PR_SET_PDEATHSIG), so nothing is
// left behind. Output lines may be prefixed with "[rank N] ".
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tandem::comm {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (single node only)
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // added to every rank's environment, overriding the computed variables
  bool host_store = true;                  // false: rank 0 hosts the store (needs a master_port)
  bool prefix_output = false;
  bool stop_on_failure = true;
  std::chrono::milliseconds timeout{0};  // stop everything after this long; 0: never
  std::chrono::milliseconds grace{5000};
  // When set, children's output is captured and handed over line by line
  // (instead of being printed); tests use it.
  std::function<void(int rank, bool is_stderr, const std::string& line)> on_line;
};

struct RankExit {
  int rank = -1;
  int exit_code = 0;  // the process's exit status, or -signal when a signal ended it
  bool stopped_by_launcher = false;
};

struct LaunchResult {
  int exit_code = 0;    // 0 when every rank succeeded; else the failing rank's code (128+signal), 124 on timeout
  int failed_rank = -1;
  std::string message;  // names the failing rank and how it ended
  std::vector<RankExit> ranks;
};

LaunchResult launch(const LaunchOptions& options);

// Asks a running launch() to stop every rank (async-signal-safe: for SIGINT/SIGTERM handlers).
void request_launch_stop(int signal_number);

}  // namespace tandem::comm
