#include "data/fortunes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

// A fortunes folder laid out like the Debian package's.
void write_fortunes(const TempDir& dir) {
  dir.write("fortunes/food",
            "Eat dessert first.\n%\nA bagel is a doughnut\nwith the sin removed.\n\t\t-- G. Hummel\n%\n");
  dir.write("fortunes/food.dat", std::string("\x00\x00\x00\x02", 4));
  std::filesystem::create_symlink("food", dir.path() / "fortunes/food.u8");
  dir.write("fortunes/science", "%\nE = mc^2\n%\n%\nEntropy isn't what it used to be.\n");
  dir.write("fortunes/off/science", "excluded\n%\n");
  dir.write("fortunes/.hidden", "not a category\n");
  std::filesystem::create_symlink("science", dir.path() / "fortunes/science-link");
}

TEST(Fortunes, EntriesAreSeparatedByPercentLinesAndEmptyOnesSkipped) {
  TempDir dir;
  write_fortunes(dir);
  auto entries = read_fortune_file(dir.path() / "fortunes/science");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].text, "E = mc^2");
  EXPECT_EQ(entries[0].line, 2);
  EXPECT_EQ(entries[1].text, "Entropy isn't what it used to be.");
  EXPECT_EQ(entries[1].line, 5);
}

TEST(Fortunes, MultiLineEntriesKeepTheirLines) {
  TempDir dir;
  write_fortunes(dir);
  auto entries = read_fortune_file(dir.path() / "fortunes/food");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].text, "A bagel is a doughnut\nwith the sin removed.\n\t\t-- G. Hummel");
  EXPECT_EQ(entries[1].line, 3);
}

TEST(Fortunes, CategoriesExcludeIndexFilesSymlinksHiddenFilesAndOff) {
  TempDir dir;
  write_fortunes(dir);
  auto categories = list_fortune_categories(dir.path() / "fortunes");
  ASSERT_EQ(categories.size(), 2u);
  EXPECT_EQ(categories[0].name, "food");
  EXPECT_EQ(categories[0].entries, 2);
  EXPECT_EQ(categories[1].name, "science");
  EXPECT_EQ(categories[1].entries, 2);
  EXPECT_THAT(describe_fortune_categories(dir.path() / "fortunes"), HasSubstr("total"));
}

TEST(Fortunes, LabelsFollowTheOrderOfTheChosenCategories) {
  TempDir dir;
  write_fortunes(dir);
  Dataset d = read_fortunes({"science", "food"}, dir.path() / "fortunes");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"science", "food"}));
  ASSERT_EQ(d.size(), 4);
  EXPECT_EQ(d.examples[0].label, 0);
  EXPECT_EQ(d.examples[3].label, 1);
  EXPECT_EQ(d.examples[3].source, (dir.path() / "fortunes/food").string() + ":3");
}

TEST(Fortunes, UnknownCategoryListsTheAvailableOnes) {
  TempDir dir;
  write_fortunes(dir);
  auto folder = dir.path() / "fortunes";
  EXPECT_THAT(error_of([&] {
                read_fortunes({"food", "sports"}, folder);
              }),
              StartsWith(folder.string() + ": no fortune category 'sports' (available: food, science)"));
  EXPECT_THAT(error_of([&] { read_fortunes({"food.dat"}, folder); }), HasSubstr("no fortune category 'food.dat'"));
  EXPECT_THAT(error_of([&] { read_fortunes({"off"}, folder); }), HasSubstr("no fortune category 'off'"));
}

TEST(Fortunes, RepeatedCategoryIsAnError) {
  TempDir dir;
  write_fortunes(dir);
  EXPECT_THAT(error_of([&] {
                read_fortunes({"food", "food"}, dir.path() / "fortunes");
              }),
              HasSubstr("category 'food' is listed twice"));
}

TEST(Fortunes, CategoryWithoutEntriesIsAnError) {
  TempDir dir;
  write_fortunes(dir);
  auto empty = dir.write("fortunes/void", "%\n%\n");
  EXPECT_THAT(error_of([&] {
                read_fortunes({"food", "void"}, dir.path() / "fortunes");
              }),
              StartsWith(empty.string() + ": category has no entries"));
}

TEST(Fortunes, MissingFolderSuggestsInstallingThePackage) {
  TempDir dir;
  EXPECT_THAT(
      error_of([&] { read_fortunes({"food"}, dir.path() / "none"); }),
      AllOf(StartsWith((dir.path() / "none").string() + ": no such folder"), HasSubstr("apt-get install fortunes")));
}

TEST(Fortunes, InvalidUtf8NamesFileAndLine) {
  TempDir dir;
  write_fortunes(dir);
  auto bad = dir.write("fortunes/food", "fine\n%\nna\xC3\xAFve\n%\nbad \xC3\n");
  EXPECT_THAT(error_of([&] { read_fortunes({"food"}, dir.path() / "fortunes"); }),
              StartsWith(bad.string() + ":5: invalid UTF-8 at byte offset 20"));
}

// The real package, when installed (scripts/setup.sh installs it).
TEST(Fortunes, DefaultDemoCategoriesExistInTheDebianPackage) {
  if (!std::filesystem::is_directory(kDefaultFortunesDir)) GTEST_SKIP() << "the fortunes package is not installed";
  Dataset d = read_fortunes(default_fortune_categories());
  EXPECT_EQ(d.num_classes(), 5);
  for (int64_t n : d.class_counts()) EXPECT_GE(n, 100);
  d.validate();
  EXPECT_LT(d.majority_fraction(), 0.5);  // the demo must beat a baseline well below one half
}

}  // namespace
}  // namespace tandem::data
