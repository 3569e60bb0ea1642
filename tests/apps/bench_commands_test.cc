// The bench commands end to end, as a user runs them: real ranks started by
// the launcher on a tiny model with synthetic data (a few seconds). Times are
// never asserted; what is checked is the shape of what was measured.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/bench_files.h"
#include "tests/report/xml_check.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int status = -1;
  std::string output;
};

CommandRun run(const std::string& args) {
  CommandRun r;
  const std::string cmd = std::string(TANDEM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  r.status = pclose(p);
  return r;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class BenchCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_bench_cmd_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = (dir_ / "tiny.yaml").string();
    std::ofstream(config_) << "per_device_train_batch_size: 4\nlogging_steps: 2\nsave_steps: 0\n"
                              "dataloader_num_workers: 0\ndevice: cpu\n"
                              "model:\n  d_model: 16\n  n_heads: 2\n  num_layers: 1\n  dim_feedforward: 32\n"
                              "  max_seq_len: 8\ndata:\n  vocab_max_size: 200000\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string common() const {
    return "--config " + config_ + " --synthetic --warmup 1 --steps 3 --rounds 1 --out " + dir_.string();
  }
  fs::path dir_;
  std::string config_;
};

TEST_F(BenchCommands, BucketSweepMeasuresEverySizeOnTwoRanks) {
  // 200000 x 16 f32 embedding = 12.2 MB of gradients: 1 MB caps make several buckets.
  const CommandRun r = run("bench buckets --nproc 2 --caps 1,one " + common());
  ASSERT_EQ(r.status, 0) << r.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.buckets.has_value());
  ASSERT_EQ(f.buckets->cases.size(), 2u);
  const report::Profile& small = f.buckets->cases[0];
  const report::Profile& one = f.buckets->cases[1];
  EXPECT_EQ(small.facts.world_size, 2);
  EXPECT_EQ(small.facts.backend, "ring");
  EXPECT_EQ(small.facts.vocab_size, 200000);  // synthetic data: the vocabulary is data.vocab_max_size
  EXPECT_EQ(small.facts.d_model, 16);
  EXPECT_GT(small.facts.bucket_bytes.size(), 1u);
  EXPECT_EQ(one.facts.bucket_bytes.size(), 1u);
  EXPECT_TRUE(one.facts.one_bucket);
  int64_t total = 0;
  for (int64_t b : one.facts.bucket_bytes) total += b;
  EXPECT_EQ(total, one.facts.num_parameters * 4);  // every f32 gradient in the one bucket
  EXPECT_EQ(small.step_ms.n, 3u);
  EXPECT_GT(small.median.comm_ms, 0);
  EXPECT_GT(small.samples_per_second, 0);
  EXPECT_NE(r.output.find("fastest:"), std::string::npos) << r.output;
  // What the step model is calibrated on: every gradient with its bytes and ready time, and each bucket's times.
  ASSERT_EQ(small.facts.gradient_bytes.size(), small.facts.gradient_names.size());
  int64_t gradient_bytes = 0;
  for (int64_t b : small.facts.gradient_bytes) gradient_bytes += b;
  EXPECT_EQ(gradient_bytes, total);
  EXPECT_EQ(small.gradient_ready_ms.size(), small.facts.gradient_names.size());
  EXPECT_EQ(small.bucket_ready_ms.size(), small.facts.bucket_bytes.size());
  EXPECT_EQ(small.bucket_comm_end_ms.size(), small.facts.bucket_bytes.size());
}

