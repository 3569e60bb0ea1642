// Runs a multi-process job on localhost for a test: the launcher library
// starts the ranks (ephemeral store port, every rank's output captured), and
// a job timeout kills everything, so a test can fail but never hang.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "comm/launcher.h"

namespace tandem::testing {

struct JobRun {
  comm::LaunchResult result;
  std::vector<std::pair<int, std::string>> lines;  // (rank, line), stdout and stderr
  std::string output() const {
    std::string out;
    for (const auto& [rank, line] : lines) out += "[rank " + std::to_string(rank) + "] " + line + "\n";
    return out;
  }
  std::string output_of(int rank) const {
    std::string out;
    for (const auto& [r, line] : lines)
      if (r == rank) out += line + "\n";
    return out;
  }
};

inline JobRun run_job(int nproc, std::vector<std::string> command, std::map<std::string, std::string> env = {},
                      bool stop_on_failure = true, std::chrono::milliseconds timeout = std::chrono::seconds(150)) {
  JobRun run;
  std::mutex mutex;
  comm::LaunchOptions o;
  o.nproc_per_node = nproc;
  o.command = std::move(command);
  o.env = std::move(env);
  o.stop_on_failure = stop_on_failure;
  o.timeout = timeout;
  o.grace = std::chrono::seconds(2);
  o.on_line = [&](int rank, bool, const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    run.lines.emplace_back(rank, line);
  };
  run.result = comm::launch(o);
  return run;
}

}  // namespace tandem::testing
