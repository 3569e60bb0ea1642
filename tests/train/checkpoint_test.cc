#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "train/checkpoint.h"
#include "core/check.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_ck_" + std::to_string(::getpid()) + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path save(int64_t step, int64_t limit = 0) {
    NamedTensors model, opt;
    model.tensors.emplace_back("w", Tensor::full({2}, static_cast<double>(step)));
    TrainerState s;
    s.global_step = step;
    s.class_names = {"a", "b"};
    return save_checkpoint(dir_, model, opt, s, "seed: 1\n", "", limit);
  }
  fs::path dir_;
};

TEST_F(Checkpoints, RoundTripKeepsWeightsAndState) {
  save(5);
  Checkpoint c = load_checkpoint(dir_ / "checkpoint-5");
  EXPECT_EQ(c.state.global_step, 5);
  EXPECT_EQ(c.state.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.model.find("w")->to_double_vector(), (std::vector<double>{5, 5}));
}

TEST_F(Checkpoints, ACrashWhileWritingLeavesThePreviousCheckpointTheLatestAndLoadable) {
  save(10);
  // What a crash during the save of step 20 leaves behind: the hidden temporary
  // folder with part of the files, never a checkpoint-20 folder.
  fs::create_directories(dir_ / ".checkpoint-20.tmp");
  std::ofstream(dir_ / ".checkpoint-20.tmp" / "model.safetensors") << "trunc";
  auto latest = latest_checkpoint(dir_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->filename(), "checkpoint-10");
  EXPECT_EQ(load_checkpoint(*latest).model.find("w")->to_double_vector(), (std::vector<double>{10, 10}));
}

TEST_F(Checkpoints, AFolderWithoutTrainerStateIsNotAFinishedCheckpoint) {
  save(10);
  fs::create_directories(dir_ / "checkpoint-30");
  EXPECT_EQ(latest_checkpoint(dir_)->filename(), "checkpoint-10");
  EXPECT_THROW(load_checkpoint(dir_ / "checkpoint-30"), Error);
}

TEST_F(Checkpoints, SaveTotalLimitKeepsOnlyTheNewest) {
  for (int64_t s : {1, 2, 3, 4}) save(s, 2);
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint-1"));
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(dir_ / "checkpoint-3"));
  EXPECT_TRUE(fs::exists(dir_ / "checkpoint-4"));
}

TEST_F(Checkpoints, NoCheckpointMeansNoLatest) { EXPECT_FALSE(latest_checkpoint(dir_).has_value()); }

TEST_F(Checkpoints, MalformedTrainerStateIsAnErrorNamingTheFile) {
  save(7);
  std::ofstream(dir_ / "checkpoint-7" / "trainer_state.json") << "{\"global_step\": 7}";
  try {
    load_checkpoint(dir_ / "checkpoint-7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer_state.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::train