TEST_F(BenchCommands, PredictAndReportPredictEachCaseFromTheOthers) {
  ASSERT_EQ(run("bench buckets --nproc 2 --caps 1,one " + common()).status, 0);
  const std::string table = (dir_ / "allreduce_2ranks.txt").string();
  const CommandRun ar = run("launch --nproc-per-node 2 -- " + std::string(TANDEM_BINARY) +
                            " bench allreduce -b 1K -e 64K -f 4 -n 2 -w 1 -c 0 > " + table);
  ASSERT_EQ(ar.status, 0) << ar.output;

  const std::string sweep = (dir_ / "buckets.json").string();
  const CommandRun p =
      run("bench predict --calibrate " + sweep + ":1 --link " + table + " --measured " + dir_.string());
  ASSERT_EQ(p.status, 0) << p.output;
  EXPECT_NE(p.output.find("| 2 | one bucket | 1 |"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("not validated (each is its world size's only calibration): " + sweep + ":1"),
            std::string::npos)
      << p.output;
  // Calibrated on the whole sweep, each case is predicted from the other (leave one out).
  const CommandRun loo =
      run("bench predict --calibrate " + dir_.string() + " --link " + table + " --measured " + dir_.string());
  ASSERT_EQ(loo.status, 0) << loo.output;
  EXPECT_NE(loo.output.find("| 2 | 1 | "), std::string::npos) << loo.output;
  EXPECT_NE(loo.output.find("| mean of " + sweep + ":1, " + sweep + ":one bucket |"), std::string::npos) << loo.output;

  const CommandRun rep = run("report --quiet --bench " + dir_.string() + " --out " + (dir_ / "report").string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  const std::string model = read(dir_ / "report" / "step_model.md");
  EXPECT_NE(model.find("| 2 | mean of buckets.json:1, buckets.json:one bucket |"), std::string::npos) << model;
  EXPECT_NE(model.find("| 2 | one bucket | 1 |"), std::string::npos) << model;
  EXPECT_NE(model.find("| buckets.json:1 |"), std::string::npos) << "the one-bucket case, predicted from cap 1";
}

TEST_F(BenchCommands, PredictNamesAMissingTableAndAWorldSizeWithoutOne) {
  ASSERT_EQ(run("bench buckets --nproc 2 --caps 1,one " + common()).status, 0);
  const std::string sweep = (dir_ / "buckets.json").string();
  const CommandRun missing =
      run("bench predict --calibrate " + sweep + ":1 --link /nonexistent/ar.txt --caps 1 --world 2");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("cannot read all_reduce table /nonexistent/ar.txt"), std::string::npos)
      << missing.output;
  const std::string three = (dir_ / "ar3.txt").string();
  std::ofstream(three) << "1024 256 float sum -1 41.5 0.02 0.03 0 40.25 0.03 0.03 0\n"
                          "4096 1024 float sum -1 60 0.07 0.09 0 58 0.07 0.09 0\n";
  const CommandRun no_fit = run("bench predict --calibrate " + sweep + ":1 --link 3=" + three + " --caps 1 --world 2");
  EXPECT_NE(no_fit.status, 0);
  EXPECT_NE(no_fit.output.find("no all_reduce table for 2 ranks (--link gives 3 ranks)"), std::string::npos)
      << no_fit.output;
  std::ofstream(three) << "1024 256 float\n";
  const CommandRun bad = run("bench predict --calibrate " + sweep + ":1 --link 3=" + three + " --caps 1 --world 2");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find(three + ":1: expected 13 columns"), std::string::npos) << bad.output;
}

TEST_F(BenchCommands, ScalingThenReportWritesTablesPlotsAndDiagnosis) {
  const CommandRun s = run("bench scaling --max-ranks 2 " + common());
  ASSERT_EQ(s.status, 0) << s.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.scaling.has_value());
  ASSERT_EQ(f.scaling->cases.size(), 2u);
  EXPECT_EQ(f.scaling->cases[0].facts.world_size, 1);
  EXPECT_EQ(f.scaling->cases[0].facts.backend, "none");
  EXPECT_EQ(f.scaling->cases[1].facts.world_size, 2);
  EXPECT_GT(f.scaling->cases[1].median.comm_ms, 0);

  const CommandRun rep = run("report --quiet --bench " + dir_.string() + " --out " + (dir_ / "report").string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  const std::string text = read(dir_ / "report" / "report.txt");
  EXPECT_NE(text.find("Diagnosis of the 2-rank profile"), std::string::npos) << text;
  EXPECT_GT(testing::count_xml_elements(read(dir_ / "report" / "speedup_efficiency.svg"), "rect"), 0);
  EXPECT_TRUE(fs::exists(dir_ / "report" / "summary.tex"));
}

TEST_F(BenchCommands, StepMeasuresEachPrecisionWithItsPeakMemory) {
  const CommandRun r = run("bench step --precisions fp32,bf16 " + common());
  ASSERT_EQ(r.status, 0) << r.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.step.has_value());
  ASSERT_EQ(f.step->cases.size(), 2u);
  EXPECT_EQ(f.step->cases[0].facts.precision, "fp32");
  EXPECT_EQ(f.step->cases[1].facts.precision, "bf16");
  // At least the f32 parameters, their gradients and AdamW's two moments.
  for (const report::Profile& p : f.step->cases) EXPECT_GE(p.peak_memory_bytes, 4 * p.facts.num_parameters * 4);
}

