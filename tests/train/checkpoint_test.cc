#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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

// Loads checkpoint-7 with its trainer state `state` but `key` (in the sampler object when
// `in_sampler`) set to `value`; returns the error.
std::string load_error_with(const fs::path& dir, nlohmann::json state, const std::string& key,
                            const nlohmann::json& value, bool in_sampler) {
  (in_sampler ? state["sampler"] : state)[key] = value;
  std::ofstream(dir / "checkpoint-7" / "trainer_state.json") << state.dump();
  try {
    load_checkpoint(dir / "checkpoint-7");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Checkpoints, NegativeOrFractionalCountsInTheTrainerStateAreErrorsNamingTheFileAndKey) {
  save(7);
  const fs::path file = dir_ / "checkpoint-7" / "trainer_state.json";
  const nlohmann::json state = nlohmann::json::parse(std::ifstream(file));
  EXPECT_NE(load_error_with(dir_, state, "global_step", -3, false)
                .find(file.string() + ": global_step must be a non-negative integer, got -3"),
            std::string::npos);
  EXPECT_NE(load_error_with(dir_, state, "global_step", 2.5, false)
                .find("global_step must be a non-negative integer, got 2.5"),
            std::string::npos);
  EXPECT_NE(load_error_with(dir_, state, "epoch", -1, false).find("epoch must be a non-negative integer, got -1"),
            std::string::npos);
  EXPECT_NE(load_error_with(dir_, state, "position", -5, true)
                .find("sampler.position must be a non-negative integer, got -5"),
            std::string::npos);
  EXPECT_EQ(load_error_with(dir_, state, "global_step", 7, false), "");
}

}  // namespace
}  // namespace tandem::train
