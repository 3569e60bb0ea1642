// train::SyntheticSource, the benchmarks' data without files: full-length rows
// by default; with a real fraction, right-padded rows whose mask, ids and
// lengths follow its header's rule (a prefix of real tokens, [CLS] first,
// [PAD] after, lengths in [1, 2 ceil(F S) - 1] with a mean near F S); the same
// row for the same example; clear errors for bad sizes.
#include "train/synthetic_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "data/tokenizer.h"
#include "tests/testing/errors.h"

namespace tandem::train {
namespace {

struct Rows {
  std::vector<int64_t> ids, labels;
  std::vector<uint8_t> mask;
};

Rows fill(const SyntheticSource& source, const std::vector<int64_t>& indices) {
  const auto n = static_cast<size_t>(source.seq_len()) * indices.size();
  Rows r{std::vector<int64_t>(n), std::vector<int64_t>(indices.size()), std::vector<uint8_t>(n)};
  source.fill(indices, {r.ids.data(), DType::I64, r.mask.data(), r.labels.data()});
  return r;
}

std::vector<int64_t> first_examples(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(SyntheticSource, RowsAreFullLengthByDefault) {
  const SyntheticSource source(100, 16, 50);
  const Rows r = fill(source, first_examples(10));
  for (uint8_t m : r.mask) EXPECT_EQ(m, 1);
  for (size_t row = 0; row < 10; ++row) {
    EXPECT_EQ(r.ids[row * 16], data::Tokenizer::kCls);
    for (size_t j = 1; j < 16; ++j) EXPECT_GE(r.ids[row * 16 + j], 3);
    EXPECT_EQ(r.labels[row], static_cast<int64_t>(row) % kSyntheticClasses);
  }
}

TEST(SyntheticSource, PaddedRowsAreARealPrefixThenPadding) {
  const int64_t seq = 64;
  const SyntheticSource source(1000, seq, 50, 0.25);
  const Rows r = fill(source, first_examples(200));
  for (int64_t row = 0; row < 200; ++row) {
    const int64_t length = source.length(row);
    ASSERT_GE(length, 1);
    ASSERT_LE(length, 2 * 16 - 1);  // 2 ceil(0.25 * 64) - 1
    for (int64_t j = 0; j < seq; ++j) {
      const size_t at = static_cast<size_t>(row * seq + j);
      EXPECT_EQ(r.mask[at], j < length ? 1 : 0) << "row " << row << ", token " << j;
      if (j >= length) EXPECT_EQ(r.ids[at], data::Tokenizer::kPad);
      else if (j == 0) EXPECT_EQ(r.ids[at], data::Tokenizer::kCls);
      else EXPECT_GE(r.ids[at], 3);
    }
  }
}

TEST(SyntheticSource, PaddedRowsAverageTheRealFraction) {
  const int64_t seq = 256;
  const SyntheticSource source(4096, seq, 50, 0.25);
  double total = 0;
  for (int64_t i = 0; i < 4096; ++i) total += static_cast<double>(source.length(i));
  // Uniform on 1..127: mean 64, standard error of the mean about 0.6.
  EXPECT_NEAR(total / 4096, 64.0, 3.0);
}

TEST(SyntheticSource, LengthsAreCappedAtTheSequence) {
  const SyntheticSource source(500, 10, 50, 0.9);  // 2 * 9 - 1 = 17 > 10
  for (int64_t i = 0; i < 500; ++i) EXPECT_LE(source.length(i), 10);
}

TEST(SyntheticSource, TheSameExampleGivesTheSameRow) {
  const SyntheticSource source(100, 32, 50, 0.5);
  const Rows a = fill(source, {7, 3}), b = fill(source, {3, 7});
  for (size_t j = 0; j < 32; ++j) {
    EXPECT_EQ(a.ids[j], b.ids[32 + j]);
    EXPECT_EQ(a.mask[j], b.mask[32 + j]);
  }
}

TEST(SyntheticSource, RejectsBadSizesWithAClearMessage) {
  EXPECT_TRUE(testing::throws_error_containing([] { SyntheticSource(10, 8, 50, 0.0); }, "must be in (0, 1], got 0"));
  EXPECT_TRUE(testing::throws_error_containing([] { SyntheticSource(10, 8, 50, 1.5); }, "must be in (0, 1], got 1.5"));
  EXPECT_TRUE(testing::throws_error_containing([] { SyntheticSource(10, 8, 3); }, "vocab_max_size > 3"));
}

}  // namespace
}  // namespace tandem::train
