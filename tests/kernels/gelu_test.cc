// gelu (exact and tanh) and bias_gelu: values at known points, gradients against finite differences.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tandem::kernels
