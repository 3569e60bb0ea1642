// Reading a `tandem train` output_dir back for the report.
#include "report/training_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

class TrainingRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_training_run_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(TrainingRunTest, ReadsEvaluationsAndResults) {
  // What the trainer writes (eval_strategy: epoch, 3 epochs).
  write("eval_log.csv",
        "step,epoch,eval_loss,eval_accuracy,elapsed_s\n"
        "100,1.0000,1.200000,0.500000,14.00\n"
        "200,2.0000,1.000000,0.600000,24.50\n"
        "300,3.0000,0.900000,0.650000,35.50\n");
  write("results.json",
        R"({"world_size": 2, "samples_per_second": 321.5, "train_seconds": 33.0, "eval_accuracy": 0.65})");
  const TrainingRun r = read_training_run(dir_, "2 ranks");
  EXPECT_EQ(r.label, "2 ranks");
  EXPECT_EQ(r.world_size, 2);
  EXPECT_DOUBLE_EQ(r.samples_per_second, 321.5);
  ASSERT_EQ(r.evals.size(), 3u);
  EXPECT_DOUBLE_EQ(r.evals[1].accuracy, 0.6);
  EXPECT_DOUBLE_EQ(r.final_accuracy, 0.65);
}

TEST_F(TrainingRunTest, EpochTimesAreDifferencesOfEpochEndEvaluationsFromEpochTwo) {
  write("eval_log.csv",
        "step,epoch,eval_loss,eval_accuracy,elapsed_s\n"
        "100,1.0000,1.2,0.5,14.00\n"
        "150,1.5000,1.1,0.55,19.00\n"  // an eval_steps evaluation mid-epoch: not an epoch end
        "200,2.0000,1.0,0.6,24.50\n"
        "300,3.0000,0.9,0.65,35.50\n");
  const auto epochs = read_training_run(dir_, "x").epoch_seconds();
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].first, 2);
  EXPECT_DOUBLE_EQ(epochs[0].second, 10.5);
  EXPECT_EQ(epochs[1].first, 3);
  EXPECT_DOUBLE_EQ(epochs[1].second, 11.0);
}

TEST_F(TrainingRunTest, MissingLogAndBadNumbersNameTheFile) {
  EXPECT_THROW(read_training_run(dir_, "x"), Error);
  write("eval_log.csv", "step,epoch,eval_loss,eval_accuracy,elapsed_s\n1,1,0.5,abc,3\n");
  try {
    read_training_run(dir_, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eval_log.csv:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::report
