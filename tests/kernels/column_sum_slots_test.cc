// The slot count of the deterministic column sums (kernels/column_sum_slots.h):
// what bias and layer-norm parameter gradients on the GPU are summed over.
#include "kernels/column_sum_slots.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tandem::kernels {
namespace {

TEST(ColumnSumSlots, NarrowRowsGetEightRowsPerSlotSoThatSixteenBitPassesFillTheGpu) {
  // configs/ag_news_optimized.yaml's layer norms and d_model-wide biases: 128 x 256 tokens of 256.
  EXPECT_EQ(column_sum_slots(32768, 256), 4096);
  // kernels_bench's layer norm: 16384 rows of 768 (2M / 768 = 2731 wanted, 2048 allowed).
  EXPECT_EQ(column_sum_slots(16384, 768), 2048);
}

TEST(ColumnSumSlots, WideRowsAimAtTwoMillionSlotElements) {
  EXPECT_EQ(column_sum_slots(16384, 3072), 683);  // ceil(2^21 / 3072)
  EXPECT_EQ(column_sum_slots(16384, 1024), 2048);
}

TEST(ColumnSumSlots, NeverMoreThanThirtyTwoRowsPerSlotBelowTheCaps) {
  for (int64_t rows : {1, 7, 33, 1000, 4096, 65536})
    for (int64_t dim : {1, 8, 256, 768, 3072, 4096}) {
      const int64_t s = column_sum_slots(rows, dim);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, rows) << "a slot without rows";
      const bool capped = s == kColumnSumMaxSlots || (s + 1) * dim > kColumnSumMaxPartialElements;
      if (!capped) EXPECT_GE(s * 32, rows) << rows << " x " << dim;
    }
}

TEST(ColumnSumSlots, PartialsStayWithinSixteenMebibytesAndTheSlotCap) {
  // 65536 rows of 3072 (batch 128 x 512 tokens through a 3072-wide FFN): 1365 slots of 48 rows.
  EXPECT_EQ(column_sum_slots(65536, 3072), kColumnSumMaxPartialElements / 3072);
  for (int64_t rows : {int64_t{1} << 20, int64_t{1} << 24})
    for (int64_t dim : {64, 768, 8192, 65536}) {
      const int64_t s = column_sum_slots(rows, dim);
      EXPECT_LE(s, kColumnSumMaxSlots);
      EXPECT_LE(s * dim, kColumnSumMaxPartialElements) << rows << " x " << dim;
      EXPECT_GE(s, 1);
    }
}

TEST(ColumnSumSlots, OneRowViewedAsALongRowGetsOneSlot) {
  // bias_dropout_add without a bias views the data as one row of rows * dim elements.
  EXPECT_EQ(column_sum_slots(1, int64_t{1} << 30), 1);
  EXPECT_EQ(column_sum_slots(0, 768), 1);
}

}  // namespace
}  // namespace tandem::kernels
