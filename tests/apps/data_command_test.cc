#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apps/commands.h"
#include "tests/data/test_files.h"

namespace tandem::apps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using data::testing::error_of;
using data::testing::TempDir;

// Runs `tandem <args>` with only the data command registered; returns what it printed.
std::string run(std::vector<std::string> args) {
  CLI::App app;
  add_data_command(app);
  std::vector<const char*> argv{"tandem"};
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  return ::testing::internal::GetCapturedStdout();
}

TEST(DataCommand, SummaryPrintsClassCountsBaselineAndLengths) {
  TempDir dir;
  auto path = dir.write("d.tsv", "pos\tgood film\npos\tgreat film\nneg\tdull\n");
  std::string out = run({"data", "summary", "--format", "tsv", "--path", path.string(), "--max-seq-len", "2"});
  EXPECT_THAT(out, HasSubstr("tsv train: 3 examples, 2 classes"));
  EXPECT_THAT(out, HasSubstr("majority-class baseline accuracy: 66.7%"));
  EXPECT_THAT(out, HasSubstr("2 of 3 (66.7%) longer than max_seq_len 2"));
}

TEST(DataCommand, SummarySaysWhatPaddingToTheLongestTextSaves) {
  // Four texts of 2 words (3 tokens with [CLS]) in rows of 8: 37.5 % real; any batch's longest is 3.
  TempDir dir;
  auto path = dir.write("d.tsv", "pos\tgood film\npos\tgreat film\nneg\tdull plot\nneg\tbad acting\n");
  std::string out = run({"data", "summary", "--format", "tsv", "--path", path.string(), "--max-seq-len", "8",
                         "--batch-size", "2"});
  EXPECT_THAT(out, HasSubstr("padding, batches of 2: rows of max_seq_len 8 are 37.5% real tokens; cut to each "
                             "batch's longest (data.padding longest) the mean row is 3.0 (100.0% real); grouped by "
                             "length as well, 3.0 (100.0% real)"));
}

TEST(DataCommand, SummaryReportsTheBadRecord) {
  TempDir dir;
  auto path = dir.write("d.tsv", "pos\tgood film\nneg\n");
  EXPECT_THAT(error_of([&] { run({"data", "summary", "--format", "tsv", "--path", path.string()}); }),
              StartsWith(path.string() + ":2: expected 2 tab-separated columns, found 1"));
}

TEST(DataCommand, SummaryWithoutPathNamesTheMissingOption) {
  EXPECT_THAT(error_of([&] { run({"data", "summary", "--format", "tsv"}); }),
              HasSubstr("data summary: --format tsv needs --path"));
}

TEST(DataCommand, ANonPositiveMaxSeqLenIsRefusedNamingTheOption) {
  try {
    run({"data", "summary", "--format", "tsv", "--path", "x.tsv", "--max-seq-len", "-5"});
    FAIL() << "expected an error";
  } catch (const CLI::ValidationError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("--max-seq-len: Value -5 not in range 1 to 1073741824"));
  }
}

TEST(DataCommand, ANegativeSeedIsRefusedNamingTheOption) {
  try {
    run({"data", "summary", "--format", "fortunes", "--seed", "-1"});
    FAIL() << "expected an error";
  } catch (const CLI::ValidationError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("--seed: must be a non-negative integer, got -1"));
  }
}

TEST(DataCommand, FortunesListsCategoriesWithCounts) {
  TempDir dir;
  dir.write("f/food", "a\n%\nb\n%\n");
  dir.write("f/food.dat", "index");
  std::string out = run({"data", "fortunes", "--dir", (dir.path() / "f").string()});
  EXPECT_THAT(out, HasSubstr("1 fortune categories"));
  EXPECT_THAT(out, HasSubstr("food"));
  EXPECT_THAT(out, HasSubstr("demo categories: computers, food, politics, sports, startrek"));
}

}  // namespace
}  // namespace tandem::apps
