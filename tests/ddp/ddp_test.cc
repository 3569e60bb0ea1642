// DistributedDataParallel across real processes (the launcher starts
// tests/ddp/ddp_worker ranks over the ring backend on localhost), checked
// against a single process that trains the same model on the full batch.
//
// Tolerance: the ring sums each bucket in a different order than one process
// sums its batch, so parameters agree to f32 rounding after a few steps:
// atol 1e-6 + rtol 1e-5. Ranks must agree with each other bit for bit (every
// rank ends the all-reduce with the same bytes). On a GPU, cuBLAS's f32 GEMMs
// sum in yet another order than the CPU reference: atol 1e-5 + rtol 1e-4.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "comm/launcher.h"
#include "core/safetensors.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "optim/clip_grad.h"
#include "tests/comm/ring_testing.h"
#include "tests/ddp/ddp_scenario.h"
#include "tests/testing/gradcheck.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

struct RanksRun {
  comm::LaunchResult result;
  std::vector<NamedTensors> params;
  std::vector<nlohmann::json> stats;
  std::string stderr_text;
  std::vector<std::string> stderr_of;  // per rank
};

class DdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("tandem_ddp_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `env` is added to every rank's; with stop_on_failure false, a failing rank
  // does not stop the others, so each rank's own error can be checked.
  RanksRun launch_ranks(int world, std::vector<std::string> args, std::map<std::string, std::string> env = {},
                        bool stop_on_failure = true) {
    comm::LaunchOptions o;
    o.env = std::move(env);
    o.stop_on_failure = stop_on_failure;
    o.nproc_per_node = world;
    o.command = {TANDEM_DDP_WORKER};
    o.command.insert(o.command.end(), args.begin(), args.end());
    o.command.push_back("--out-dir");
    o.command.push_back(dir_.string());
    o.timeout = std::chrono::seconds(90);
    RanksRun r;
    o.on_line = [&](int rank, bool is_stderr, const std::string& line) {
      if (is_stderr) r.stderr_text += fmt::format("[rank {}] {}\n", rank, line);
      if (is_stderr && rank >= 0) {
        if (r.stderr_of.size() <= static_cast<size_t>(rank)) r.stderr_of.resize(static_cast<size_t>(rank) + 1);
        r.stderr_of[static_cast<size_t>(rank)] += line + "\n";
      }
    };
    r.result = comm::launch(o);
    if (r.result.exit_code == 0) {
      for (int k = 0; k < world; ++k) {
        r.params.push_back(load_safetensors((dir_ / fmt::format("params_rank{}.safetensors", k)).string()));
        std::ifstream in(dir_ / fmt::format("stats_rank{}.json", k));
        r.stats.push_back(nlohmann::json::parse(in));
      }
    }
    return r;
  }

  fs::path dir_;
};

// One process, the whole global batch of every step in one forward (or, when
// ranks use the branch differently, each rank's slice with its own choice and
// the losses averaged, which is what DDP's gradient average computes).
NamedTensors reference(int world, int64_t steps, int64_t batch, int64_t micro, const std::string& branch,
                       double lr = 0.05) {
  ScenarioMlp model(1);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t rows = world * micro * batch;
    if (branch == "never" || branch == "always") {
      mse(model.forward(scenario_inputs(s, 0, rows), branch == "always"), scenario_targets(s, 0, rows)).backward();
    } else {
      // Each rank's micro-steps with its own choice: the mean over ranks of the
      // mean over micro-steps, which is what accumulation plus DDP's average computes.
      Tensor total;
      for (int r = 0; r < world; ++r) {
        for (int64_t m = 0; m < micro; ++m) {
          const int64_t first = (m * world + r) * batch;
          Tensor l = mse(model.forward(scenario_inputs(s, first, batch), scenario_branch_used(branch, s, r, m),
                                       0, scenario_branch_gradient_cut(branch, r)),
                         scenario_targets(s, first, batch));
          total = total.defined() ? kernels::add(total, l) : l;
        }
      }
      kernels::scale(total, 1.0 / static_cast<double>(world * micro)).backward();
    }
    sgd_step(model, lr);
  }
  return model.state_dict();
}

