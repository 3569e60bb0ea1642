#include "data/ag_news.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

TEST(AgNews, ReadsOneBasedClassesAndJoinsTitleAndDescription) {
  TempDir dir;
  auto path = dir.write("train.csv",
                        "\"3\",\"Wall St. Bears Claw Back\",\"Short-sellers, Wall Street's dwindling band.\"\n"
                        "\"1\",\"Title, with comma\",\"A \"\"quoted\"\" word\nand a second line\"\n"
                        "\"4\",\"\",\"Only a description\"\n");
  Dataset d = read_ag_news_csv(path, {ag_news_class_names()});
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"World", "Sports", "Business", "Sci/Tech"}));
  EXPECT_EQ(d.examples[0].label, 2);
  EXPECT_EQ(d.examples[0].text, "Wall St. Bears Claw Back Short-sellers, Wall Street's dwindling band.");
  EXPECT_EQ(d.examples[1].label, 0);
  EXPECT_EQ(d.examples[1].text, "Title, with comma A \"quoted\" word\nand a second line");
  EXPECT_EQ(d.examples[2].text, "Only a description");
  EXPECT_EQ(d.examples[2].source, path.string() + ":4");  // the 2nd record spans lines 2-3
}

TEST(AgNews, SkipsAKaggleStyleHeader) {
  TempDir dir;
  auto path = dir.write("train.csv", "Class Index,Title,Description\n2,Match report,The home side won.\n");
  Dataset d = read_ag_news_csv(path);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.examples[0].label, 1);
}

TEST(AgNews, WrongColumnCountNamesFileAndLine) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"2\",\"only two\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }),
              StartsWith(path.string() + ":2: expected 3 columns (class, then 2 text columns, as in the first record), "
                                         "found 2"));
}

TEST(AgNews, NonIntegerLabelIsAnError) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"sports\",\"t\",\"d\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }),
              StartsWith(path.string() + ":2: label 'sports' is not an integer"));
}

TEST(AgNews, LabelZeroIsOutOfRangeBecauseClassesAreOneBased) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"0\",\"t\",\"d\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }), StartsWith(path.string() + ":1: label 0 is below 1"));
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path, {ag_news_class_names()}); }),
              StartsWith(path.string() + ":1: label 0 is outside 1..4"));
}

TEST(AgNews, LabelAboveTheDeclaredClassCountIsAnError) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"2\",\"t\",\"d\"\n\"3\",\"t\",\"d\"\n");
  AgNewsOptions two_classes{{"a", "b"}};
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path, two_classes); }),
              StartsWith(path.string() + ":3: label 3 is outside 1..2"));
}

TEST(AgNews, WithoutClassNamesTheClassesAreOneToTheLargestLabel) {
  // A DBpedia-style file with 7 classes: AG News's 4 names must not bound it.
  TempDir dir;
  auto path = dir.write("train.csv", "\"7\",\"Title\",\"Body\"\n\"2\",\"t\",\"d\"\n");
  Dataset d = read_ag_news_csv(path);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(d.examples[0].label, 6);
  EXPECT_EQ(d.examples[1].label, 1);
}

TEST(AgNews, YahooAnswersStyleTextColumnsAreJoinedSkippingEmptyOnes) {
  TempDir dir;
  auto path = dir.write("train.csv",
                        "\"3\",\"Why is the sky blue?\",\"\",\"Rayleigh scattering.\"\n"
                        "\"10\",\"Q\",\"details\",\"answer\"\n");
  Dataset d = read_ag_news_csv(path);
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.examples[0].text, "Why is the sky blue? Rayleigh scattering.");
  EXPECT_EQ(d.examples[1].text, "Q details answer");
  EXPECT_EQ(d.num_classes(), 10);
}

TEST(AgNews, YelpStyleTwoColumnsHoldOneText) {
  TempDir dir;
  auto path = dir.write("train.csv", "\"2\",\"Great food, slow service.\"\n\"1\",\"Never again\"\n");
  Dataset d = read_ag_news_csv(path);
  EXPECT_EQ(d.examples[0].text, "Great food, slow service.");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"1", "2"}));
}

TEST(AgNews, ASingleColumnIsAnError) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }),
              StartsWith(path.string() + ":1: expected a class column and at least one text column, found 1 column"));
}

TEST(AgNews, EmptyTitleAndDescriptionIsAnError) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"1\",\"  \",\"\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }), StartsWith(path.string() + ":2: empty text"));
}

TEST(AgNews, InvalidUtf8NamesLineAndByteOffset) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"2\",\"caf\xE9\",\"d\"\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }),
              StartsWith(path.string() + ":2: invalid UTF-8 at byte offset 20 (column 9, byte 0xE9)"));
}

TEST(AgNews, MissingFileIsAnErrorNamingIt) {
  TempDir dir;
  auto path = dir.path() / "nope.csv";
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }), StartsWith(path.string() + ": no such file"));
}

TEST(AgNews, UnterminatedQuoteIsAnError) {
  TempDir dir;
  auto path = dir.write("bad.csv", "\"1\",\"t\",\"d\"\n\"1\",\"t\",\"open\n");
  EXPECT_THAT(error_of([&] { read_ag_news_csv(path); }),
              StartsWith(path.string() + ":2: quoted field is never closed"));
}

}  // namespace
}  // namespace tandem::data
