// gelu (exact and tanh), bias_gelu and bias_gelu_dropout: values at known points, gradients against finite
// differences, and bias_gelu_dropout against the two ops it fuses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/bias_dropout_add.h"
#include "kernels/gelu.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_tensor;

Tensor points() { return Tensor::from_vector(std::vector<double>{-3.0, -1.0, 0.0, 0.5, 1.0, 2.0}, {6}, DType::F64); }

TEST(Gelu, ExactMatchesReferenceValues) {
  // x * Phi(x), Phi the standard normal CDF, evaluated with mpmath at 50 digits.
  std::vector<double> expect{-0.0040496940948902836, -0.15865525393145705, 0.0, 0.34573123063700655,
                             0.84134474606854295,    1.9544997361036416};
  EXPECT_TRUE(all_close(gelu(points(), GeluApproximation::None), Tensor::from_vector(expect, {6}, DType::F64), 1e-15,
                        1e-14));
}

TEST(Gelu, TanhApproximationMatchesReferenceValues) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated with mpmath at 50 digits.
  std::vector<double> expect{-0.0036373920817730188, -0.1588080093917233, 0.0, 0.34571400982514392,
                             0.8411919906082767,     1.954597694087775};
  EXPECT_TRUE(all_close(gelu(points(), GeluApproximation::Tanh), Tensor::from_vector(expect, {6}, DType::F64), 1e-15,
                        1e-14));
}

TEST(Gelu, ExactGradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return gelu(in[0], GeluApproximation::None); },
                        {random_tensor({4, 5}, 1).set_requires_grad(true)}));
}

TEST(Gelu, TanhGradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return gelu(in[0], GeluApproximation::Tanh); },
                        {random_tensor({4, 5}, 2).set_requires_grad(true)}));
}

TEST(Gelu, Bf16IsComputedInF32AndRoundedOnce) {
  Tensor x = random_tensor({257}, 3, DType::BF16);
  Tensor exact = gelu(x.to(DType::F64));
  EXPECT_TRUE(all_close(gelu(x), exact, 1e-6, 1.0 / 256));  // half a bf16 ulp
}

TEST(BiasGelu, EqualsGeluOfTheBiasedInput) {
  Tensor x = random_tensor({3, 7}, 4), b = random_tensor({7}, 5);
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
    EXPECT_TRUE(all_close(bias_gelu(x, b, a), gelu(add_bias(x, b), a), 1e-15, 1e-14));
}

TEST(BiasGelu, GradientsMatchFiniteDifferences) {
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
    EXPECT_TRUE(gradcheck([a](const auto& in) { return bias_gelu(in[0], in[1], a); },
                          {random_tensor({2, 3, 5}, 6).set_requires_grad(true),
                           random_tensor({5}, 7).set_requires_grad(true)}));
}

TEST(BiasGelu, BiasOfTheWrongWidthIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { bias_gelu(random_tensor({2, 4}, 1), random_tensor({3}, 2)); }, "must be [D]"));
}

// bias_gelu_dropout is dropout(bias_gelu(...)) on the same stream: the same bits forward and backward,
// in f32 and in 16 bits (where the separate ops round the GELU, and dropout's gradient, to bf16 in
// between), the second and third operands' gradients included.
TEST(BiasGeluDropout, GivesTheBitsOfBiasGeluThenDropout) {
  const uint64_t seed = 7, sub = 11;
  for (DType t : {DType::F32, DType::BF16})
    for (auto a : {GeluApproximation::None, GeluApproximation::Tanh}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (a == GeluApproximation::Tanh ? ", tanh" : ", erf"));
      Tensor x1 = random_tensor({5, 3, 24}, 8, t).set_requires_grad(true);
      Tensor b1 = random_tensor({24}, 9, t).set_requires_grad(true);
      Tensor x2 = random_tensor({5, 3, 24}, 8, t).set_requires_grad(true);
      Tensor b2 = random_tensor({24}, 9, t).set_requires_grad(true);
      Tensor fused = bias_gelu_dropout(x1, b1, a, 0.3, true, seed, sub);
      Tensor separate = dropout(bias_gelu(x2, b2, a), 0.3, true, seed, sub);
      EXPECT_EQ(fused.to_double_vector(), separate.to_double_vector());
      const Tensor dy = random_tensor({5, 3, 24}, 10, t);
      fused.backward(dy);
      separate.backward(dy);
      EXPECT_EQ(x1.grad().to_double_vector(), x2.grad().to_double_vector());
      EXPECT_EQ(b1.grad().to_double_vector(), b2.grad().to_double_vector());
    }
}

