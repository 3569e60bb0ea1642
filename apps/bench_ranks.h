// How the multi-rank benchmarks run: the parent (`tandem bench buckets`,
// `scaling`, `step`) writes a WorkerSpec into a run folder and starts N copies
// of this same binary as ranks through the launcher library (like
// `tandem launch`), each running `tandem bench worker --spec FILE`. Every rank
// times the spec's cases with a StepRunner and writes rank<r>.json into the
// folder; the parent reads them all and combines each case into a Profile
// (report::aggregate). A failing or hung rank fails the whole run with the
// launcher's message naming it (the job has a timeout).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "train/step_runner.h"
#include "report/profile.h"

namespace tandem::apps {

struct WorkerSpec {
  std::string config;  // YAML path, as the user gave it (ranks run in the same folder)
  std::vector<std::string> overrides;
  std::vector<train::StepCase> cases;
  int warmup = 5;
  int steps = 20;
  int rounds = 1;  // the case list is run this many times, rotated each round; samples pooled
  bool synthetic = false;
  double synthetic_real_fraction = 1.0;  // train::StepRunnerOptions'
  bool time_checkpoint = true;   // rank 0 times one checkpoint save after the cases
  std::string train_output_dir;  // when set: after the cases, a full `tandem train` run writing there
  std::string out_dir;           // where rank<r>.json go
};

// What the ranks of one run reported, before combining.
struct RankResults {
  std::vector<report::RunFacts> facts;                                // per case (rank 0's)
  std::vector<std::vector<std::vector<report::StepSample>>> samples;  // [case][rank][step]
  std::vector<std::vector<int64_t>> peak_memory;                      // [case][rank]
  double checkpoint_ms = -1;
  int warmup = 0;

  // Appends another run's samples of the same cases and world size (a later round).
  void append(const RankResults& other);
  // One Profile per case, in spec order.
  std::vector<report::Profile> profiles() const;
};

// Runs the spec on `nproc` ranks.
RankResults run_bench_ranks(int nproc, const WorkerSpec& spec, std::chrono::seconds timeout);

// The body of `tandem bench worker` (one rank).
void run_bench_worker(const std::string& spec_path);

// Comma-separated lists ("0.5,1,25,one") and the program's own path, for the bench commands.
std::vector<std::string> split_list(const std::string& text);
// A comma-separated list of world sizes ("1,2,4"); an entry that is not a
// positive integer is an error naming `option` and the entry.
std::vector<int> parse_rank_counts(const std::string& text, const std::string& option);
std::string self_executable();
// The bench commands start their own ranks: refuse to run as a rank of someone else's launch.
void require_not_launched(const char* command);
// This process's command line (from /proc/self/cmdline), for the result files' provenance.
std::string command_line();

}  // namespace tandem::apps