void expect_matches_reference(const RanksRun& run, const NamedTensors& ref, double atol = 1e-6, double rtol = 1e-5) {
  ASSERT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.stderr_text;
  for (size_t r = 0; r < run.params.size(); ++r) {
    for (const auto& [name, t] : ref.tensors) {
      const Tensor* got = run.params[r].find(name);
      ASSERT_NE(got, nullptr) << name;
      EXPECT_TRUE(all_close(*got, t, atol, rtol)) << "rank " << r << " " << name;
      if (r > 0) {
        EXPECT_EQ(got->to_double_vector(), run.params[0].find(name)->to_double_vector())
            << "ranks 0 and " << r << " disagree on " << name;
      }
    }
  }
}

// One process, AdamW (decay on matrices) on the whole global batch of every step, optionally clipped.
NamedTensors reference_adamw(int world, int64_t steps, int64_t batch, double lr, double clip = 0) {
  ScenarioMlp model(1);
  auto adamw = scenario_adamw(model, lr);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t rows = world * batch;
    mse(model.forward(scenario_inputs(s, 0, rows), true), scenario_targets(s, 0, rows)).backward();
    if (clip > 0) optim::clip_grad_norm_(adamw->params(), clip);
    adamw->step();
    adamw->zero_grad();
  }
  return model.state_dict();
}

TEST_F(DdpTest, ZeroOneAtTwoAndThreeRanksEqualsOneProcessWithTheFullBatch) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    expect_matches_reference(launch_ranks(world, {"--zero", "--optimizer", "adamw", "--steps", "4", "--lr", "0.01"}),
                             reference_adamw(world, 4, 4, 0.01));
  }
}

TEST_F(DdpTest, ZeroOneEqualsPlainDdpWithAdamW) {
  RanksRun ddp = launch_ranks(2, {"--optimizer", "adamw", "--steps", "4", "--lr", "0.01"});
  ASSERT_EQ(ddp.result.exit_code, 0) << ddp.stderr_text;
  expect_matches_reference(launch_ranks(2, {"--zero", "--optimizer", "adamw", "--steps", "4", "--lr", "0.01"}),
                           ddp.params[0], 1e-6, 1e-5);
}

TEST_F(DdpTest, ZeroOneClipsByTheNormOfTheWholeGradient) {
  // 0.05 is below the scenario's gradient norm, so every step clips.
  expect_matches_reference(
      launch_ranks(3, {"--zero", "--optimizer", "adamw", "--steps", "3", "--lr", "0.01", "--clip", "0.05"}),
      reference_adamw(3, 3, 4, 0.01, 0.05));
}

TEST_F(DdpTest, ZeroOneShardsCoverTheParametersAndDivideTheOptimizerStateByTheWorldSize) {
  ScenarioMlp model(1);
  auto unsharded = scenario_adamw(model, 0.01);
  mse(model.forward(scenario_inputs(0, 0, 4), true), scenario_targets(0, 0, 4)).backward();
  unsharded->step();
  int64_t full_bytes = 0, elements = 0;
  for (const auto& [name, t] : unsharded->state_dict()) full_bytes += t.numel() * 4;
  for (const Tensor& p : model.parameters()) elements += p.numel();
  const auto num_params = static_cast<int64_t>(model.parameters().size());

  const int world = 3;
  RanksRun r = launch_ranks(world, {"--zero", "--optimizer", "adamw", "--steps", "1"});
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  const int64_t shard = (elements + world - 1) / world;
  int64_t moment_bytes = 0;
  for (int k = 0; k < world; ++k) {
    EXPECT_EQ(r.stats[k]["elements"].get<int64_t>(), elements);
    EXPECT_EQ(r.stats[k]["shard_begin"].get<int64_t>(), k * shard);  // contiguous, in rank order
    EXPECT_EQ(r.stats[k]["shard_end"].get<int64_t>(), (k + 1) * shard);
    const int64_t bytes = r.stats[k]["state_bytes"].get<int64_t>();
    // Two f32 moments per shard element, plus a 4-byte step count per piece (at most one per parameter).
    const int64_t own = std::max<int64_t>(0, std::min(elements, (k + 1) * shard) - k * shard);
    EXPECT_GE(bytes, own * 8 + 4);
    EXPECT_LE(bytes, own * 8 + 4 * num_params);
    EXPECT_LT(bytes, full_bytes / world + 4 * num_params);
    moment_bytes += own * 8;
  }
  EXPECT_EQ(moment_bytes, elements * 8);  // together the shards hold the unsharded optimizer's moments once
  EXPECT_EQ(full_bytes, elements * 8 + num_params * 4);
}

