#include "data/dataset.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Dataset make(const std::vector<int>& per_class) {
  Dataset d;
  for (size_t c = 0; c < per_class.size(); ++c) {
    d.class_names.push_back(fmt::format("c{}", c));
    for (int i = 0; i < per_class[c]; ++i)
      d.examples.push_back(
          {fmt::format("text {}/{}", c, i), static_cast<int32_t>(c), fmt::format("f:{}", d.examples.size() + 1)});
  }
  return d;
}

TEST(Dataset, ClassCountsAndMajorityBaseline) {
  Dataset d = make({2, 5, 3});
  EXPECT_EQ(d.class_counts(), (std::vector<int64_t>{2, 5, 3}));
  EXPECT_DOUBLE_EQ(d.majority_fraction(), 0.5);
  EXPECT_THAT(describe(d, "train"), HasSubstr("majority-class baseline accuracy: 50.0%"));
}

TEST(Dataset, ValidateNamesTheSourceOfABadExample) {
  Dataset d = make({1, 1});
  d.examples[1].label = 7;
  EXPECT_THAT(error_of([&] { d.validate(); }), StartsWith("f:2: label 7 is outside [0, 2)"));
  d.examples[1].label = 0;
  d.examples[0].text = " \t";
  EXPECT_THAT(error_of([&] { d.validate(); }), StartsWith("f:1: empty text"));
}

TEST(Dataset, SplitIsStratifiedDisjointAndCovering) {
  Dataset d = make({40, 100, 7});
  auto [train, test] = split_train_test(d, 0.1, 42);
  EXPECT_EQ(test.class_counts(), (std::vector<int64_t>{4, 10, 1}));  // round(0.1 * n) per class
  EXPECT_EQ(train.size() + test.size(), d.size());
  std::set<std::string> seen;
  for (const auto& e : train.examples) seen.insert(e.source);
  for (const auto& e : test.examples) EXPECT_TRUE(seen.insert(e.source).second) << e.source << " in both";
  EXPECT_EQ(static_cast<int64_t>(seen.size()), d.size());
  EXPECT_EQ(train.class_names, d.class_names);
}

TEST(Dataset, SplitIsDeterministicForASeedAndChangesWithIt) {
  Dataset d = make({50, 50});
  auto sources = [](const Dataset& x) {
    std::vector<std::string> s;
    for (const auto& e : x.examples) s.push_back(e.source);
    return s;
  };
  EXPECT_EQ(sources(split_train_test(d, 0.2, 7).second), sources(split_train_test(d, 0.2, 7).second));
  EXPECT_NE(sources(split_train_test(d, 0.2, 7).second), sources(split_train_test(d, 0.2, 8).second));
}

}  // namespace
}  // namespace tandem::data
