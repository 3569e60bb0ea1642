#include "data/csv_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::StartsWith;
using testing::TempDir;

CsvDatasetOptions with_header(std::string label, std::vector<std::string> texts) {
  CsvDatasetOptions o;
  o.header = true;
  o.label_column = std::move(label);
  o.text_columns = std::move(texts);
  return o;
}

TEST(CsvDataset, HeaderNamesPickTheLabelAndJoinTheTextColumns) {
  TempDir dir;
  auto path = dir.write("d.csv",
                        "id,title,sentiment,body\n"
                        "1,\"Good, really\",pos,\"Two\nlines\"\n"
                        "2,Meh,neg,\n");
  Dataset d = read_csv_dataset(path, with_header("sentiment", {"title", "body"}));
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(d.examples[0].text, "Good, really Two\nlines");
  EXPECT_EQ(d.examples[0].label, 1);
  EXPECT_EQ(d.examples[1].text, "Meh");
  EXPECT_EQ(d.examples[1].source, path.string() + ":4");
}

TEST(CsvDataset, IndicesWithoutAHeaderAndATabDelimiter) {
  TempDir dir;
  auto path = dir.write("d.tsv", "text one\t0\n\"quoted\ttab\"\t2\n");
  CsvDatasetOptions o;
  o.delimiter = '\t';
  o.label_column = "1";
  o.text_columns = {"0"};
  Dataset d = read_csv_dataset(path, o);
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.examples[1].text, "quoted\ttab");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2"}));
}

TEST(CsvDataset, GivenClassNamesFixTheLabelSet) {
  TempDir dir;
  auto path = dir.write("d.csv", "label,text\nham,hello\nspam,buy now\n");
  auto o = with_header("label", {"text"});
  o.class_names = {"spam", "ham"};
  Dataset d = read_csv_dataset(path, o);
  EXPECT_EQ(d.examples[0].label, 1);
  o.class_names = {"ham"};
  EXPECT_THAT(error_of([&] { read_csv_dataset(path, o); }),
              StartsWith(path.string() + ":3: label 'spam' is not one of the classes (ham)"));
}

TEST(CsvDataset, UnknownColumnNameListsTheHeader) {
  TempDir dir;
  auto path = dir.write("d.csv", "label,text\n1,x\n");
  EXPECT_THAT(error_of([&] { read_csv_dataset(path, with_header("label", {"body"})); }),
              StartsWith(path.string() + ":1: no text column 'body' in the header (columns: label, text)"));
}

TEST(CsvDataset, AColumnNameNeedsAHeader) {
  TempDir dir;
  auto path = dir.write("d.csv", "1,x\n");
  CsvDatasetOptions o;
  o.label_column = "label";
  EXPECT_THAT(error_of([&] { read_csv_dataset(path, o); }),
              StartsWith(path.string() + ":1: label column 'label' is a name, but the file has no header"));
}

TEST(CsvDataset, ColumnIndexOutsideTheRecordIsAnError) {
  TempDir dir;
  auto path = dir.write("d.csv", "1,x\n");
  CsvDatasetOptions o;
  o.text_columns = {"5"};
  EXPECT_THAT(error_of([&] { read_csv_dataset(path, o); }),
              StartsWith(path.string() + ":1: text column 5 is outside the 2 columns of the file"));
}

TEST(CsvDataset, WrongColumnCountNamesTheLine) {
  TempDir dir;
  auto path = dir.write("d.csv", "label,text\n1,x\n2,y,z\n");
  EXPECT_THAT(error_of([&] { read_csv_dataset(path, with_header("label", {"text"})); }),
              StartsWith(path.string() + ":3: expected 2 columns (as in the header), found 3"));
}

TEST(CsvDataset, EmptyTextNamesTheLine) {
  TempDir dir;
  auto path = dir.write("d.csv", "1,x\n0,  \n");
  EXPECT_THAT(error_of([&] { read_csv_dataset(path); }), StartsWith(path.string() + ":2: empty text"));
}

TEST(CsvDataset, QuotingErrorsNameTheLine) {
  TempDir dir;
  auto path = dir.write("d.csv", "1,x\n0,\"open\n");
  EXPECT_THAT(error_of([&] { read_csv_dataset(path); }),
              StartsWith(path.string() + ":2: quoted field is never closed"));
}

}  // namespace
}  // namespace tandem::data