TEST_F(DdpTest, TwoThreeAndFourRanksEqualOneProcessWithTheFullBatch) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE(world);
    expect_matches_reference(launch_ranks(world, {"--steps", "3", "--batch", "4"}), reference(world, 3, 4, 1, "always"));
  }
}

TEST_F(DdpTest, OneBucketPerParameterEqualsTheFullBatch) {
  expect_matches_reference(launch_ranks(2, {"--steps", "3", "--bucket-cap-mb", "0", "--first-bucket-mb", "0"}),
                           reference(2, 3, 4, 1, "always"));
}

TEST_F(DdpTest, OneBucketForEverythingEqualsTheFullBatch) {
  expect_matches_reference(launch_ranks(3, {"--steps", "3", "--bucket-cap-mb", "100000", "--first-bucket-mb", "100000"}),
                           reference(3, 3, 4, 1, "always"));
}

TEST_F(DdpTest, SmallBucketsThatHoldSeveralParametersEqualTheFullBatch) {
  // ~1 KiB buckets: the 12x24 and 24x24 weights each fill one, biases are grouped.
  expect_matches_reference(launch_ranks(2, {"--steps", "3", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005"}),
                           reference(2, 3, 4, 1, "always"));
}

TEST_F(DdpTest, GradientAsBucketViewEqualsTheFullBatch) {
  for (const char* cap : {"0", "25"}) {
    SCOPED_TRACE(cap);
    expect_matches_reference(launch_ranks(2, {"--steps", "3", "--grad-view", "--bucket-cap-mb", cap}),
                             reference(2, 3, 4, 1, "always"));
  }
}

TEST_F(DdpTest, NoSyncAccumulationOverFourMicroStepsEqualsTheLargeBatch) {
  for (bool view : {false, true}) {
    SCOPED_TRACE(view);
    std::vector<std::string> args = {"--steps", "2", "--micro", "4", "--batch", "3"};
    if (view) args.push_back("--grad-view");
    expect_matches_reference(launch_ranks(2, args), reference(2, 2, 3, 4, "always"));
  }
}

TEST_F(DdpTest, FindUnusedParametersHandlesABranchSkippedOnSomeRanksAndSteps) {
  RanksRun r = launch_ranks(3, {"--steps", "4", "--find-unused", "--branch", "alternate"});
  expect_matches_reference(r, reference(3, 4, 4, 1, "alternate"));
}

TEST_F(DdpTest, FindUnusedParametersLeavesAParameterNoRankUsesWithoutGradient) {
  RanksRun r = launch_ranks(2, {"--steps", "3", "--find-unused", "--branch", "never"});
  expect_matches_reference(r, reference(2, 3, 4, 1, "never"));
  ASSERT_FALSE(r.stats.empty());
  EXPECT_EQ(r.stats[0]["unused_params"].get<int>(), 2);  // branch.weight and branch.bias
}

TEST_F(DdpTest, FindUnusedParametersWithGradientAsBucketView) {
  RanksRun r = launch_ranks(2, {"--steps", "4", "--find-unused", "--grad-view", "--branch", "alternate"});
  expect_matches_reference(r, reference(2, 4, 4, 1, "alternate"));
}

TEST_F(DdpTest, FindUnusedParametersKeepsGradientsOfNoSyncMicroStepsWhereTheLastMicroStepSkipsTheBranch) {
  // The branch is used in micro-step 0 only: its gradient comes from a no_sync
  // micro-step, so the synchronising micro-step must still count it as used and
  // average it across ranks (PyTorch marks its used map in every hook, no_sync or not).
  for (bool view : {false, true}) {
    SCOPED_TRACE(view);
    std::vector<std::string> args = {"--steps", "3", "--micro", "3", "--find-unused", "--branch", "early"};
    if (view) args.push_back("--grad-view");
    expect_matches_reference(launch_ranks(2, args), reference(2, 3, 4, 3, "early"));
  }
}

TEST_F(DdpTest, AParameterNoRankUsesKeepsNoGradientAlsoWithGradientAsBucketView) {
  // As in PyTorch: a globally unused parameter's gradient is left untouched
  // (undefined), so an optimizer skips it instead of decaying it with a zero gradient.
  for (bool view : {false, true}) {
    SCOPED_TRACE(view);
    std::vector<std::string> args = {"--steps", "2", "--find-unused", "--branch", "never"};
    if (view) args.push_back("--grad-view");
    RanksRun r = launch_ranks(2, args);
    ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
    for (const auto& st : r.stats)
      EXPECT_EQ(st["without_grad"], nlohmann::json::array({"branch.weight", "branch.bias"})) << st.dump();
  }
}

TEST_F(DdpTest, StaticGraphWithABranchOnlyOneRankUses) {
  RanksRun r = launch_ranks(2, {"--steps", "3", "--static-graph", "--branch", "rank0"});
  expect_matches_reference(r, reference(2, 3, 4, 1, "rank0"));
}

TEST_F(DdpTest, WithoutFindUnusedASkippedBranchFailsWithAClearMessageNotAHang) {
  RanksRun r = launch_ranks(2, {"--steps", "2", "--branch", "rank0"});
  EXPECT_NE(r.result.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("received no gradient"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("branch.weight"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("find_unused_parameters=true"), std::string::npos) << r.stderr_text;
}

TEST_F(DdpTest, AParameterBackwardReachesWithoutAGradientOnOneRankIsReadyAndAveragedWithZeros) {
  // PyTorch's Reducer hooks the AccumulateGrad node, whose post-hook fires
  // also for an undefined gradient: the parameter is ready with zeros in its
  // bucket slot. No find_unused_parameters needed, and no "received no gradient".
  for (bool view : {false, true}) {
    SCOPED_TRACE(view);
    std::vector<std::string> args = {"--steps", "3", "--branch", "cut_rank0"};
    if (view) args.push_back("--grad-view");
    expect_matches_reference(launch_ranks(2, args), reference(2, 3, 4, 1, "cut_rank0"));
  }
}

TEST_F(DdpTest, FindUnusedCountsAParameterReachedWithoutAGradientAsUnused) {
  // Reached on every rank, but with no gradient anywhere: globally unused, so its
  // .grad is left undefined (PyTorch marks the used map only for a defined grad).
  RanksRun r = launch_ranks(2, {"--steps", "3", "--find-unused", "--branch", "cut_all"});
  expect_matches_reference(r, reference(2, 3, 4, 1, "cut_all"));
  for (const auto& st : r.stats) {
    EXPECT_EQ(st["unused_params"].get<int>(), 2) << st.dump();
    EXPECT_EQ(st["without_grad"], nlohmann::json::array({"branch.weight", "branch.bias"})) << st.dump();
  }
}

TEST_F(DdpTest, DifferentModelsOnTheRanksFailOnEveryRankNamingTheMismatch) {
  RanksRun r = launch_ranks(2, {"--steps", "1", "--mismatch"});
  EXPECT_NE(r.result.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("the model differs between ranks"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("fc1.weight f32[24, 12]"), std::string::npos) << r.stderr_text;
}

// Every rank exits non-zero, and its own stderr holds `message`.
void expect_every_rank_fails_with(const RanksRun& r, int world, const std::string& message) {
  ASSERT_EQ(static_cast<int>(r.result.ranks.size()), world) << r.stderr_text;
  for (int k = 0; k < world; ++k) {
    EXPECT_EQ(r.result.ranks[static_cast<size_t>(k)].exit_code, 2) << "rank " << k << "\n" << r.stderr_text;
    const std::string mine = static_cast<size_t>(k) < r.stderr_of.size() ? r.stderr_of[static_cast<size_t>(k)] : "";
    EXPECT_NE(mine.find(message), std::string::npos) << "rank " << k << "\n" << r.stderr_text;
  }
}

TEST_F(DdpTest, ADifferentBucketCapOnOneRankFailsOnEveryRankNamingTheRankAndTheOption) {
  // Without the check the ranks would build different buckets and all-reduce
  // different sizes. The workers' timeout is 30 s and the launcher's 90 s: the
  // error must be this one, not a timeout.
  RanksRun r = launch_ranks(3, {"--steps", "2", "--rank1-bucket-cap-mb", "0.001"}, {}, /*stop_on_failure=*/false);
  expect_every_rank_fails_with(r, 3,
                               "DDP: the DDP setup differs between ranks: bucket_cap_mb is '25' on rank 0 but '0.001' "
                               "on rank 1 (every rank must construct DistributedDataParallel with the same options)");
}

TEST_F(DdpTest, ADifferentCommHookOnOneRankFailsOnEveryRankNamingIt) {
  RanksRun r = launch_ranks(2, {"--steps", "2", "--rank1-hook", "bf16"}, {}, /*stop_on_failure=*/false);
  expect_every_rank_fails_with(r, 2, "comm_hook is 'allreduce' on rank 0 but 'bf16' on rank 1");
}

TEST_F(DdpTest, BucketsOnSharedBuffersGiveBitwiseTheParametersOfTheRing) {
  // On one host the ring reduces DDP's buckets in place in every rank's
  // memory (docs/comm.md); in the ring's order, so not a bit may change.
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  const std::vector<std::string> args = {"--steps", "3", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005"};
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    RanksRun shared = launch_ranks(world, args, {{"TANDEM_RING_SHARED_BUFFERS", "on"}});
    RanksRun ring = launch_ranks(world, args, {{"TANDEM_RING_SHARED_BUFFERS", "off"}});
    ASSERT_EQ(shared.result.exit_code, 0) << shared.stderr_text;
    ASSERT_EQ(ring.result.exit_code, 0) << ring.stderr_text;
    EXPECT_EQ(shared.stats[0]["logging_data"]["shared_buffers"], "from 0 bytes");
    EXPECT_EQ(ring.stats[0]["logging_data"]["shared_buffers"], "off: asked for");
    expect_matches_reference(shared, reference(world, 3, 4, 1, "always"));
    for (size_t k = 0; k < shared.params.size(); ++k)
      for (const auto& [name, t] : shared.params[k].tensors)
        EXPECT_EQ(t.to_double_vector(), ring.params[k].find(name)->to_double_vector()) << "rank " << k << " " << name;
  }
}

TEST_F(DdpTest, TrainingWithTheDistributedDebugModeOnGivesBitwiseTheSameParameters) {
  // TANDEM_DISTRIBUTED_DEBUG=DETAIL checks every collective's fingerprint
  // before it runs; it must not change what is computed.
  const std::vector<std::string> args = {"--steps", "3", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005",
                                         "--find-unused", "--branch", "alternate"};
  RanksRun off = launch_ranks(3, args, {{"TANDEM_DISTRIBUTED_DEBUG", "OFF"}});
  RanksRun on = launch_ranks(3, args, {{"TANDEM_DISTRIBUTED_DEBUG", "DETAIL"}});
  expect_matches_reference(on, reference(3, 3, 4, 1, "alternate"));
  ASSERT_EQ(off.result.exit_code, 0) << off.stderr_text;
  for (size_t k = 0; k < on.params.size(); ++k) {
    for (const auto& [name, t] : on.params[k].tensors)
      EXPECT_EQ(t.to_double_vector(), off.params[k].find(name)->to_double_vector()) << "rank " << k << " " << name;
  }
}

TEST_F(DdpTest, BucketsAreRebuiltInReadyOrderAndIdenticalOnAllRanks) {
  RanksRun r = launch_ranks(3, {"--steps", "2", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005"});
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  for (const auto& s : r.stats) {
    EXPECT_TRUE(s["buckets_rebuilt"].get<bool>());
    EXPECT_EQ(s["layout"], r.stats[0]["layout"]);
  }
  // The last layer's gradients are ready first, so its parameters lead the first bucket.
  const auto& order = r.stats[0]["ready_order"];
  EXPECT_EQ(order.front().get<std::string>().rfind("fc3.", 0), 0u) << order.dump();
}

TEST_F(DdpTest, ANoGradForwardOnOneRankTakesNoPartInCollectives) {
  // After the first step the bucket rebuild is due; rank 0's evaluation forward
  // (no gradients, rank 1 absent) must not run its broadcast.
  RanksRun r = launch_ranks(2, {"--steps", "1", "--eval-on-rank0"});
  expect_matches_reference(r, reference(2, 1, 4, 1, "always"));
  ASSERT_EQ(r.stats.size(), 2u);
  EXPECT_FALSE(r.stats[0]["buckets_rebuilt"].get<bool>()) << r.stats[0].dump();
}

TEST_F(DdpTest, LoggingDataRecordsTheSetupAndTheBucketsBeforeAndAfterTheRebuild) {
  RanksRun r = launch_ranks(2, {"--steps", "2", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005",
                                "--grad-view"});
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  ScenarioMlp mlp(1);
  int64_t bytes = 0;
  for (const auto& [name, p] : mlp.named_parameters()) bytes += p.nbytes();
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json& d = r.stats[static_cast<size_t>(rank)]["logging_data"];
    EXPECT_EQ(d["backend"], "ring");
    EXPECT_EQ(d["transport"], "shm");  // auto, two ranks on one host
    EXPECT_EQ(d["shared_buffers"], "from 0 bytes");  // auto: the buckets are reduced in place
    EXPECT_EQ(d["world_size"], 2);
    EXPECT_EQ(d["rank"], rank);
    EXPECT_EQ(d["device"], "cpu");
    EXPECT_EQ(d["parameter_bytes"].get<int64_t>(), bytes);
    EXPECT_EQ(d["dtypes"], nlohmann::json::array({"f32"}));
    EXPECT_EQ(d["bucket_cap_mb"].get<double>(), 0.001);
    EXPECT_TRUE(d["gradient_as_bucket_view"].get<bool>());
    EXPECT_EQ(d["comm_hook"], "allreduce");
    EXPECT_EQ(d["iterations"].get<int64_t>(), 2);
    // Both layouts hold every gradient once; the rebuild happened in the second iteration.
    int64_t before = 0, after = 0;
    for (const auto& b : d["bucket_sizes"]) before += b.get<int64_t>();
    for (const auto& b : d["rebuilt_bucket_sizes"]) after += b.get<int64_t>();
    EXPECT_EQ(before, bytes);
    EXPECT_TRUE(d["has_rebuilt_buckets"].get<bool>());
    EXPECT_EQ(after, bytes);
    EXPECT_EQ(d["environment"]["WORLD_SIZE"], "2") << d.dump();  // set by the launcher
  }
}

TEST_F(DdpTest, EarlyBucketsAreReducedWhileBackwardStillComputes) {
  // One bucket per parameter, and 300 ms of extra backward below fc1: the upper
  // layers' buckets must be reduced during that time, not after backward.
  RanksRun r = launch_ranks(2, {"--steps", "2", "--bucket-cap-mb", "0", "--first-bucket-mb", "0", "--slow-backward-ms", "300"});
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  for (const auto& s : r.stats) {
    const double compute_end = s["backward_compute_ms"].get<double>();
    const auto& first = s["buckets"][0];
    EXPECT_LT(first["comm_start_ms"].get<double>(), compute_end) << s.dump();
    EXPECT_LT(first["comm_end_ms"].get<double>(), compute_end) << s.dump();
    EXPECT_GT(s["overlap_ms"].get<double>(), 0.0) << s.dump();
  }
}

TEST_F(DdpTest, CompressionHooksStayCloseToFullPrecision) {
  // 16-bit rounding of every rank's contribution: about 1e-3 relative per step.
  expect_matches_reference(launch_ranks(2, {"--steps", "3", "--hook", "fp16"}), reference(2, 3, 4, 1, "always"), 1e-3, 1e-2);
  expect_matches_reference(launch_ranks(2, {"--steps", "3", "--hook", "bf16"}), reference(2, 3, 4, 1, "always"), 5e-3, 5e-2);
}

TEST_F(DdpTest, PowerSGDAtFullRankEqualsOneProcessWithTheFullBatch) {
  // With r >= min(n, m) the span of P is the whole column space of the summed
  // gradient, so P Q^T / world is the exact average: N ranks equal one process
  // with the full batch (to the rounding of Gram-Schmidt and two more products),
  // from step 3 on compressed (start_powerSGD_iter 2), small matrices included.
  const std::vector<std::string> args = {"--steps", "5", "--hook", "powersgd", "--powersgd-rank", "64",
                                         "--powersgd-min-rate", "0", "--powersgd-start", "2"};
  for (int world : {2, 3}) {
    RanksRun run = launch_ranks(world, args);
    expect_matches_reference(run, reference(world, 5, 4, 1, "always"), 1e-5, 1e-4);
    for (const auto& st : run.stats) EXPECT_EQ(st["powersgd_iterations"].get<int64_t>(), 5) << st.dump();
  }
}

TEST_F(DdpTest, PowerSGDAtRankOneSendsFewerElementsAndTrainsCloseToTheFullBatch) {
  // Rank 1 with error feedback: the sum of applied updates only lags the exact one,
  // so a few SGD steps stay near the reference, while each compressed step sends
  // (n + m) elements per matrix instead of n m.
  const std::vector<std::string> args = {"--steps", "6", "--hook", "powersgd", "--powersgd-rank", "1",
                                         "--powersgd-min-rate", "0", "--powersgd-start", "2"};
  RanksRun run = launch_ranks(2, args);
  expect_matches_reference(run, reference(2, 6, 4, 1, "always"), 5e-2, 5e-1);
  for (const auto& st : run.stats) {
    const auto before = st["powersgd_numel_before"].get<int64_t>(), after = st["powersgd_numel_after"].get<int64_t>();
    EXPECT_LT(after, before) << st.dump();
  }
}

TEST_F(DdpTest, PowerSGDBeforeItsStartIterationIsBitwiseThePlainAverage) {
  const std::vector<std::string> args = {"--steps", "3"};
  std::vector<std::string> powersgd = args;
  powersgd.insert(powersgd.end(), {"--hook", "powersgd", "--powersgd-start", "10"});
  RanksRun compressed = launch_ranks(2, powersgd);
  RanksRun plain = launch_ranks(2, args);
  ASSERT_EQ(compressed.result.exit_code, 0) << compressed.stderr_text;
  ASSERT_EQ(plain.result.exit_code, 0) << plain.stderr_text;
  for (size_t k = 0; k < plain.params.size(); ++k)
    for (const auto& [name, t] : plain.params[k].tensors)
      EXPECT_EQ(t.to_double_vector(), compressed.params[k].find(name)->to_double_vector()) << name;
}

TEST_F(DdpTest, AUserSuppliedCommHookIsUsed) {
  expect_matches_reference(launch_ranks(2, {"--steps", "3", "--hook", "user"}), reference(2, 3, 4, 1, "always"));
}

TEST_F(DdpTest, AHookPortedFromPyTorchComputesWhatTheDefaultComputes) {
  // PyTorch's allreduce_hook divides the bucket by the world size itself; the
  // Reducer hands it undivided gradients, so it averages once, bit for bit as
  // the built-in hook does. Its state sees every call and the buckets'
  // metadata: offsets, shapes, and is_last on exactly one bucket per step.
  const std::vector<std::string> args = {"--steps", "3", "--bucket-cap-mb", "0.001", "--first-bucket-mb", "0.0005"};
  std::vector<std::string> ported_args = args;
  ported_args.insert(ported_args.end(), {"--hook", "ported"});
  RanksRun ported = launch_ranks(2, ported_args);
  RanksRun builtin = launch_ranks(2, args);
  expect_matches_reference(ported, reference(2, 3, 4, 1, "always"));
  ASSERT_EQ(builtin.result.exit_code, 0) << builtin.stderr_text;
  for (size_t k = 0; k < ported.params.size(); ++k) {
    for (const auto& [name, t] : ported.params[k].tensors)
      EXPECT_EQ(t.to_double_vector(), builtin.params[k].find(name)->to_double_vector()) << "rank " << k << " " << name;
    const nlohmann::json& st = ported.stats[k];
    // Step 1 with the initial buckets, steps 2 and 3 with the rebuilt ones.
    const auto& d = st["logging_data"];
    EXPECT_EQ(st["hook_calls"].get<int64_t>(),
              static_cast<int64_t>(d["bucket_sizes"].size() + 2 * d["rebuilt_bucket_sizes"].size()))
        << st.dump();
    EXPECT_EQ(st["hook_last_calls"].get<int64_t>(), 3) << st.dump();
    EXPECT_TRUE(st["hook_metadata_errors"].empty()) << st.dump();
  }
}

// --- On a GPU: the same training with CUDA tensors, against the CPU reference ---------
// NCCL at world size 1 still runs the whole device path: buckets launched on
// the comm stream after an event on the compute stream, the rebuild and its
// broadcast, comm hooks, find_unused's all-reduced used map.

constexpr double kGpuAtol = 1e-5, kGpuRtol = 1e-4;

std::vector<std::string> on_gpu(const std::string& backend, std::vector<std::string> args) {
  args.insert(args.end(), {"--device", "cuda", "--backend", backend});
  return args;
}

TEST_F(DdpTest, OnTheGpuNcclAtWorldSizeOneEqualsTheCpuReference) {
  TANDEM_REQUIRE_GPU();
  const std::vector<std::vector<std::string>> cases = {
      {"--steps", "3"},
      {"--steps", "3", "--bucket-cap-mb", "0", "--first-bucket-mb", "0"},
      {"--steps", "3", "--grad-view"},
      {"--steps", "3", "--hook", "user"}};
  for (const auto& args : cases) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(args, " ")));
    RanksRun r = launch_ranks(1, on_gpu("nccl", args));
    expect_matches_reference(r, reference(1, 3, 4, 1, "always"), kGpuAtol, kGpuRtol);
    ASSERT_FALSE(r.stats.empty());
    // The stats are the last step's, and the rebuild happens at the second: the logging data says it happened.
    EXPECT_FALSE(r.stats[0]["logging_data"]["rebuilt_bucket_sizes"].empty()) << r.stats[0].dump();
  }
}

TEST_F(DdpTest, OnTheGpuNcclStatsComeFromCudaEventsAndAreConsistent) {
  // Host stamps would say what the host launched; with NCCL the host never
  // waits, so only the streams' events tell compute, comm and exposed time.
  TANDEM_REQUIRE_GPU();
  RanksRun r = launch_ranks(1, on_gpu("nccl", {"--steps", "3", "--bucket-cap-mb", "0", "--first-bucket-mb", "0"}));
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  const nlohmann::json& s = r.stats[0];
  EXPECT_TRUE(s["device_timed"].get<bool>()) << s.dump();
  EXPECT_TRUE(s["comm_complete"].get<bool>()) << s.dump();
  EXPECT_GT(s["backward_compute_ms"].get<double>(), 0.0) << s.dump();
  ASSERT_GT(s["buckets"].size(), 1u) << s.dump();
  double last_end = 0;
  for (const auto& b : s["buckets"]) {
    EXPECT_GE(b["comm_start_ms"].get<double>(), 0.0) << b.dump();
    EXPECT_LE(b["comm_start_ms"].get<double>(), b["comm_end_ms"].get<double>()) << b.dump();
    last_end = std::max(last_end, b["comm_end_ms"].get<double>());
  }
  EXPECT_LE(s["overlap_ms"].get<double>(), s["backward_comm_ms"].get<double>() + 1e-6) << s.dump();
  EXPECT_NEAR(s["exposed_comm_ms"].get<double>(),
              std::max(0.0, last_end - s["backward_compute_ms"].get<double>()), 1e-3)
      << s.dump();
}

TEST_F(DdpTest, OnTheGpuTheRingsHostStampsAreItsTimes) {
  // The ring reduces CUDA buckets on the host: its Work stamps are the truth there.
  TANDEM_REQUIRE_GPU();
  RanksRun r = launch_ranks(2, on_gpu("ring", {"--steps", "2"}));
  ASSERT_EQ(r.result.exit_code, 0) << r.stderr_text;
  for (const auto& s : r.stats) EXPECT_FALSE(s["device_timed"].get<bool>()) << s.dump();
}

TEST_F(DdpTest, OnTheGpuNcclNoSyncAccumulationEqualsTheLargeBatch) {
  TANDEM_REQUIRE_GPU();
  expect_matches_reference(launch_ranks(1, on_gpu("nccl", {"--steps", "2", "--micro", "4", "--batch", "3"})),
                           reference(1, 2, 3, 4, "always"), kGpuAtol, kGpuRtol);
}

TEST_F(DdpTest, OnTheGpuNcclFindUnusedParametersHandlesASkippedBranch) {
  TANDEM_REQUIRE_GPU();
  RanksRun r = launch_ranks(1, on_gpu("nccl", {"--steps", "4", "--find-unused", "--branch", "alternate"}));
  expect_matches_reference(r, reference(1, 4, 4, 1, "alternate"), kGpuAtol, kGpuRtol);
}

TEST_F(DdpTest, OnTheGpuNcclCompressionHookStaysCloseToFullPrecision) {
  TANDEM_REQUIRE_GPU();
  expect_matches_reference(launch_ranks(1, on_gpu("nccl", {"--steps", "3", "--hook", "bf16"})),
                           reference(1, 3, 4, 1, "always"), 5e-3, 5e-2);
}

TEST_F(DdpTest, OnTheGpuTwoRanksShareOneGpuOverTheRingAndEqualTheFullBatch) {
  TANDEM_REQUIRE_GPU();
  expect_matches_reference(launch_ranks(2, on_gpu("ring", {"--steps", "3", "--bucket-cap-mb", "0.001",
                                                           "--first-bucket-mb", "0.0005"})),
                           reference(2, 3, 4, 1, "always"), kGpuAtol, kGpuRtol);
  expect_matches_reference(launch_ranks(2, on_gpu("ring", {"--steps", "3", "--find-unused", "--branch", "alternate"})),
                           reference(2, 3, 4, 1, "alternate"), kGpuAtol, kGpuRtol);
}

}  // namespace
}  // namespace tandem::testing
