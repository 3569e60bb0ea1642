// `tandem train` with the step profiler and the trace on, end to end: the
// real binary trains a tiny model for a few steps on a generated TSV data set
// (2 ranks under the launcher, or 1 process), and the files it leaves are
// checked for presence, structure and internal consistency (never for how
// long anything took).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "profile/phase.h"
#include "tests/comm/run_job.h"
#include "tests/testing/require_gpu.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class TrainProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("tandem_profile_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Two classes anyone can tell apart by their words.
    const char* words[2][4] = {{"red", "apple", "cherry", "rose"}, {"blue", "sky", "ocean", "ice"}};
    for (const char* split : {"train", "test"}) {
      std::ofstream f(dir_ / fmt::format("{}.tsv", split));
      const int n = std::string(split) == "train" ? 96 : 16;
      for (int i = 0; i < n; ++i) {
        const int c = i % 2;
        f << (c ? "cold" : "warm") << "\t" << words[c][i % 4] << " " << words[c][(i + 1) % 4] << " "
          << words[c][(i + 3) % 4] << "\n";
      }
    }
  }
  void TearDown() override {
    if (!HasFailure() && !std::getenv("KEEP")) fs::remove_all(dir_);
  }

  JobRun train(int nproc, std::vector<std::string> extra = {}) {
    std::vector<std::string> cmd = {TANDEM_BINARY, "train", "--quiet"};
    // The host-timed CPU profile: on a GPU machine device=auto would pick cuda, whose device phases
    // are timed by events and whose batches are copied.
    for (std::string kv : {"device=cpu", "data.format=tsv", "per_device_train_batch_size=4", "per_device_eval_batch_size=8",
                           "max_steps=6", "logging_steps=3", "eval_strategy=no", "save_steps=0",
                           "dataloader_num_workers=1", "model.d_model=16", "model.n_heads=2", "model.num_layers=1",
                           "model.dim_feedforward=32", "model.max_seq_len=8", "data.vocab_min_freq=1",
                           "profile_steps=3", "profile_skip_first=1", "trace=true"}) {
      cmd.push_back("--set");
      cmd.push_back(kv);
    }
    for (const std::string& kv : {"output_dir=" + (dir_ / "run").string(), "data.train_path=" + (dir_ / "train.tsv").string(),
                                  "data.test_path=" + (dir_ / "test.tsv").string()}) {
      cmd.push_back("--set");
      cmd.push_back(kv);
    }
    for (const std::string& kv : extra) {
      cmd.push_back("--set");
      cmd.push_back(kv);
    }
    return run_job(nproc, cmd, {}, true, std::chrono::seconds(120));
  }
  fs::path run_dir() const { return dir_ / "run"; }

  fs::path dir_;
};

// The phases, "other" and the step agree, for every detailed step of a rank.
void expect_consistent_steps(const nlohmann::json& profile, bool with_comm) {
  const auto& steps = profile["steps"];
  ASSERT_EQ(steps.size(), 3u) << profile.dump(1);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    EXPECT_EQ(s["step"], static_cast<int>(i) + 2) << "profile_skip_first=1 leaves out step 1";
    double sum = s["other_ms"].get<double>();
    for (profile::Phase p : profile::kAllPhases) sum += s[std::string(profile::phase_name(p)) + "_ms"].get<double>();
    EXPECT_NEAR(sum, s["step_ms"].get<double>(), 1e-6 * std::max(1.0, s["step_ms"].get<double>()));
    EXPECT_GT(s["forward_ms"].get<double>(), 0.0);
    EXPECT_GT(s["backward_compute_ms"].get<double>(), 0.0);
    EXPECT_EQ(s["h2d_ms"].get<double>(), 0.0) << "a CPU batch is never copied";
    EXPECT_EQ(s["timing"], "host");
    EXPECT_EQ(s["comm_ms"].is_null(), !with_comm) << s.dump();
    EXPECT_GT(s["peak_memory_bytes"].get<int64_t>(), 0);
  }
  EXPECT_EQ(profile["summary"]["steps"], 3);
}

