// layer_norm over the last dimension: values against a direct f64 evaluation,
// gradients against finite differences, mixed-precision parameters, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/layer_norm.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_tensor;
using testing::throws_error_containing;

// (x - mean) / sqrt(var + eps) * w + b row by row in f64, written independently of the kernels.
std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                              size_t dim, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / dim; ++r) {
    double mean = 0, var = 0;
    for (size_t d = 0; d < dim; ++d) mean += x[r * dim + d] / static_cast<double>(dim);
    for (size_t d = 0; d < dim; ++d) var += (x[r * dim + d] - mean) * (x[r * dim + d] - mean) / static_cast<double>(dim);
    for (size_t d = 0; d < dim; ++d) y[r * dim + d] = (x[r * dim + d] - mean) / std::sqrt(var + eps) * w[d] + b[d];
  }
  return y;
}

TEST(LayerNorm, MatchesTheDefinitionRowByRow) {
  Tensor x = random_tensor({4, 7}, 1), w = random_tensor({7}, 2), b = random_tensor({7}, 3);
  Tensor y = layer_norm(x, w, b, 1e-5);
  Tensor expect = Tensor::from_vector(
      reference(x.to_double_vector(), w.to_double_vector(), b.to_double_vector(), 7, 1e-5), {4, 7}, DType::F64);
  EXPECT_TRUE(all_close(y, expect, 1e-12, 1e-12));
}

TEST(LayerNorm, NormalisesOverTheLastDimensionOfA3dInput) {
  Tensor x = random_tensor({2, 3, 16}, 4, DType::F32);
  Tensor y = layer_norm(x, Tensor::full({16}, 1.0), Tensor::zeros({16}), 0.0);
  std::vector<double> v = y.to_double_vector();
  for (size_t r = 0; r < 6; ++r) {
    double mean = 0, sq = 0;
    for (size_t d = 0; d < 16; ++d) mean += v[r * 16 + d] / 16;
    for (size_t d = 0; d < 16; ++d) sq += v[r * 16 + d] * v[r * 16 + d] / 16;
    EXPECT_NEAR(mean, 0.0, 1e-6);
    EXPECT_NEAR(sq, 1.0, 1e-5);
  }
}

TEST(LayerNorm, LargeMeanDoesNotCancelTheVarianceInF32) {
  // Rows of 1e4 + N(0, 1): sum-of-squares statistics in f32 would lose the variance
  // (1e8 vs 1 in 24 bits); the two-pass f32 statistics keep ~1e-3 relative accuracy.
  Tensor noise = random_tensor({3, 64}, 5);
  std::vector<double> xs = noise.to_double_vector();
  for (double& v : xs) v += 1e4;
  Tensor x = Tensor::from_vector(xs, {3, 64}, DType::F32);
  std::vector<double> w(64, 1.0), b(64, 0.0);
  std::vector<double> x32 = x.to_double_vector();  // the f32-rounded inputs, as the kernel sees them
  Tensor expect = Tensor::from_vector(reference(x32, w, b, 64, 1e-5), {3, 64}, DType::F64);
  EXPECT_TRUE(all_close(layer_norm(x, Tensor::full({64}, 1.0), Tensor::zeros({64})), expect, 2e-3, 2e-3));
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
                        {random_tensor({3, 5}, 6).set_requires_grad(true), random_tensor({5}, 7).set_requires_grad(true),
                         random_tensor({5}, 8).set_requires_grad(true)}));
}

TEST(LayerNorm, GradientsMatchFiniteDifferencesForA3dInputWithOddWidth) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-3); },
                        {random_tensor({2, 3, 7}, 9).set_requires_grad(true),
                         random_tensor({7}, 10).set_requires_grad(true), random_tensor({7}, 11).set_requires_grad(true)}));
}

TEST(LayerNorm, GradientOfTheInputAloneMatchesFiniteDifferences) {
  Tensor w = random_tensor({6}, 12), b = random_tensor({6}, 13);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return layer_norm(in[0], w, b); },
                        {random_tensor({1, 6}, 14).set_requires_grad(true)}));
}

TEST(LayerNorm, F32ParametersWithBf16InputGiveBf16OutputAndF32ParameterGradients) {
  Tensor x = random_tensor({5, 24}, 15, DType::BF16);
  Tensor w = random_tensor({24}, 16, DType::F32).set_requires_grad(true);
  Tensor b = random_tensor({24}, 17, DType::F32).set_requires_grad(true);
  Tensor y = layer_norm(x, w, b);
  EXPECT_EQ(y.dtype(), DType::BF16);
  Tensor expect = Tensor::from_vector(
      reference(x.to_double_vector(), w.to_double_vector(), b.to_double_vector(), 24, 1e-5), {5, 24}, DType::F64);
  EXPECT_TRUE(all_close(y, expect, 1e-2, 1.0 / 128));  // one bf16 rounding of the output
  y.backward(Tensor::full({5, 24}, 1.0, DType::BF16));
  ASSERT_EQ(w.grad().dtype(), DType::F32);
  ASSERT_EQ(b.grad().dtype(), DType::F32);
  // With dy = 1: dbias = number of rows, exactly.
  for (double v : b.grad().to_double_vector()) EXPECT_EQ(v, 5.0);
}

TEST(LayerNorm, ParametersOfAThirdDtypeAreAnError) {
  Tensor x = random_tensor({2, 4}, 18, DType::BF16);
  Tensor w = Tensor::full({4}, 1.0, DType::F16), b = Tensor::zeros({4}, DType::F16);
  EXPECT_TRUE(throws_error_containing([&] { layer_norm(x, w, b); }, "weight must be bf16 or f32"));
}

TEST(LayerNorm, WeightOfTheWrongWidthIsAnError) {
  Tensor x = random_tensor({2, 4}, 19);
  EXPECT_TRUE(throws_error_containing([&] { layer_norm(x, random_tensor({5}, 1), random_tensor({5}, 2)); },
                                      "must be [4]"));
}

}  // namespace
}  // namespace tandem::kernels
