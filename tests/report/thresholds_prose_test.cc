// The report states the diagnosis's thresholds in words: the words are made
// from the Thresholds the diagnosis judged by, so changing a threshold changes
// the prose, the findings and the efficiency plot together.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "report/diagnosis.h"
#include "report/report.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DescribeThresholds, DefaultsReadAsTheRecordedSentence) {
  EXPECT_EQ(describe_thresholds(Thresholds{}),
            "Thresholds (report/diagnosis.h): comm-bound when exposed all-reduce > 20% of the step or compute/comm "
            "< 1; data-bound when DataLoader wait > 10%; sync points when logging or checkpointing costs > 5%; small "
            "batch below 32 per device; poor scaling below 70% efficiency, negative below 1x.\n");
}

TEST(DescribeThresholds, EachStatedThresholdFollowsItsField) {
  struct Case {
    const char* field;
    std::function<void(Thresholds&)> change;
    std::string expected;  // the changed threshold as the prose should state it
  };
  const std::vector<Case> cases = {
      {"comm_exposed_fraction", [](Thresholds& t) { t.comm_exposed_fraction = 0.35; }, "all-reduce > 35% of the step"},
      {"compute_comm_ratio", [](Thresholds& t) { t.compute_comm_ratio = 1.5; }, "compute/comm < 1.5;"},
      {"data_wait_fraction", [](Thresholds& t) { t.data_wait_fraction = 0.25; }, "DataLoader wait > 25%;"},
      {"sync_fraction", [](Thresholds& t) { t.sync_fraction = 0.025; }, "checkpointing costs > 2.5%;"},
      {"small_batch", [](Thresholds& t) { t.small_batch = 64; }, "below 64 per device"},
      {"poor_efficiency", [](Thresholds& t) { t.poor_efficiency = 0.85; }, "below 85% efficiency"},
  };
  const std::string defaults = describe_thresholds(Thresholds{});
  for (const Case& c : cases) {
    Thresholds t;
    c.change(t);
    const std::string prose = describe_thresholds(t);
    EXPECT_NE(prose, defaults) << c.field;
    EXPECT_TRUE(has(prose, c.expected)) << c.field << ": " << prose;
    EXPECT_FALSE(has(defaults, c.expected)) << c.field;
  }
}

// Logging every step, each logging step 10 ms longer than a plain 100 ms one:
// 10% of the time, a sync-point finding at the default 5%.
Profile logging_heavy_profile() {
  Profile p;
  p.facts.world_size = 1;
  p.facts.device = "cpu";
  p.facts.per_device_batch = 64;
  p.facts.logging_steps = 1;
  p.median.step_ms = 100;
  p.median.forward_ms = 40;
  p.median.backward_compute_ms = 50;
  p.median.backward_ms = 50;
  p.logging_overhead_ms = 10;
  return p;
}

TEST(SyncPointAdvice, SuggestedLoggingIntervalAndItsReasonFollowTheTargetFraction) {
  DiagnosisInput in;
  in.profile = logging_heavy_profile();
  auto logging_suggestion = [&](const Thresholds& t) {
    for (const Advice& a : diagnose(in, t))
      for (const Suggestion& s : a.suggestions)
        if (s.knob == "logging_steps") return s;
    ADD_FAILURE() << "no logging_steps suggestion";
    return Suggestion{};
  };
  // 10 ms every n steps of 100 ms is under 1% from n = 10, under 2% from n = 5.
  const Suggestion one = logging_suggestion(Thresholds{});
  EXPECT_EQ(one.value, "10");
  EXPECT_TRUE(has(one.why, "under 1% of the time")) << one.why;
  Thresholds t;
  t.sync_target_fraction = 0.02;
  const Suggestion two = logging_suggestion(t);
  EXPECT_EQ(two.value, "5");
  EXPECT_TRUE(has(two.why, "under 2% of the time")) << two.why;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// 1 and 2 ranks; on 2 ranks 45 of the 100 ms step is exposed all-reduce and
// compute/comm is 80/60: comm-bound by the default 20% exposed threshold.
Profile profile(int world, double step, double comm, double exposed) {
  Profile p;
  p.facts.world_size = world;
  p.facts.backend = world > 1 ? "ring" : "none";
  p.facts.per_device_batch = 64;
  p.facts.num_parameters = 50'000'000;
  p.facts.train_examples = 1000;
  p.median.step_ms = step;
  p.median.forward_ms = step * 0.3;
  p.median.backward_compute_ms = step * 0.5;
  p.median.backward_ms = step * 0.5 + exposed;
  p.median.comm_ms = comm;
  p.median.exposed_comm_ms = exposed;
  p.median.overlap_ms = comm - exposed;
  p.step_ms = summarize({step, step, step});
  p.samples_per_second = 64.0 * world / (step / 1000);
  return p;
}

class ReportThresholds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_report_thresholds_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ReportInputs inputs() const {
    ReportInputs in;
    in.bench.scaling.emplace();
    in.bench.scaling->cases = {profile(1, 60, 0, 0), profile(2, 100, 60, 45)};
    return in;
  }
  fs::path dir_;
};

TEST_F(ReportThresholds, TheReportStatesTheThresholdsItsDiagnosisUsed) {
  ReportInputs in = inputs();
  std::string text;
  write_report(in, dir_ / "defaults", &text);
  EXPECT_TRUE(has(text, "[comm-bound]")) << text;
  EXPECT_TRUE(has(text, "exposed all-reduce > 20% of the step or compute/comm < 1;")) << text;

  // 45% exposed and compute/comm 1.33 pass these: no comm-bound finding, and the prose says why.
  in.thresholds.comm_exposed_fraction = 0.5;
  in.thresholds.compute_comm_ratio = 1.2;
  write_report(in, dir_ / "changed", &text);
  EXPECT_FALSE(has(text, "[comm-bound]")) << text;
  EXPECT_TRUE(has(text, "exposed all-reduce > 50% of the step or compute/comm < 1.2;")) << text;
  EXPECT_FALSE(has(text, "> 20% of the step")) << text;
}

TEST_F(ReportThresholds, TheEfficiencyPlotMarksThePoorScalingThreshold) {
  ReportInputs in = inputs();
  write_report(in, dir_ / "defaults");
  EXPECT_TRUE(has(read(dir_ / "defaults" / "speedup_efficiency.svg"), "poor &lt; 70%"));
  in.thresholds.poor_efficiency = 0.6;
  std::string text;
  write_report(in, dir_ / "changed", &text);
  const std::string svg = read(dir_ / "changed" / "speedup_efficiency.svg");
  EXPECT_TRUE(has(svg, "poor &lt; 60%"));
  EXPECT_FALSE(has(svg, "70%"));
  EXPECT_TRUE(has(text, "poor scaling below 60% efficiency")) << text;
}

}  // namespace
}  // namespace tandem::report
