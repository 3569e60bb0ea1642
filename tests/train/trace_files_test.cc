// Finding and merging the ranks' trace files (tandem trace merge).
#include "train/trace_files.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "profile/trace.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

class TraceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("tandem_trace_files_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write_rank(int rank, const fs::path& where) {
    profile::Trace t(rank, 12, profile::ClockOrigin{std::chrono::steady_clock::time_point{}, 1000 + rank});
    t.span(profile::lane::kCompute, "forward", std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(1),
           std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(2));
    fs::path p = where / fmt::format("trace_rank{}.json", rank);
    std::ofstream(p) << t.to_json().dump();
    return p;
  }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(TraceFiles, AFolderGivesItsRankFilesInRankOrder) {
  for (int r : {10, 2, 0}) write_rank(r, dir_);
  std::ofstream(dir_ / "trace.json") << "{}";  // a merged file is not a rank file
  std::vector<fs::path> files = find_rank_traces({dir_});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].filename(), "trace_rank0.json");
  EXPECT_EQ(files[1].filename(), "trace_rank2.json");
  EXPECT_EQ(files[2].filename(), "trace_rank10.json");
}

TEST_F(TraceFiles, MergeWritesOneFileWithEveryRanksEvents) {
  std::vector<fs::path> files = {write_rank(0, dir_), write_rank(1, dir_)};
  const size_t events = merge_trace_files(files, dir_ / "out" / "merged.json");
  std::ifstream in(dir_ / "out" / "merged.json");
  nlohmann::json merged = nlohmann::json::parse(in);
  EXPECT_EQ(merged["traceEvents"].size(), events);
  EXPECT_EQ(merged["otherData"]["ranks"], (std::vector<int>{0, 1}));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "merged.json.tmp"));
}

TEST_F(TraceFiles, MissingPathsEmptyFoldersAndBrokenFilesAreErrorsNamingThem) {
  EXPECT_NE(error_of([&] { find_rank_traces({dir_ / "nowhere"}); }).find("nowhere does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { find_rank_traces({dir_}); }).find("no trace_rank<R>.json files in"), std::string::npos);
  std::ofstream(dir_ / "trace_rank0.json") << R"({"traceEvents": [)";  // cut short
  std::string e = error_of([&] { merge_trace_files({dir_ / "trace_rank0.json"}, dir_ / "m.json"); });
  EXPECT_NE(e.find("trace_rank0.json is not valid JSON"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_ / "m.json")) << "nothing half-written";
}

}  // namespace
}  // namespace tandem::train
