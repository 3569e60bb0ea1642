#include "data/tsv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::StartsWith;
using testing::TempDir;

TEST(Tsv, ReadsLabelTabText) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tgood movie\r\n0\tbad, really bad\n\n1\tfine\n");
  Dataset d = read_tsv(path);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.examples[0].text, "good movie");  // CRLF stripped
  EXPECT_EQ(d.examples[1].label, 0);
  EXPECT_EQ(d.examples[2].source, path.string() + ":4");
}

TEST(Tsv, ColumnsAndHeaderAreConfigurable) {
  TempDir dir;
  auto path = dir.write("d.tsv", "id\tsentence\tsentiment\n7\tit works\tpositive\n8\tit broke\tnegative\n");
  Dataset d = read_tsv(path, TsvOptions{2, 1, 3, true, {}});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"negative", "positive"}));
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.examples[0].text, "it works");
  EXPECT_EQ(d.examples[0].label, 1);
}

TEST(Tsv, WrongColumnCountNamesFileAndLine) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tok\n0\ttoo\tmany\n");
  EXPECT_THAT(error_of([&] { read_tsv(path); }),
              StartsWith(path.string() + ":2: expected 2 tab-separated columns, found 3"));
}

TEST(Tsv, MissingTabIsAWrongColumnCount) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1 no tab here\n");
  EXPECT_THAT(error_of([&] { read_tsv(path); }),
              StartsWith(path.string() + ":1: expected 2 tab-separated columns, found 1"));
}

TEST(Tsv, EmptyLabelIsAnError) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tok\n\tno label\n");
  EXPECT_THAT(error_of([&] { read_tsv(path); }), StartsWith(path.string() + ":2: empty label"));
}

TEST(Tsv, LabelOutsideTheGivenClassesIsAnError) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tok\n5\tfive\n");
  EXPECT_THAT(error_of([&] {
                read_tsv(path, TsvOptions{0, 1, 2, false, {"neg", "pos"}});
              }),
              StartsWith(path.string() + ":2: label 5 is outside [0, 2)"));
}

TEST(Tsv, EmptyTextIsAnError) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tok\n0\t   \n");
  EXPECT_THAT(error_of([&] { read_tsv(path); }), StartsWith(path.string() + ":2: empty text in column 1"));
}

TEST(Tsv, InvalidUtf8NamesLineAndOffset) {
  TempDir dir;
  auto path = dir.write("d.tsv", "1\tok\n0\tna\xEF\xBF\n");
  EXPECT_THAT(error_of([&] { read_tsv(path); }),
              StartsWith(path.string() + ":2: invalid UTF-8 at byte offset 9 (column 5"));
}

TEST(Tsv, MissingFileIsAnError) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { read_tsv(dir.path() / "none.tsv"); }),
              StartsWith((dir.path() / "none.tsv").string() + ": no such file"));
}

}  // namespace
}  // namespace tandem::data