TEST_F(BenchCommands, StepOnPaddedSyntheticRowsRecordsTheirRealShare) {
  const CommandRun r = run("bench step --precisions fp32 --synthetic-real-fraction 0.25 " + common());
  ASSERT_EQ(r.status, 0) << r.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.step.has_value());
  EXPECT_EQ(f.step->cases[0].facts.synthetic_real_fraction, 0.25);
  EXPECT_NE(r.output.find("synthetic (about 25 % real tokens, the rest padding)"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, StepWithLongestPaddingRecordsAndSaysIt) {
  const CommandRun r = run("bench step --precisions fp32 --synthetic-real-fraction 0.25 --set data.padding=longest "
                           "--set data.pad_to_multiple_of=8 " + common());
  ASSERT_EQ(r.status, 0) << r.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.step.has_value());
  EXPECT_EQ(f.step->cases[0].facts.padding, "longest");
  EXPECT_EQ(f.step->cases[0].facts.pad_to_multiple_of, 8);
  EXPECT_NE(r.output.find("padded to each batch's longest row (a multiple of 8, at most"), std::string::npos)
      << r.output;
}

TEST_F(BenchCommands, StepRejectsARealFractionOutsideZeroToOneOrWithoutSynthetic) {
  const CommandRun zero = run("bench step --precisions fp32 --synthetic-real-fraction 0 " + common());
  EXPECT_NE(zero.status, 0);
  EXPECT_NE(zero.output.find("--synthetic-real-fraction must be in (0, 1], got 0"), std::string::npos) << zero.output;
  const CommandRun real = run("bench step --config " + config_ + " --synthetic-real-fraction 0.5 --out " + dir_.string());
  EXPECT_NE(real.status, 0);
  EXPECT_NE(real.output.find("--synthetic-real-fraction needs --synthetic"), std::string::npos) << real.output;
}

TEST_F(BenchCommands, FindBatchSizeStopsWhereTheMemoryLimitIsCrossed) {
  const CommandRun r =
      run("find-batch-size --config " + config_ +
          " --set data.vocab_max_size=1000 --start 4 --max-batch 4096 --memory-limit 16M --out " + dir_.string());
  ASSERT_EQ(r.status, 0) << r.output;
  report::BenchFolder f = report::read_bench_folder(dir_);
  ASSERT_TRUE(f.batch_search.has_value());
  const report::BatchSearch& s = *f.batch_search;
  ASSERT_GT(s.max_batch, 0) << r.output;
  bool saw_max_fit = false, saw_next_fail = false;
  for (const report::BatchTrial& t : s.trials) {
    if (t.fits) {
      EXPECT_LE(t.peak_bytes, s.memory_limit_bytes);
    }
    if (t.batch == s.max_batch) saw_max_fit = t.fits;
    if (t.batch == s.max_batch + 1) saw_next_fail = !t.fits;
  }
  if (!s.hit_upper_bound) {
    EXPECT_TRUE(saw_max_fit);
    EXPECT_TRUE(saw_next_fail) << r.output;
  }
}

TEST_F(BenchCommands, AFailingRankFailsTheBenchWithAMessage) {
  // The CPU build has no NCCL: every rank fails creating its process group.
  const CommandRun r = run("bench buckets --nproc 2 --caps 1 --backend nccl " + common());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tandem: error"), std::string::npos) << r.output;
}

// Data rows of an nccl-tests table (lines that are not comments).
std::vector<std::string> table_rows(const std::string& output) {
  std::vector<std::string> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == ' ') rows.push_back(line);
  return rows;
}

class CollectiveTable : public ::testing::TestWithParam<const char*> {};

TEST_P(CollectiveTable, EveryRowIsCheckedAgainstTheClosedFormAtThreeRanks) {
  // Three ranks: sizes that are not a multiple of the world round down for
  // reduce_scatter and all_gather; every element is checked on every rank.
  const std::string collective = GetParam();
  const CommandRun r = run("launch --nproc-per-node 3 -- " + std::string(TANDEM_BINARY) +
                           " bench allreduce --collective " + collective + " -b 64 -e 1K -f 2 -n 2 -w 1 -o avg");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("# tandem bench allreduce: " + collective), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
  const std::vector<std::string> rows = table_rows(r.output);
  ASSERT_EQ(rows.size(), 5u) << r.output;  // 64, 128, 256, 512, 1024 bytes
  const bool in_place_too = collective == "all_reduce";
  for (const std::string& row : rows) {
    std::istringstream fields(row);
    long long bytes = 0, count = 0;
    fields >> bytes >> count;
    EXPECT_EQ(bytes, count * 4) << row;
    if (!in_place_too) {
      EXPECT_EQ(count % 3, 0) << row;
    }
    EXPECT_EQ(row.find(" - ") == std::string::npos, in_place_too) << row;
  }
}

