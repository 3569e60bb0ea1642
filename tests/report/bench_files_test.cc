// Bench result files: what is written reads back the same, and a damaged
// file is an error naming the file and what is wrong.
#include "report/bench_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

class BenchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_bench_files_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

Profile example_profile(int world) {
  Profile p;
  p.facts.label = "25";
  p.facts.config = "configs/x.yaml";
  p.facts.overrides = {"ddp_backend=ring"};
  p.facts.world_size = world;
  p.facts.per_device_batch = 16;
  p.facts.bucket_bytes = {1048576, 500000};
  p.facts.num_parameters = 387077;
  p.facts.vocab_size = 4933;
  p.facts.d_model = 64;
  p.warmup_steps = 5;
  p.median.step_ms = 80;
  p.median.exposed_comm_ms = 3.5;
  p.step_ms = summarize({78, 80, 90});
  p.samples_per_second = 400;
  p.peak_memory_bytes = 12345678;
  p.logging_overhead_ms = -1;
  p.checkpoint_ms = 12.5;
  p.step_samples_ms = {78, 80, 90};
  return p;
}

TEST_F(BenchFiles, BucketSweepRoundTrips) {
  BucketsBench b;
  b.meta = current_meta("tandem bench buckets --config x.yaml");
  b.current_cap_mb = 25;
  b.rounds = 2;
  b.cases = {example_profile(2), example_profile(2)};
  b.cases[1].facts.one_bucket = true;
  write_json(dir_ / "buckets.json", to_json(b));
  const BenchFolder f = read_bench_folder(dir_);
  ASSERT_TRUE(f.buckets.has_value());
  EXPECT_FALSE(f.scaling.has_value());
  EXPECT_EQ(f.buckets->meta.command, b.meta.command);
  EXPECT_EQ(f.buckets->meta.machine.cores, b.meta.machine.cores);
  EXPECT_EQ(f.buckets->rounds, 2);
  ASSERT_EQ(f.buckets->cases.size(), 2u);
  const Profile& p = f.buckets->cases[0];
  EXPECT_EQ(p.facts.overrides, b.cases[0].facts.overrides);
  EXPECT_EQ(p.facts.bucket_bytes, b.cases[0].facts.bucket_bytes);
  EXPECT_EQ(p.facts.vocab_size, 4933);
  EXPECT_EQ(p.facts.d_model, 64);
  EXPECT_DOUBLE_EQ(p.median.exposed_comm_ms, 3.5);
  EXPECT_DOUBLE_EQ(p.step_ms.p90, b.cases[0].step_ms.p90);
  EXPECT_EQ(p.peak_memory_bytes, 12345678);
  EXPECT_EQ(p.step_samples_ms, b.cases[0].step_samples_ms);
  EXPECT_TRUE(f.buckets->cases[1].facts.one_bucket);
}

TEST_F(BenchFiles, ScalingStepAndBatchSearchRoundTrip) {
  ScalingBench s;
  s.cases = {example_profile(1), example_profile(2)};
  s.runs = {{1, "train_1ranks"}, {2, "train_2ranks"}};
  write_json(dir_ / "scaling.json", to_json(s));
  StepBench st;
  st.cases = {example_profile(1)};
  st.cases[0].facts.precision = "bf16";
  write_json(dir_ / "step.json", to_json(st));
  BatchSearch bs;
  bs.max_batch = 96;
  bs.trials = {{64, true, 100, ""}, {128, false, 0, "CUDA out of memory"}, {96, true, 150, ""}};
  write_json(dir_ / "find_batch_size.json", to_json(bs));

  const BenchFolder f = read_bench_folder(dir_);
  ASSERT_TRUE(f.scaling && f.step && f.batch_search);
  EXPECT_EQ(f.scaling->cases.size(), 2u);
  EXPECT_EQ(f.scaling->runs[1].dir, "train_2ranks");
  EXPECT_EQ(f.step->cases[0].facts.precision, "bf16");
  EXPECT_EQ(f.batch_search->max_batch, 96);
  ASSERT_EQ(f.batch_search->trials.size(), 3u);
  EXPECT_EQ(f.batch_search->trials[1].error, "CUDA out of memory");
}

