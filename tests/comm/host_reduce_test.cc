// The ring's arithmetic: f32 accumulation for 16-bit floats, NaN-preserving
// max, integer averages truncated toward zero.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "comm/host_reduce.h"
#include "core/half.h"
#include "core/tensor.h"

namespace tandem::comm {
namespace {

TEST(HostReduce, Bf16SumsAreComputedInF32AndRoundedOnce) {
  // bf16 values near 256 are 2 apart: 256 + 1 = 257 (exact in f32) is a tie
  // and rounds to the even neighbour, 256. 1.5 + 1.5 = 3 is exact.
  Tensor a = Tensor::from_vector(std::vector<double>{256, 1.5}, {2}, DType::BF16);
  Tensor b = Tensor::from_vector(std::vector<double>{1.0, 1.5}, {2}, DType::BF16);
  host_reduce(a.data_ptr(), a.data_ptr(), b.data_ptr(), DType::BF16, 2, ReduceOp::Sum);
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{256, 3}));
}

TEST(HostReduce, F16SumMatchesF32ThenRoundToNearestEven) {
  Tensor a = Tensor::from_vector(std::vector<double>{0.1, 1000, -3.25}, {3}, DType::F16);
  Tensor b = Tensor::from_vector(std::vector<double>{0.2, 0.3, 3.25}, {3}, DType::F16);
  auto av = a.to_double_vector(), bv = b.to_double_vector();
  host_reduce(a.data_ptr(), a.data_ptr(), b.data_ptr(), DType::F16, 3, ReduceOp::Sum);
  for (int i = 0; i < 3; ++i) {
    float want = f16_bits_to_float(float_to_f16_bits(static_cast<float>(av[i]) + static_cast<float>(bv[i])));
    EXPECT_EQ(a.to_double_vector()[i], want) << i;
  }
}

TEST(HostReduce, MaxKeepsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = Tensor::from_vector(std::vector<double>{1, nan, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<double>{nan, 2, -1}, {3});
  host_reduce(a.data_ptr(), a.data_ptr(), b.data_ptr(), DType::F32, 3, ReduceOp::Max);
  auto v = a.to_double_vector();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], 3);
}

TEST(HostReduce, I64MaxIsExactBeyondF32Precision) {
  Tensor a = Tensor::from_vector(std::vector<int64_t>{(1LL << 40) + 1}, {1});
  Tensor b = Tensor::from_vector(std::vector<int64_t>{(1LL << 40)}, {1});
  host_reduce(a.data_ptr(), a.data_ptr(), b.data_ptr(), DType::I64, 1, ReduceOp::Max);
  EXPECT_EQ(a.to_int_vector()[0], (1LL << 40) + 1);
}

TEST(HostReduce, OutOfPlaceLeavesBothInputsAlone) {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 5}, {2});
  Tensor b = Tensor::from_vector(std::vector<double>{4, 2}, {2});
  Tensor d = Tensor::zeros({2});
  host_reduce(d.data_ptr(), a.data_ptr(), b.data_ptr(), DType::F32, 2, ReduceOp::Max);
  EXPECT_EQ(d.to_double_vector(), (std::vector<double>{4, 5}));
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{1, 5}));
}

TEST(HostReduce, IntegerAverageTruncatesTowardZero) {
  Tensor a = Tensor::from_vector(std::vector<int64_t>{7, -7, 6}, {3}, DType::I32);
  host_divide(a.data_ptr(), DType::I32, 3, 3);
  EXPECT_EQ(a.to_int_vector(), (std::vector<int64_t>{2, -2, 2}));
}

}  // namespace
}  // namespace tandem::comm
