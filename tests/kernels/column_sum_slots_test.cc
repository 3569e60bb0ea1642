// The slot count of the deterministic column sums (kernels/column_sum_slots.h):
// what bias and layer-norm parameter gradients on the GPU are summed over.
#include "kernels/column_sum_slots.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tandem::kernels {
namespace {

TEST(ColumnSumSlots, OneSlotPerThirtyTwoRows) {
  EXPECT_EQ(column_sum_slots(16384, 768), 512);  // kernels_bench's layer norm
  EXPECT_EQ(column_sum_slots(33, 256), 2);       // a partial last slot
  EXPECT_EQ(column_sum_slots(32, 256), 1);
}

TEST(ColumnSumSlots, AtMostTenTwentyFourSlots) {
  // configs/ag_news_optimized.yaml's layer norms and d_model-wide biases: 128 x 256 tokens of 256.
  EXPECT_EQ(column_sum_slots(32768, 256), 1024);
  EXPECT_EQ(column_sum_slots(int64_t{1} << 24, 64), 1024);
}

TEST(ColumnSumSlots, PartialsStayWithinSixteenMebibytes) {
  // 65536 rows of 8192: 1024 slots would be 32 MiB of f32 partials.
  EXPECT_EQ(column_sum_slots(65536, 8192), kColumnSumMaxPartialElements / 8192);
  for (int64_t rows : {int64_t{1} << 20, int64_t{1} << 24})
    for (int64_t dim : {64, 768, 8192, 65536}) {
      const int64_t s = column_sum_slots(rows, dim);
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