TEST_F(BenchFiles, SamplesRoundTripAsColumns) {
  std::vector<StepSample> s(3);
  for (int i = 0; i < 3; ++i) {
    s[i].step_ms = 10 + i;
    s[i].comm_ms = i;
    s[i].logging_step = i == 1;
  }
  const auto back = samples_from_json(to_json(s));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_DOUBLE_EQ(back[2].step_ms, 12);
  EXPECT_DOUBLE_EQ(back[2].comm_ms, 2);
  EXPECT_TRUE(back[1].logging_step);
}

TEST_F(BenchFiles, GradientAndBucketTimesRoundTripAndAreOptional) {
  Profile p = example_profile(2);
  p.facts.gradient_names = {"head.weight", "embedding.weight"};
  p.facts.gradient_bytes = {500000, 1048576};
  p.gradient_ready_ms = {3.5, 9};
  p.bucket_ready_ms = {3.5, 9};
  p.bucket_comm_start_ms = {4, 9.5};
  p.bucket_comm_end_ms = {6, 14};
  const Profile back = profile_from_json(to_json(p), "here");
  EXPECT_EQ(back.facts.gradient_names, p.facts.gradient_names);
  EXPECT_EQ(back.facts.gradient_bytes, p.facts.gradient_bytes);
  EXPECT_EQ(back.gradient_ready_ms, p.gradient_ready_ms);
  EXPECT_EQ(back.bucket_comm_start_ms, p.bucket_comm_start_ms);
  EXPECT_EQ(back.bucket_comm_end_ms, p.bucket_comm_end_ms);
  // Files from before the step model have none of these keys.
  const Profile old = profile_from_json(to_json(example_profile(2)), "old");
  EXPECT_TRUE(old.facts.gradient_names.empty());
  EXPECT_TRUE(old.bucket_ready_ms.empty());
  EXPECT_FALSE(to_json(example_profile(2)).contains("bucket_ready_ms"));
  // A series whose length does not match its facts is an error naming it.
  nlohmann::json bad = to_json(p);
  bad["bucket_comm_end_ms"] = {1.0};
  try {
    profile_from_json(bad, "b.json case 25");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("b.json case 25: "), std::string::npos) << what;
    EXPECT_NE(what.find("bucket_comm_end_ms has 1 values for 2 buckets"), std::string::npos) << what;
  }
  // A gradient of no bytes or fewer cannot be reduced; the step model would divide by it.
  nlohmann::json negative = to_json(p);
  negative["facts"]["gradient_bytes"] = {500000, -4};
  try {
    profile_from_json(negative, "n.json case 1");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient_bytes of 'embedding.weight' must be positive, got -4"),
              std::string::npos)
        << e.what();
  }
  std::vector<StepSample> samples(2);
  samples[1].gradient_ready_ms = {1, 2};
  EXPECT_EQ(samples_from_json(to_json(samples))[1].gradient_ready_ms, (std::vector<double>{1, 2}));
}

TEST_F(BenchFiles, MissingKeyNamesTheFileAndTheCase) {
  BucketsBench b;
  b.cases = {example_profile(2)};
  nlohmann::json j = to_json(b);
  j["cases"][0]["median"].erase("exposed_comm_ms");
  write_json(dir_ / "buckets.json", j);
  try {
    read_bench_folder(dir_);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("buckets.json"), std::string::npos) << what;
    EXPECT_NE(what.find("cases[0]"), std::string::npos) << what;
    EXPECT_NE(what.find("exposed_comm_ms"), std::string::npos) << what;
  }
}

TEST_F(BenchFiles, UnknownKindNewerVersionAndBadJsonAreErrors) {
  BenchFolder f;
  write("a.json", R"({"kind": "mystery", "version": 1, "meta": {}})");
  EXPECT_THROW(read_bench_file(dir_ / "a.json", f), Error);
  write("b.json", R"({"kind": "step", "version": 99, "meta": {}})");
  EXPECT_THROW(read_bench_file(dir_ / "b.json", f), Error);
  write("c.json", "{not json");
  EXPECT_THROW(read_bench_file(dir_ / "c.json", f), Error);
  EXPECT_THROW(read_bench_folder(dir_ / "absent"), Error);
}

TEST_F(BenchFiles, MetaDescribesThisMachine) {
  const BenchMeta m = current_meta("cmd");
  EXPECT_GT(m.machine.cores, 0);
  EXPECT_GT(m.machine.memory_gib, 0);
  EXPECT_FALSE(m.machine.cpu.empty());
  EXPECT_EQ(m.date.size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_EQ(m.date.back(), 'Z');
}

}  // namespace
}  // namespace tandem::report
