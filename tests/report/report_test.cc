// The whole report from a synthetic bench folder: every file appears, plots
// are well-formed SVG, tables have one row per case, and the text carries the
// diagnosis of the measured profile.
#include "report/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "data/csv.h"
#include "tests/report/xml_check.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Profile profile(int world, double step, double comm, double exposed, const std::string& label) {
  Profile p;
  p.facts.label = label;
  p.facts.world_size = world;
  p.facts.device = "cpu";
  p.facts.backend = world > 1 ? "ring" : "none";
  p.facts.per_device_batch = 16;
  p.facts.num_parameters = 400000;
  p.facts.train_examples = 2000;
  p.facts.bucket_bytes = world > 1 ? std::vector<int64_t>{1 << 20, 500000} : std::vector<int64_t>{};
  p.median.step_ms = step;
  p.median.forward_ms = step * 0.3;
  p.median.backward_compute_ms = step * 0.5;
  p.median.backward_ms = step * 0.5 + exposed;
  p.median.comm_ms = comm;
  p.median.exposed_comm_ms = exposed;
  p.median.overlap_ms = comm - exposed;
  p.step_ms = summarize({step * 0.95, step, step * 1.1});
  p.samples_per_second = 16.0 * world / (step / 1000);
  p.peak_memory_bytes = 10 << 20;
  return p;
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_report_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "run");
    std::ofstream(dir_ / "run" / "eval_log.csv") << "step,epoch,eval_loss,eval_accuracy,elapsed_s\n"
                                                    "10,1,1.0,0.4,5\n20,2,0.9,0.5,9\n30,3,0.8,0.6,13.5\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 1 and 2 ranks where 2 ranks is slower per sample (negative scaling), a
  // bucket sweep, a precision comparison and a batch search.
  ReportInputs inputs() const {
    ReportInputs in;
    in.bench.scaling = ScalingBench{};
    in.bench.scaling->meta = current_meta("tandem bench scaling");
    in.bench.scaling->cases = {profile(1, 40, 0, 0, "1 rank"), profile(2, 100, 60, 45, "2 ranks")};
    in.bench.buckets = BucketsBench{};
    in.bench.buckets->current_cap_mb = 25;
    in.bench.buckets->cases = {profile(2, 90, 60, 40, "1"), profile(2, 100, 60, 45, "25"),
                               profile(2, 95, 60, 42, "one bucket")};
    in.bench.buckets->cases[0].facts.bucket_cap_mb = 1;
    in.bench.buckets->cases[1].facts.bucket_cap_mb = 25;
    in.bench.buckets->cases[2].facts.one_bucket = true;
    in.bench.step = StepBench{};
    in.bench.step->cases = {profile(1, 40, 0, 0, "fp32"), profile(1, 30, 0, 0, "bf16")};
    in.bench.step->cases[1].facts.precision = "bf16";
    in.bench.batch_search = BatchSearch{};
    in.bench.batch_search->max_batch = 256;
    in.runs = {read_training_run(dir_ / "run", "2 ranks")};
    in.command = "tandem report";
    in.date = "2026-01-01T00:00:00Z";
    return in;
  }
  fs::path dir_;
};

TEST_F(ReportTest, WritesEveryTablePlotAndTheTextReport) {
  std::string text;
  const auto written = write_report(inputs(), dir_ / "out", &text);
  for (const char* name :
       {"summary.csv", "summary.tex", "training.csv", "report.txt", "speedup_efficiency.svg", "throughput.svg",
        "step_breakdown.svg", "buckets.svg", "memory.svg", "accuracy.svg", "epoch_time.svg"}) {
    EXPECT_TRUE(fs::exists(dir_ / "out" / name)) << name;
    EXPECT_NE(std::find(written.begin(), written.end(), dir_ / "out" / name), written.end()) << name;
  }
  for (const fs::path& p : written)
    if (p.extension() == ".svg") {
      EXPECT_GT(testing::count_xml_elements(read(p), "svg"), 0) << p;
    }
  EXPECT_EQ(read(dir_ / "out" / "report.txt"), text);
}

TEST_F(ReportTest, SummaryCsvHasOneRowPerMeasuredCase) {
  write_report(inputs(), dir_ / "out");
  std::vector<std::vector<std::string>> rows;
  data::for_each_csv_record(read(dir_ / "out" / "summary.csv"), "summary.csv",
                            [&](const data::CsvRecord& r) { rows.push_back(r.fields); });
  ASSERT_EQ(rows.size(), 1u + 2 + 3 + 2);
  EXPECT_EQ(rows[0][0], "bench");
  EXPECT_EQ(rows[1][0], "scaling");
  EXPECT_EQ(rows[2][15], "0.8000");  // speedup of 2 ranks: (32 / 0.1) / (16 / 0.04)
  EXPECT_EQ(rows[2][16], "0.4000");  // efficiency
}

TEST_F(ReportTest, LatexHasScalingBucketAndPrecisionTables) {
  write_report(inputs(), dir_ / "out");
  const std::string tex = read(dir_ / "out" / "summary.tex");
  for (const char* label : {"tab:tandem-scaling", "tab:tandem-buckets", "tab:tandem-step"})
    EXPECT_NE(tex.find(label), std::string::npos) << label;
  EXPECT_NE(tex.find("\\toprule"), std::string::npos);
}

TEST_F(ReportTest, TextReportCarriesTheDiagnosis) {
  std::string text;
  write_report(inputs(), dir_ / "out", &text);
  EXPECT_NE(text.find("Diagnosis of the 2-rank profile"), std::string::npos);
  EXPECT_NE(text.find("[comm-bound]"), std::string::npos) << text;  // 45 of 100 ms exposed
  EXPECT_NE(text.find("[negative scaling]"), std::string::npos) << text;
  EXPECT_NE(text.find("ddp_bucket_cap_mb = 1"), std::string::npos) << text;  // the sweep's 10% faster size
}

TEST(DiagnosisInput, PicksTheLargestWorldSizeAndTheSweepFacts) {
  BenchFolder b;
  b.scaling = ScalingBench{};
  b.scaling->cases = {profile(2, 100, 60, 45, "2"), profile(1, 40, 0, 0, "1")};
  b.buckets = BucketsBench{};
  b.buckets->current_cap_mb = 25;
  b.buckets->cases = {profile(2, 90, 60, 40, "1"), profile(2, 100, 60, 45, "25")};
  b.buckets->cases[0].facts.bucket_cap_mb = 1;
  const DiagnosisInput in = diagnosis_input(b);
  EXPECT_EQ(in.profile.facts.world_size, 2);
  ASSERT_TRUE(in.scaling.has_value());
  EXPECT_DOUBLE_EQ(in.scaling->speedup, 0.8);
  ASSERT_TRUE(in.buckets.has_value());
  EXPECT_EQ(in.buckets->best_label, "1");
  EXPECT_DOUBLE_EQ(in.buckets->current_step_ms, 100);
  EXPECT_THROW(diagnosis_input(BenchFolder{}), Error);
}

}  // namespace
}  // namespace tandem::report