TEST(BiasGeluDropout, DropsAboutPOfTheElementsAndScalesTheRest) {
  Tensor x = random_tensor({64, 32}, 12), b = random_tensor({32}, 13);
  const std::vector<double> y = bias_gelu_dropout(x, b, GeluApproximation::None, 0.25, true, 1, 2).to_double_vector();
  const std::vector<double> h = bias_gelu(x, b).to_double_vector();
  int dropped = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0 && h[i] != 0.0) ++dropped;
    else EXPECT_NEAR(y[i], h[i] / 0.75, 1e-6 * std::max(1.0, std::fabs(h[i]))) << i;  // f32 scale
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(y.size()), 0.25, 0.03);
}

TEST(BiasGeluDropout, ZeroProbabilityAndEvalModeAreBiasGelu) {
  Tensor x = random_tensor({4, 6}, 14), b = random_tensor({6}, 15);
  const std::vector<double> want = bias_gelu(x, b).to_double_vector();
  EXPECT_EQ(bias_gelu_dropout(x, b, GeluApproximation::None, 0.0, true, 1, 2).to_double_vector(), want);
  EXPECT_EQ(bias_gelu_dropout(x, b, GeluApproximation::None, 0.5, false, 1, 2).to_double_vector(), want);
}

TEST(BiasGeluDropout, GradientsMatchFiniteDifferences) {
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
    EXPECT_TRUE(gradcheck([a](const auto& in) { return bias_gelu_dropout(in[0], in[1], a, 0.25, true, 3, 4); },
                          {random_tensor({2, 3, 5}, 16).set_requires_grad(true),
                           random_tensor({5}, 17).set_requires_grad(true)}));
}

TEST(BiasGeluDropout, AStepCountInMemoryGivesTheMaskOfTheCombinedSubsequence) {
  const int64_t step = 5;
  const uint64_t call = 7;
  Tensor x = random_tensor({3, 40}, 18, DType::F32), b = random_tensor({40}, 19, DType::F32);
  EXPECT_EQ(bias_gelu_dropout(x, b, GeluApproximation::None, 0.4, true, 1, call, &step).to_double_vector(),
            bias_gelu_dropout(x, b, GeluApproximation::None, 0.4, true, 1, (uint64_t{step} << 16) | call)
                .to_double_vector());
}

TEST(BiasGeluDropout, AnEmptyBatchGivesAnEmptyOutputAndAZeroBiasGradient) {
  Tensor x = random_tensor({0, 6}, 20).set_requires_grad(true), b = random_tensor({6}, 21).set_requires_grad(true);
  Tensor y = bias_gelu_dropout(x, b, GeluApproximation::None, 0.3, true, 1, 2);
  EXPECT_EQ(y.shape(), (Shape{0, 6}));
  y.backward(Tensor::zeros({0, 6}, DType::F64));
  EXPECT_EQ(b.grad().to_double_vector(), std::vector<double>(6, 0.0));
}

TEST(BiasGeluDropout, ProbabilityOutsideZeroOneAndABiasOfTheWrongWidthAreErrors) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { bias_gelu_dropout(random_tensor({2, 4}, 1), random_tensor({4}, 2), GeluApproximation::None, -0.1, true, 0, 0); },
      "bias_gelu_dropout: dropout probability must be in [0, 1], got -0.1"));
  EXPECT_TRUE(testing::throws_error_containing(
      [] { bias_gelu_dropout(random_tensor({2, 4}, 1), random_tensor({3}, 2), GeluApproximation::None, 0.1, true, 0, 0); },
      "bias_gelu_dropout: bias"));
}

}  // namespace
}  // namespace tandem::kernels
