// masked_mean_pool, weighted_sum_pool and first_token_pool: values, padding, gradients against
// finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/pooling.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::random_tensor;

Tensor mask_of(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s, DType::U8); }

// [2, 3, 2] f32 with x[b, s, d] = 100 b + 10 s + d.
Tensor ramp() {
  std::vector<double> xs;
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 3; ++s)
      for (int d = 0; d < 2; ++d) xs.push_back(100 * b + 10 * s + d);
  return Tensor::from_vector(xs, {2, 3, 2}, DType::F32);
}

TEST(MaskedMeanPool, AveragesOnlyTheRealTokens) {
  // x[b, s, d] = 100 b + 10 s + d; batch 0 keeps s = 0, 2; batch 1 keeps s = 1.
  Tensor x = ramp();
  Tensor y = masked_mean_pool(x, mask_of({1, 0, 1, 0, 1, 0}, {2, 3}));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{10, 11, 110, 111}));
}

TEST(MaskedMeanPool, AllPaddingRowGivesZerosAndZeroGradient) {
  Tensor x = random_tensor({2, 4, 3}, 1, DType::F32).set_requires_grad(true);
  Tensor y = masked_mean_pool(x, mask_of({1, 1, 0, 0, 0, 0, 0, 0}, {2, 4}));
  std::vector<double> v = y.to_double_vector();
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_FALSE(std::isnan(v[3 + d]));
    EXPECT_EQ(v[3 + d], 0.0);
  }
  y.backward(Tensor::full({2, 3}, 1.0));
  std::vector<double> g = x.grad().to_double_vector();
  for (size_t i = 12; i < 24; ++i) EXPECT_EQ(g[i], 0.0);
  EXPECT_EQ(g[0], 0.5);  // batch 0: two real tokens
}

TEST(MaskedMeanPool, GradientMatchesFiniteDifferencesWithPadding) {
  // Row 0: three of five real (padding at the end); row 1: one real token in the middle; row 2: all padding.
  Tensor mask = mask_of({1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, {3, 5});
  EXPECT_TRUE(gradcheck([&](const auto& in) { return masked_mean_pool(in[0], mask); },
                        {random_tensor({3, 5, 4}, 2).set_requires_grad(true)}));
}

TEST(MaskedMeanPool, NonzeroMaskValuesCountAsReal) {
  Tensor x = Tensor::from_vector(std::vector<double>{2, 4}, {1, 2, 1}, DType::F64);
  EXPECT_EQ(masked_mean_pool(x, mask_of({7, 255}, {1, 2})).item(), 3.0);
}

TEST(MaskedMeanPool, MaskOfTheWrongShapeIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { masked_mean_pool(random_tensor({2, 3, 4}, 1), mask_of({1, 1, 1}, {1, 3})); }, "must be [batch, seq]"));
}

TEST(MaskedMeanPool, NonU8MaskIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { masked_mean_pool(random_tensor({1, 2, 4}, 1), Tensor::full({1, 2}, 1.0)); }, "mask must be u8"));
}

TEST(WeightedSumPool, SumsEachPositionTimesItsWeight) {
  // x[b, s, d] = 100 b + 10 s + d; row 0 weighs s = 0, 1, 2 by 0.5, 0, 2; row 1 by 0, 1, -1.
  Tensor x = ramp();
  Tensor w = Tensor::from_vector(std::vector<double>{0.5, 0, 2, 0, 1, -1}, {2, 3}, DType::F32);
  // Row 0: 0.5 * (0, 1) + 2 * (20, 21) = (40, 42.5); row 1: (110, 111) - (120, 121) = (-10, -10).
  EXPECT_EQ(weighted_sum_pool(x, w).to_double_vector(), (std::vector<double>{40, 42.5, -10, -10}));
}

TEST(WeightedSumPool, Bf16InputTakesF32WeightsAndRoundsOnce) {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3}, {1, 2, 1}, DType::BF16);
  Tensor w = Tensor::from_vector(std::vector<double>{0.25, 0.25}, {1, 2}, DType::F32);
  Tensor y = weighted_sum_pool(x, w);
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_EQ(y.item(), 1.0);
}

TEST(WeightedSumPool, GradientMatchesFiniteDifferencesAndTheWeightsGetNone) {
  Tensor w = random_tensor({3, 5}, 4);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return weighted_sum_pool(in[0], w); },
                        {random_tensor({3, 5, 4}, 5).set_requires_grad(true)}));
}

TEST(WeightedSumPool, BackwardIsTheWeightTimesTheOutputGradient) {
  Tensor x = random_tensor({1, 3, 2}, 6).set_requires_grad(true);
  Tensor w = Tensor::from_vector(std::vector<double>{0.5, 0, -2}, {1, 3}, DType::F64);
  weighted_sum_pool(x, w).backward(Tensor::from_vector(std::vector<double>{1, 3}, {1, 2}, DType::F64));
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{0.5, 1.5, 0, 0, -2, -6}));
}

TEST(WeightedSumPool, WeightsThatRequireGradAreAnError) {
  Tensor w = random_tensor({1, 2}, 7).set_requires_grad(true);
  EXPECT_TRUE(testing::throws_error_containing([&] { weighted_sum_pool(random_tensor({1, 2, 4}, 1), w); },
                                               "constants and must not require grad"));
}

TEST(WeightedSumPool, WeightsOfAnotherDtypeOrShapeAreAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { weighted_sum_pool(random_tensor({1, 2, 4}, 1, DType::F32), random_tensor({1, 2}, 2)); },
      "weights must be f32 for f32 input"));
  EXPECT_TRUE(testing::throws_error_containing(
      [] { weighted_sum_pool(random_tensor({1, 2, 4}, 1), random_tensor({2, 1}, 2)); }, "must be [batch, seq]"));
}

TEST(FirstTokenPool, TakesPositionZeroOfEverySequence) {
  std::vector<double> xs;
  for (int i = 0; i < 2 * 3 * 2; ++i) xs.push_back(i);
  Tensor y = first_token_pool(Tensor::from_vector(xs, {2, 3, 2}, DType::BF16));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{0, 1, 6, 7}));
}

TEST(FirstTokenPool, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return first_token_pool(in[0]); },
                        {random_tensor({2, 4, 3}, 3).set_requires_grad(true)}));
}

TEST(FirstTokenPool, EmptySequenceIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing([] { first_token_pool(Tensor::zeros({2, 0, 3})); }, "has no tokens"));
}

}  // namespace
}  // namespace tandem::kernels