TEST_F(TrainProfile, TwoRanksWriteTheirProfilesAndTracesAndRank0MergesThem) {
  JobRun run = train(2);
  ASSERT_EQ(run.result.exit_code, 0) << run.output();

  int total_events = 0;
  for (int rank = 0; rank < 2; ++rank) {
    nlohmann::json profile = read_json(run_dir() / fmt::format("profile_rank{}.json", rank));
    EXPECT_EQ(profile["rank"], rank);
    EXPECT_EQ(profile["world_size"], 2);
    expect_consistent_steps(profile, /*with_comm=*/true);

    nlohmann::json trace = read_json(run_dir() / fmt::format("trace_rank{}.json", rank));
    EXPECT_EQ(trace["otherData"]["rank"], rank);
    total_events += static_cast<int>(trace["traceEvents"].size());
    std::set<std::string> lanes, steps, phases;
    std::set<std::string> bucket_params;
    int buckets = 0;
    for (const auto& e : trace["traceEvents"]) {
      EXPECT_EQ(e["pid"], rank + 1);
      if (e["ph"] == "M") {
        if (e["name"] == "thread_name") lanes.insert(e["args"]["name"].get<std::string>());
        continue;
      }
      ASSERT_EQ(e["ph"], "X");
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      const std::string name = e["name"];
      if (name.rfind("step ", 0) == 0) steps.insert(name);
      if (name.rfind("allreduce bucket ", 0) == 0) {
        ++buckets;
        const auto& a = e["args"];
        EXPECT_GT(a["bytes"].get<int64_t>(), 0);
        EXPECT_EQ(a["num_params"].get<size_t>(), a["params"].size());
        for (const auto& p : a["params"]) bucket_params.insert(p.get<std::string>());
      } else if (e["args"].contains("clock")) {
        phases.insert(name);
      }
    }
    EXPECT_EQ(lanes, (std::set<std::string>{"steps", "host", "compute", "comm", "optimizer", "loader worker 0"}));
    EXPECT_EQ(steps, (std::set<std::string>{"step 2", "step 3", "step 4"}));
    EXPECT_GE(buckets, 3) << "at least one bucket all-reduce per traced step";
    EXPECT_TRUE(bucket_params.count("head.weight") && bucket_params.count("embed.token.weight"));
    for (const char* p : {"data_wait", "forward", "backward_compute", "comm_wait", "optimizer", "logging"})
      EXPECT_TRUE(phases.count(p)) << p;  // step 3 is a logging step
  }

  nlohmann::json merged = read_json(run_dir() / "trace.json");
  EXPECT_EQ(static_cast<int>(merged["traceEvents"].size()), total_events);
  EXPECT_EQ(merged["otherData"]["ranks"], (std::vector<int>{0, 1}));
  std::set<int> pids;
  double last = -1;
  for (const auto& e : merged["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M") continue;
    EXPECT_GE(e["ts"].get<double>(), last);
    last = e["ts"].get<double>();
  }
  EXPECT_EQ(pids, (std::set<int>{1, 2}));

  // `tandem trace merge` gives the same timeline from the per-rank files.
  const fs::path again = dir_ / "again.json";
  const std::string cmd = fmt::format("{} trace merge {} -o {} > /dev/null", TANDEM_BINARY, run_dir().string(),
                                      again.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(read_json(again), merged);
}

TEST_F(TrainProfile, MetricsCarryThePhaseColumnsAtEveryLoggingStep) {
  JobRun run = train(2);
  ASSERT_EQ(run.result.exit_code, 0) << run.output();
  std::vector<nlohmann::json> lines = read_jsonl(run_dir() / "metrics.jsonl");
  int train_lines = 0;
  for (const auto& j : lines) {
    if (j["kind"] != "train") continue;
    ++train_lines;
    for (profile::Phase p : profile::kAllPhases)
      EXPECT_TRUE(j[std::string(profile::phase_name(p)) + "_ms"].is_number()) << j.dump();
    for (const char* k : {"step_ms", "other_ms", "comm_ms", "overlap_pct", "peak_memory_mb"})
      EXPECT_TRUE(j[k].is_number()) << k << " in " << j.dump();
    EXPECT_GT(j["logging_ms"].get<double>(), 0.0) << "the window's logging step read the loss";
  }
  EXPECT_EQ(train_lines, 2);  // steps 3 and 6
  std::ifstream csv(run_dir() / "train_log.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "step,epoch,loss,learning_rate,grad_norm,samples_per_second,forward_ms,backward_compute_ms,"
            "backward_comm_ms,overlap_ms,data_wait_ms,elapsed_s,step_ms,h2d_ms,comm_wait_ms,optimizer_ms,logging_ms,"
            "other_ms,comm_ms,overlap_pct,peak_memory_mb");
}

TEST_F(TrainProfile, OneProcessProfilesWithoutCommunication) {
  JobRun run = train(1, {"profile_dir=" + (dir_ / "prof").string()});
  ASSERT_EQ(run.result.exit_code, 0) << run.output();
  expect_consistent_steps(read_json(dir_ / "prof" / "profile_rank0.json"), /*with_comm=*/false);
  nlohmann::json trace = read_json(dir_ / "prof" / "trace.json");
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_NE(e["tid"], 4) << "no comm lane without DDP";
    EXPECT_NE(e["name"], "comm_wait");
  }
  EXPECT_FALSE(fs::exists(run_dir() / "trace_rank0.json")) << "profile_dir, not output_dir";
}

TEST_F(TrainProfile, OnAGpuTheDevicePhasesAreTimedByEventsAndTheBatchIsCopied) {
  // The H200 run of 2026-11-27 showed this path before the fixture pinned the CPU: device timing,
  // a nonzero copy of each batch, and other_ms = step - the host's phase times (not the device's).
  TANDEM_REQUIRE_GPU();
  JobRun run = train(1, {"device=cuda", "profile_dir=" + (dir_ / "prof").string()});
  ASSERT_EQ(run.result.exit_code, 0) << run.output();
  const nlohmann::json profile = read_json(dir_ / "prof" / "profile_rank0.json");
  const auto& steps = profile["steps"];
  ASSERT_EQ(steps.size(), 3u) << profile.dump(1);
  for (const auto& s : steps) {
    EXPECT_EQ(s["timing"], "device") << s.dump();
    EXPECT_GT(s["h2d_ms"].get<double>(), 0.0) << s.dump();
    EXPECT_GT(s["forward_ms"].get<double>(), 0.0) << s.dump();
    double host = 0;
    for (const auto& [phase, ms] : s["host_ms"].items()) host += ms.get<double>();
    EXPECT_NEAR(s["other_ms"].get<double>(), s["step_ms"].get<double>() - host, 1e-6) << s.dump();
  }
}

}  // namespace
}  // namespace tandem::testing
