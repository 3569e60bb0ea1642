// dropout, add_bias and bias_dropout_add: the keep mask is the Philox definition,
// kept values are scaled, identities, gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/philox.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/dropout_mask.h"
#include "kernels/elementwise.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_tensor;

constexpr uint64_t kSeed = 1234, kSub = 7;

TEST(Dropout, KeepsExactlyTheElementsWhoseSixteenBitPhiloxUniformIsAtLeastTheQuantisedP) {
  // The rule of kernels/dropout_mask.h, written out: element i is the 16-bit half i % 2 of word
  // (i % 8) / 2 of Philox block i / 8; p = 0.3 is 19660.8 / 2^16, rounded to 19661.
  Tensor x = Tensor::full({5, 103}, 1.0, DType::F32);
  std::vector<double> y = dropout(x, 0.3, true, kSeed, kSub).to_double_vector();
  const float scale = 65536.0f / (65536 - 19661);
  for (size_t i = 0; i < y.size(); ++i) {
    const uint32_t word = philox_block(kSeed, kSub, i / 8).v[i % 8 / 2];
    const bool keep = ((word >> (16 * (i % 2))) & 0xffffu) >= 19661u;
    ASSERT_EQ(y[i], keep ? static_cast<double>(scale) : 0.0) << "element " << i;
  }
}

TEST(Dropout, EveryDtypeKeepsTheSameElements) {
  // The f32 path decides through the ISA kernel's planes, the 16-bit ones element by element.
  Tensor x = Tensor::full({7, 91}, 1.0, DType::F32);
  const std::vector<double> f32 = dropout(x, 0.25, true, kSeed, kSub).to_double_vector();
  for (DType t : {DType::BF16, DType::F16, DType::F64}) {
    const std::vector<double> y = dropout(x.to(t), 0.25, true, kSeed, kSub).to_double_vector();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i] != 0.0, f32[i] != 0.0) << dtype_name(t) << " element " << i;
  }
}

TEST(DropoutMask, QuantisesPToSixteenBitsAndScalesByTheInverseKeepRate) {
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_keep_scale<float>(0), 1.0f);  // p = 0: the exact identity
  EXPECT_EQ(dropout_threshold(0.1f), 6554u);      // 6553.6
  EXPECT_EQ(dropout_threshold(0.5f), 32768u);
  EXPECT_EQ(dropout_keep_scale<double>(32768), 2.0);
  EXPECT_EQ(dropout_threshold(1.0f / 131072), 1u);    // half way rounds up
  EXPECT_EQ(dropout_threshold(1.0f / 262144), 0u);    // below 2^-17 drops nothing
  EXPECT_EQ(dropout_threshold(0.99999994f), 65535u);  // below 1 never everything
  for (double p : {0.01, 0.1, 0.25, 0.3, 0.9}) {
    const uint32_t t = dropout_threshold(static_cast<float>(p));
    EXPECT_LE(std::fabs(t / 65536.0 - double(float(p))), 1.0 / 131072) << p;
    EXPECT_DOUBLE_EQ(dropout_keep_scale<double>(t), 1.0 / (1.0 - t / 65536.0)) << p;
  }
}

TEST(DropoutMask, ProbabilityOneKeepsNothingWithScaleZero) {
  EXPECT_EQ(dropout_threshold(1.0f), 65536u);
  EXPECT_EQ(dropout_keep_scale<float>(65536u), 0.0f);
  EXPECT_FALSE(dropout_keep(1, 2, 3, 65536u));  // no 16-bit uniform reaches 2^16
}

TEST(DropoutMask, NaNProbabilityDropsNothing) {
  EXPECT_EQ(dropout_threshold(std::numeric_limits<float>::quiet_NaN()), 0u);
}

TEST(Dropout, KeepsAboutOneMinusPOfTheElements) {
  const int64_t n = 200000;
  std::vector<double> y = dropout(Tensor::full({n}, 1.0), 0.1, true, 99, 0).to_double_vector();
  double kept = 0;
  for (double v : y) kept += v != 0.0;
  // Binomial(n, 0.9): standard deviation sqrt(n * 0.09) = 134; allow 5 sigma.
  EXPECT_NEAR(kept, 0.9 * n, 5 * std::sqrt(n * 0.09));
}

TEST(Dropout, AnotherSubsequenceGivesAnotherMask) {
  Tensor x = Tensor::full({1000}, 1.0);
  EXPECT_NE(dropout(x, 0.5, true, kSeed, 1).to_double_vector(), dropout(x, 0.5, true, kSeed, 2).to_double_vector());
  EXPECT_EQ(dropout(x, 0.5, true, kSeed, 1).to_double_vector(), dropout(x, 0.5, true, kSeed, 1).to_double_vector());
}

TEST(Dropout, ZeroProbabilityAndEvalModeReturnTheInputItself) {
  Tensor x = random_tensor({4, 4}, 1);
  EXPECT_TRUE(dropout(x, 0.0, true, kSeed, kSub).is_same(x));
  EXPECT_TRUE(dropout(x, 0.5, false, kSeed, kSub).is_same(x));
}

