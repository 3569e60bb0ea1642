// Padding to a batch's longest row (data/batch_padding.h) and grouping by length
// (data/length_grouping.h), the pieces the DataLoader and the sampler use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "data/batch_padding.h"
#include "data/length_grouping.h"
#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// Rows of `seq` mask bytes, row i with its first lengths[i] bytes set.
std::vector<uint8_t> prefix_masks(const std::vector<int64_t>& lengths, int64_t seq) {
  std::vector<uint8_t> m(lengths.size() * static_cast<size_t>(seq), 0);
  for (size_t i = 0; i < lengths.size(); ++i)
    for (int64_t j = 0; j < lengths[i]; ++j) m[i * static_cast<size_t>(seq) + static_cast<size_t>(j)] = 1;
  return m;
}

TEST(LongestPaddedLength, IsOnePastTheLastRealPositionOfAnyRow) {
  const auto m = prefix_masks({3, 9, 5}, 16);
  EXPECT_EQ(longest_padded_length(m.data(), 3, 16, 1), 9);
  EXPECT_EQ(longest_padded_length(m.data(), 1, 16, 1), 3);  // only the first row
}

TEST(LongestPaddedLength, CountsARealTokenAfterAHoleInTheMask) {
  // Term counts or custom sources may leave zeros inside a row: the row still ends at its last nonzero.
  std::vector<uint8_t> m = {1, 0, 0, 4, 0, 0, 0, 0};
  EXPECT_EQ(longest_padded_length(m.data(), 1, 8, 1), 4);
}

TEST(LongestPaddedLength, RoundsUpToTheMultipleButNeverPastTheRowLength) {
  const auto m = prefix_masks({3, 9}, 20);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 20, 8), 16);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 20, 9), 9);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 20, 16), 16);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 20, 32), 20);  // 32 > S: S
}

TEST(LongestPaddedLength, KeepsOneColumnForABatchWithNoRealToken) {
  const auto m = prefix_masks({0, 0}, 12);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 12, 1), 1);
  EXPECT_EQ(longest_padded_length(m.data(), 2, 12, 4), 4);
}

TEST(LongestPaddedLength, AFullRowGivesTheWholeLength) {
  const auto m = prefix_masks({2, 12, 1}, 12);
  EXPECT_EQ(longest_padded_length(m.data(), 3, 12, 5), 12);
}

TEST(ShortenRows, MovesEachRowsFirstElementsToARowMajorArrayOfTheShorterLength) {
  for (size_t elem : {size_t{1}, size_t{4}, size_t{8}}) {
    const int64_t rows = 5, seq = 7, length = 3;
    std::vector<uint8_t> buf(static_cast<size_t>(rows * seq) * elem);
    std::iota(buf.begin(), buf.end(), uint8_t{0});
    const std::vector<uint8_t> before = buf;
    shorten_rows(buf.data(), rows, seq, length, elem);
    for (int64_t r = 0; r < rows; ++r)
      for (size_t b = 0; b < static_cast<size_t>(length) * elem; ++b)
        ASSERT_EQ(buf[static_cast<size_t>(r * length) * elem + b], before[static_cast<size_t>(r * seq) * elem + b])
            << "row " << r << " byte " << b << " of " << elem << "-byte elements";
  }
}

TEST(ShortenRows, ALengthOfTheWholeRowLeavesTheBufferAlone) {
  std::vector<int32_t> buf = {1, 2, 3, 4, 5, 6};
  shorten_rows(buf.data(), 2, 3, 3, sizeof(int32_t));
  EXPECT_EQ(buf, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(ShortenRows, ALengthPastTheRowIsAnError) {
  std::vector<int32_t> buf(6);
  EXPECT_THAT(error_of([&] { shorten_rows(buf.data(), 2, 3, 4, sizeof(int32_t)); }), HasSubstr("length 4 outside"));
}

TEST(CutToLongest, CutsIdsAndMaskAlikeAndReturnsTheLength) {
  // Rows of 5: lengths 2 and 3, in steps of 2: 4 columns.
  std::vector<int64_t> ids = {1, 2, 0, 0, 0, 6, 7, 8, 0, 0};
  std::vector<uint8_t> mask = {1, 1, 0, 0, 0, 1, 1, 1, 0, 0};
  EXPECT_EQ(cut_to_longest(ids.data(), sizeof(int64_t), mask.data(), 2, 5, 2), 4);
  EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.begin() + 8), (std::vector<int64_t>{1, 2, 0, 0, 6, 7, 8, 0}));
  EXPECT_EQ(std::vector<uint8_t>(mask.begin(), mask.begin() + 8), (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 1, 0}));
}