INSTANTIATE_TEST_SUITE_P(BenchAllreduce, CollectiveTable,
                         ::testing::Values("all_reduce", "reduce_scatter", "all_gather"));

TEST_F(BenchCommands, AnUnknownCollectiveIsNamedInTheError) {
  const CommandRun r = run("bench allreduce --collective broadcast");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("broadcast"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, NcclOnTheCpuIsAnErrorNamingDeviceCudaBeforeAnyTable) {
  const CommandRun r = run("bench allreduce --backend nccl");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--backend nccl reduces GPU tensors only: add --device cuda"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("# tandem bench allreduce"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, BadCapIsAnErrorBeforeAnyRankStarts) {
  const CommandRun r = run("bench buckets --nproc 2 --caps 1,big " + common());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("'big'"), std::string::npos) << r.output;
}

// It used to convert to a negative count, and the limit was silently dropped.
TEST_F(BenchCommands, FindBatchSizeRefusesAMemoryLimitBeyondAnyMemoryNamingIt) {
  const CommandRun r = run("find-batch-size --config " + config_ + " --memory-limit 99999999999999999999 --out " +
                           dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--memory-limit: '99999999999999999999' is more than 4 EiB"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, MoreRanksThanTheLimitIsAnErrorBeforeAnyRankStarts) {
  const CommandRun r = run("bench buckets --nproc 100000 " + common());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--nproc: Value 100000 not in range 1 to 1024"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, ZeroRoundsIsAnErrorNamingTheOption) {
  const CommandRun r = run("bench buckets --nproc 2 --config " + config_ + " --synthetic --rounds 0 --out " + dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bench buckets: --rounds must be at least 1, got 0"), std::string::npos) << r.output;
}

// bench ops: the op table of one rank's step. The calls per step follow from the model's
// structure (the reference): each encoder layer has 4 linears (QKV, output, two FFN), one
// attention, a GELU with its dropout and 2 sublayer epilogues (post-norm: bias + dropout +
// residual + layer norm, one op each), and the classifier head is one more linear.
TEST_F(BenchCommands, OpsCountsEachLayersOpsOncePerStepAndTheirTimeFitsInTheStep) {
  const CommandRun r = run("bench ops --config " + config_ + " --set model.num_layers=3 --synthetic --warmup 1 " +
                           "--steps 3 --out " + dir_.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read(dir_ / "ops.json"));
  EXPECT_EQ(j.at("steps"), 3);
  auto calls = [&](const std::string& op, const std::string& pass) {
    for (const auto& row : j.at("ops"))
      if (row.at("op") == op && row.at("pass") == pass) return row.at("calls_per_step").get<double>();
    return -1.0;
  };
  EXPECT_EQ(calls("linear", "forward"), 3 * 4 + 1);
  EXPECT_EQ(calls("LinearBackward", "backward"), 3 * 4 + 1);
  EXPECT_EQ(calls("attention", "forward"), 3);
  EXPECT_EQ(calls("AttentionBackward", "backward"), 3);
  EXPECT_EQ(calls("bias_dropout_add_layer_norm", "forward"), 3 * 2);
  EXPECT_EQ(calls("BiasDropoutAddLayerNormBackward", "backward"), 3 * 2);
  EXPECT_EQ(calls("bias_gelu_dropout", "forward"), 3);
  EXPECT_EQ(calls("embedding", "forward"), 1);
  EXPECT_EQ(calls("cross_entropy", "forward"), 1);
  // Op scopes are disjoint intervals inside each step on one thread, so their mean is at most the step's.
  EXPECT_LE(j.at("ops_ms_per_step").get<double>(), j.at("step_ms_mean").get<double>()) << j.dump();
  EXPECT_NE(r.output.find("LinearBackward"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, OpsRefusesACudaGraphStepNamingTheKey) {
  const CommandRun r = run("bench ops --config " + config_ + " --set cuda_graph=true --synthetic --out " + dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("cuda_graph"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "ops.json"));
}

TEST_F(BenchCommands, OpsRefusesZeroTimedStepsNamingTheOption) {
  const CommandRun r = run("bench ops --config " + config_ + " --steps 0 --synthetic --out " + dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--steps: Value 0 not in range 1 to 1000000"), std::string::npos) << r.output;
}

TEST_F(BenchCommands, OpsRefusesAnUnknownPrecisionNamingIt) {
  const CommandRun r = run("bench ops --config " + config_ + " --precision fp64 --synthetic --out " + dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--precision must be fp32, bf16 or fp16, got 'fp64'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tandem::apps