TEST(Dropout, ProbabilityOneGivesZerosNotNan) {
  for (double v : dropout(random_tensor({64}, 2, DType::F32), 1.0, true, kSeed, kSub).to_double_vector())
    EXPECT_EQ(v, 0.0);
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  Tensor x = random_tensor({3, 37}, 3, DType::F32).set_requires_grad(true);
  Tensor y = dropout(x, 0.4, true, kSeed, kSub);
  y.backward(Tensor::full({3, 37}, 1.0));
  std::vector<double> yv = y.to_double_vector(), xv = x.to_double_vector(), g = x.grad().to_double_vector();
  const double scale = 65536.0f / (65536 - 26214);  // p = 0.4: 26214.4 / 2^16, rounded
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], yv[i] == 0.0 ? 0.0 : scale) << i << " x=" << xv[i];
}

TEST(BiasDropoutAdd, AStepCountInMemoryGivesTheMaskOfTheCombinedSubsequence) {
  // A capturable step (kernels/dropout_mask.h) passes the call's 16 bits and points at the step count.
  const int64_t step = 5;
  const uint64_t call = 7;
  Tensor x1 = random_tensor({3, 37}, 3, DType::F32).set_requires_grad(true);
  Tensor x2 = random_tensor({3, 37}, 3, DType::F32).set_requires_grad(true);
  Tensor b = random_tensor({37}, 4, DType::F32), r = random_tensor({3, 37}, 5, DType::F32);
  Tensor combined = bias_dropout_add(x1, b, r, 0.4, true, kSeed, (uint64_t{step} << 16) | call);
  Tensor from_memory = bias_dropout_add(x2, b, r, 0.4, true, kSeed, call, &step);
  EXPECT_EQ(from_memory.to_double_vector(), combined.to_double_vector());
  combined.backward(Tensor::full({3, 37}, 1.0));
  from_memory.backward(Tensor::full({3, 37}, 1.0));
  EXPECT_EQ(x2.grad().to_double_vector(), x1.grad().to_double_vector());
  const int64_t other = 6;
  EXPECT_NE(bias_dropout_add(x2, b, r, 0.4, true, kSeed, call, &other).to_double_vector(),
            combined.to_double_vector());
}

TEST(Dropout, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return dropout(in[0], 0.25, true, kSeed, kSub); },
                        {random_tensor({4, 9}, 4).set_requires_grad(true)}));
}

TEST(Dropout, ProbabilityOutsideZeroOneIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing([] { dropout(random_tensor({2}, 1), 1.5, true, 0, 0); },
                                               "must be in [0, 1], got 1.5"));
}

TEST(AddBias, AddsTheBiasToEveryRow) {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::F64);
  Tensor b = Tensor::from_vector(std::vector<double>{10, 20, 30}, {3}, DType::F64);
  EXPECT_EQ(add_bias(x, b).to_double_vector(), (std::vector<double>{11, 22, 33, 14, 25, 36}));
}

TEST(AddBias, GradientsMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return add_bias(in[0], in[1]); },
                        {random_tensor({2, 3, 5}, 5).set_requires_grad(true), random_tensor({5}, 6).set_requires_grad(true)}));
}

TEST(BiasDropoutAdd, EqualsTheUnfusedOps) {
  Tensor x = random_tensor({6, 11}, 7), b = random_tensor({11}, 8), r = random_tensor({6, 11}, 9);
  Tensor unfused = add(dropout(add_bias(x, b), 0.2, true, kSeed, kSub), r);
  EXPECT_TRUE(all_close(bias_dropout_add(x, b, r, 0.2, true, kSeed, kSub), unfused, 1e-15, 1e-15));
}

TEST(BiasDropoutAdd, GradientsOfAllThreeInputsMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return bias_dropout_add(in[0], in[1], in[2], 0.3, true, kSeed, kSub); },
                        {random_tensor({5, 6}, 10).set_requires_grad(true), random_tensor({6}, 11).set_requires_grad(true),
                         random_tensor({5, 6}, 12).set_requires_grad(true)}));
}

TEST(BiasDropoutAdd, GradientsInEvalModeMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return bias_dropout_add(in[0], in[1], in[2], 0.3, false, kSeed, kSub); },
                        {random_tensor({5, 6}, 13).set_requires_grad(true), random_tensor({6}, 14).set_requires_grad(true),
                         random_tensor({5, 6}, 15).set_requires_grad(true)}));
}

TEST(BiasDropoutAdd, ResidualWithoutBiasGradientsMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return bias_dropout_add(in[0], Tensor(), in[1], 0.5, true, 3, 4); },
                        {random_tensor({2, 7}, 16).set_requires_grad(true), random_tensor({2, 7}, 17).set_requires_grad(true)}));
}

TEST(BiasDropoutAdd, ResidualOfAnotherShapeIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { bias_dropout_add(random_tensor({2, 3}, 1), Tensor(), random_tensor({3, 2}, 2), 0.1, true, 0, 0); },
      "shapes [2, 3] and [3, 2] differ"));
}

}  // namespace
}  // namespace tandem::kernels