TEST(MeanLongestRow, WeighsEachBatchsLongestRowByItsRows) {
  const std::vector<int64_t> lengths = {5, 1, 2, 9, 3};
  // Batches {5, 1} {2, 9} {3}: (2 x 5 + 2 x 9 + 1 x 3) / 5.
  EXPECT_DOUBLE_EQ(mean_longest_row({0, 1, 2, 3, 4}, lengths, 2), 31.0 / 5.0);
  // Sorted: {9, 5} {3, 2} {1}: (18 + 6 + 1) / 5.
  EXPECT_DOUBLE_EQ(mean_longest_row({3, 0, 4, 2, 1}, lengths, 2), 25.0 / 5.0);
  EXPECT_DOUBLE_EQ(mean_longest_row({}, lengths, 2), 0.0);
}

TEST(Padding, ItsTwoNamesParseAndAnotherIsAnErrorNamingTheKey) {
  EXPECT_EQ(parse_padding("longest", "data.padding"), Padding::Longest);
  EXPECT_EQ(parse_padding("max_length", "data.padding"), Padding::MaxLength);
  EXPECT_THAT(error_of([] { parse_padding("do_not_pad", "data.padding"); }),
              HasSubstr("data.padding must be max_length or longest, got 'do_not_pad'"));
}

// --- group_by_length ---------------------------------------------------------------

TEST(GroupByLength, MatchesHuggingFacesLengthGroupedIndicesFromTheSamePermutation) {
  std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/length_grouping_hf.json");
  ASSERT_TRUE(in.good());
  const auto cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& c : cases) {
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    const auto order = c["order"].get<std::vector<int64_t>>();
    EXPECT_EQ(group_by_length(order, lengths, c["batch_size"].get<int64_t>()), c["grouped"].get<std::vector<int64_t>>())
        << c["name"];
  }
}

TEST(GroupByLength, SortsEachMegabatchByDescendingLengthKeepingItsExamples) {
  // 16 examples, batch 2: 16 / 8 = 2 batches (4 examples) per megabatch. The longest example
  // (index 0) is in the first megabatch already, so the swap to the front changes nothing.
  const std::vector<int64_t> lengths = {15, 3, 9, 9, 1, 14, 2, 8, 4, 4, 13, 0, 6, 12, 7, 5};
  std::vector<int64_t> order(16);
  std::iota(order.begin(), order.end(), int64_t{0});
  ASSERT_EQ(megabatch_batches(16, 2), 2);
  EXPECT_EQ(group_by_length(order, lengths, 2),
            (std::vector<int64_t>{0, 2, 3, 1, 5, 7, 6, 4, 10, 8, 9, 11, 13, 14, 12, 15}));  // 9 and 9, 4 and 4: stable
}

TEST(GroupByLength, TheLongestExampleOfALaterMegabatchSwapsPlacesWithTheFirstMegabatchsHead) {
  const std::vector<int64_t> lengths = {5, 1, 2, 3, 9, 4, 8, 7};  // batch 1: 8 / 4 = 2 batches per megabatch
  std::vector<int64_t> order(8);
  std::iota(order.begin(), order.end(), int64_t{0});
  // Megabatches {0, 1} {2, 3} {4, 5} {6, 7} sort to {0, 1} {3, 2} {4, 5} {6, 7}; 4 (length 9) and 0 swap.
  EXPECT_EQ(group_by_length(order, lengths, 1), (std::vector<int64_t>{4, 1, 3, 2, 0, 5, 6, 7}));
}

TEST(GroupByLength, UsesFiftyBatchesPerMegabatchAtMostAndOneAtLeast) {
  EXPECT_EQ(megabatch_batches(100000, 32), 50);
  EXPECT_EQ(megabatch_batches(1000, 32), 7);  // 1000 / 128
  EXPECT_EQ(megabatch_batches(10, 32), 1);
}

TEST(GroupByLength, AnIndexOutsideTheLengthsOrAnEmptyBatchIsAnError) {
  EXPECT_THAT(error_of([] { group_by_length({0, 3}, {1, 2, 3}, 1); }), HasSubstr("index 3 outside the 3 lengths"));
  EXPECT_THAT(error_of([] { group_by_length({0}, {1}, 0); }), HasSubstr("at least 1 example, got 0"));
}

}  // namespace
}  // namespace tandem::data
