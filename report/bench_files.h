// The files the bench commands write and `tandem report` reads: one JSON
// document per benchmark (buckets.json, scaling.json, step.json,
// find_batch_size.json), each with "kind", "version" and "meta" (machine,
// date, command), so a result never loses where it came from.
//
// Reading is strict: a missing key, a wrong type or an unknown kind is an
// error naming the file and the place in it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/profile.h"

namespace tandem::report {

struct Machine {
  std::string cpu;  // model name from /proc/cpuinfo
  int cores = 0;    // online CPUs
  double memory_gib = 0;
  std::string gpu;          // "" when none
  double load_average = 0;  // 1-minute load average when the run started (others' work on a shared machine)
};

struct BenchMeta {
  std::string date;     // UTC, ISO 8601
  std::string command;  // the command line that produced the file
  std::string tandem_version;
  Machine machine;
};

// This machine, now, and the given command line.
BenchMeta current_meta(const std::string& command);
nlohmann::json to_json(const BenchMeta& m);

struct BucketsBench {
  BenchMeta meta;
  double current_cap_mb = 25;  // the configuration's own ddp_bucket_cap_mb
  int rounds = 1;              // interleaved repeats of the whole sweep
  std::vector<Profile> cases;  // in sweep order
};

struct TrainRun {
  int world_size = 1;
  std::string dir;  // output_dir of a full training run (relative to the bench file's folder)
};

struct ScalingBench {
  BenchMeta meta;
  std::string mode = "weak";  // weak: fixed per-device batch; strong: fixed global batch
  int rounds = 1;
  std::vector<Profile> cases;  // one per world size
  std::vector<TrainRun> runs;  // full training runs (--train), if any
};

struct StepBench {
  BenchMeta meta;
  int rounds = 1;
  std::vector<Profile> cases;  // one per precision
};

struct BatchTrial {
  int64_t batch = 0;
  bool fits = false;
  int64_t peak_bytes = 0;
  std::string error;  // why it did not fit
};

struct BatchSearch {
  BenchMeta meta;
  std::string config;
  std::string device;
  int64_t memory_limit_bytes = 0;  // 0: the device's own memory
  int64_t max_batch = 0;           // largest that fits (0: not even the smallest tried)
  bool hit_upper_bound = false;    // the search stopped at --max-batch, not at a failure
  std::vector<BatchTrial> trials;  // in the order they ran
};

nlohmann::json to_json(const Profile& p);
Profile profile_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const RunFacts& f);
RunFacts facts_from_json(const nlohmann::json& j);
// Samples as columns ({"step_ms": [...], ...}), the ranks' raw output.
nlohmann::json to_json(const std::vector<StepSample>& samples);
std::vector<StepSample> samples_from_json(const nlohmann::json& j);

nlohmann::json to_json(const BucketsBench& b);
nlohmann::json to_json(const ScalingBench& b);
nlohmann::json to_json(const StepBench& b);
nlohmann::json to_json(const BatchSearch& b);

// Everything found in a bench folder; each file is optional.
struct BenchFolder {
  std::optional<BucketsBench> buckets;
  std::optional<ScalingBench> scaling;
  std::optional<StepBench> step;
  std::optional<BatchSearch> batch_search;
};

// Parses one file by its "kind" into `folder`; errors name the file.
void read_bench_file(const std::filesystem::path& path, BenchFolder& folder);
// Reads buckets.json, scaling.json, step.json and find_batch_size.json where present.
BenchFolder read_bench_folder(const std::filesystem::path& dir);

// Writes `j` (pretty-printed) atomically.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace tandem::report
