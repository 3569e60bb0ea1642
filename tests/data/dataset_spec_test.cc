#include "data/dataset_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(LoadDataset, UnknownFormatIsAnErrorListingTheKnownOnes) {
  DatasetSpec spec;
  spec.format = "parquet";
  EXPECT_THAT(error_of([&] { load_dataset(spec); }),
              HasSubstr("unknown dataset format 'parquet' (expected ag_news, csv, imdb, jsonl, tsv or fortunes)"));
}

TEST(LoadDataset, PassesReaderOptionsThrough) {
  TempDir dir;
  DatasetSpec spec;
  spec.format = "jsonl";
  spec.path = dir.write("d.jsonl", "{\"body\": \"x\", \"y\": \"pos\"}\n");
  spec.text_field = "body";
  spec.label_field = "y";
  spec.class_names = {"neg", "pos"};
  Dataset d = load_dataset(spec);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.examples[0].label, 1);

  spec.format = "tsv";
  spec.path = dir.write("d.tsv", "h1\th2\th3\nx\tneg\tsome text\n");
  spec.header = true;
  spec.num_columns = 3;
  spec.label_column = 1;
  spec.text_column = 2;
  d = load_dataset(spec);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.examples[0].text, "some text");
  EXPECT_EQ(d.examples[0].label, 0);

  spec.format = "csv";
  spec.path = dir.write("d.csv", "kind,a,b\npos,x,y\n");
  spec.csv.label_column = "kind";
  spec.csv.text_columns = {"b", "a"};
  d = load_dataset(spec);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.examples[0].text, "y x");
  EXPECT_EQ(d.examples[0].label, 1);
}

TEST(LoadDataset, FortuneSplitsAreDisjointAndCoverTheCategories) {
  TempDir dir;
  std::string a, b;
  for (int i = 0; i < 30; ++i) a += "alpha entry " + std::to_string(i) + "\n%\n";
  for (int i = 0; i < 10; ++i) b += "beta entry " + std::to_string(i) + "\n%\n";
  dir.write("f/alpha", a);
  dir.write("f/beta", b);
  DatasetSpec spec;
  spec.format = "fortunes";
  spec.path = dir.path() / "f";
  spec.categories = {"beta", "alpha"};
  spec.test_fraction = 0.2;
  spec.split_seed = 3;
  Dataset train = load_dataset(spec);
  spec.split = "test";
  Dataset test = load_dataset(spec);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"beta", "alpha"}));
  EXPECT_EQ(test.class_counts(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(train.class_counts(), (std::vector<int64_t>{8, 24}));
  std::set<std::string> texts;
  for (const auto& e : train.examples) texts.insert(e.text);
  for (const auto& e : test.examples) EXPECT_TRUE(texts.insert(e.text).second) << e.text << " in both splits";
  spec.split = "validation";
  EXPECT_THAT(error_of([&] { load_dataset(spec); }), HasSubstr("split must be 'train' or 'test'"));
}

}  // namespace
}  // namespace tandem::data
