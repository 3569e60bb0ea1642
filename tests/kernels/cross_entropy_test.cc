// cross_entropy (with label smoothing and class weights) and accuracy_count: values against the
// definition, gradients against finite differences, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_tensor;
using testing::throws_error_containing;

Tensor labels_of(const std::vector<int64_t>& v, DType t = DType::I64) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, t);
}

// mean over rows of -sum_c target_c log softmax(z)_c, target = (1 - eps) onehot + eps / C, in f64.
double reference_loss(const std::vector<double>& z, const std::vector<int64_t>& y, size_t classes, double eps) {
  double total = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double m = -INFINITY, se = 0;
    for (size_t c = 0; c < classes; ++c) m = std::max(m, z[i * classes + c]);
    for (size_t c = 0; c < classes; ++c) se += std::exp(z[i * classes + c] - m);
    for (size_t c = 0; c < classes; ++c) {
      double logp = z[i * classes + c] - m - std::log(se);
      double target = (static_cast<int64_t>(c) == y[i] ? 1 - eps : 0) + eps / static_cast<double>(classes);
      total -= target * logp;
    }
  }
  return total / static_cast<double>(y.size());
}

TEST(CrossEntropy, EqualLogitsGiveLogOfTheClassCount) {
  EXPECT_NEAR(cross_entropy(Tensor::zeros({3, 5}), labels_of({0, 4, 2})).item(), std::log(5.0), 1e-6);
}

TEST(CrossEntropy, MatchesTheDefinition) {
  Tensor z = random_tensor({6, 4}, 1);
  std::vector<int64_t> y{3, 0, 1, 1, 2, 0};
  EXPECT_NEAR(cross_entropy(z, labels_of(y)).item(), reference_loss(z.to_double_vector(), y, 4, 0.0), 1e-14);
}

TEST(CrossEntropy, MatchesTheDefinitionWithLabelSmoothing) {
  Tensor z = scale(random_tensor({5, 7}, 2), 3.0);
  std::vector<int64_t> y{6, 0, 3, 3, 1};
  EXPECT_NEAR(cross_entropy(z, labels_of(y), 0.1).item(), reference_loss(z.to_double_vector(), y, 7, 0.1), 1e-14);
}

TEST(CrossEntropy, HugeLogitsDoNotOverflow) {
  Tensor z = Tensor::from_vector(std::vector<double>{1000, 0, -1000, 1000}, {2, 2}, DType::F32);
  EXPECT_NEAR(cross_entropy(z, labels_of({0, 0})).item(), 1000.0, 1e-3);  // row 0: 0, row 1: 2000
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return cross_entropy(in[0], labels_of({2, 0, 1, 2}, DType::I32)); },
                        {random_tensor({4, 3}, 3).set_requires_grad(true)}));
}

TEST(CrossEntropy, GradientWithLabelSmoothingMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return cross_entropy(in[0], labels_of({4, 1, 0}), 0.2); },
                        {random_tensor({3, 5}, 4).set_requires_grad(true)}));
}

TEST(CrossEntropy, GradientIsScaledByTheIncomingGradient) {
  Tensor z = random_tensor({3, 4}, 5, DType::F32).set_requires_grad(true);
  cross_entropy(z, labels_of({1, 2, 3})).backward();
  std::vector<double> g1 = z.grad().to_double_vector();
  z.set_grad(Tensor());
  scale(cross_entropy(z, labels_of({1, 2, 3})), 3.0).backward();
  std::vector<double> g3 = z.grad().to_double_vector();
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g3[i], 3 * g1[i], 1e-7);
}

TEST(CrossEntropy, Bf16LogitsGiveAnF32LossAndBf16Gradient) {
  Tensor z = random_tensor({4, 6}, 6, DType::BF16).set_requires_grad(true);
  std::vector<int64_t> y{5, 0, 2, 2};
  Tensor loss = cross_entropy(z, labels_of(y), 0.05);
  EXPECT_EQ(loss.dtype(), DType::F32);
  // f32 math on the bf16 inputs: agrees with f64 math on the same inputs to f32 precision.
  EXPECT_NEAR(loss.item(), reference_loss(z.to_double_vector(), y, 6, 0.05), 1e-5);
  loss.backward();
  EXPECT_EQ(z.grad().dtype(), DType::BF16);
}

TEST(CrossEntropy, Fp16GradientIsRoundedOnceAfterTheLossScale) {
  // With N = 16384 rows, (p - onehot) / N is below fp16's smallest normal
  // number: rounded to fp16 before a loss scale of 65536, it would keep only a
  // few bits. The gradient must be f32 math rounded once, after the scale.
  const int64_t n = 16384, classes = 4;
  const double loss_scale = 65536;
  Tensor z = random_tensor({n, classes}, 7, DType::F16).set_requires_grad(true);
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = (i * 5) % classes;
  scale(cross_entropy(z, labels_of(y)), loss_scale).backward();
  ASSERT_EQ(z.grad().dtype(), DType::F16);
  const std::vector<double> zv = z.to_double_vector(), g = z.grad().to_double_vector();
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, se = 0;
    for (int64_t c = 0; c < classes; ++c) m = std::max(m, zv[static_cast<size_t>(i * classes + c)]);
    for (int64_t c = 0; c < classes; ++c) se += std::exp(zv[static_cast<size_t>(i * classes + c)] - m);
    for (int64_t c = 0; c < classes; ++c) {
      const size_t k = static_cast<size_t>(i * classes + c);
      const double p = std::exp(zv[k] - m) / se;
      const double want = (p - (c == y[static_cast<size_t>(i)] ? 1.0 : 0.0)) / static_cast<double>(n) * loss_scale;
      // One fp16 rounding: at most half an ulp, 2^-11 relative (2^-10 allows for the f32 math).
      ASSERT_NEAR(g[k], want, std::abs(want) * std::ldexp(1.0, -10) + 1e-7) << "row " << i << " class " << c;
    }
  }
}

TEST(CrossEntropy, OutOfRangeLabelIsAnErrorNamingItsRow) {
  EXPECT_TRUE(throws_error_containing([] { cross_entropy(Tensor::zeros({3, 4}), labels_of({0, 4, 1})); },
                                      "label 4 of row 1 is outside [0, 4)"));
}

TEST(CrossEntropy, NegativeLabelIsAnError) {
  EXPECT_TRUE(throws_error_containing([] { cross_entropy(Tensor::zeros({1, 4}), labels_of({-100})); }, "label -100"));
}

TEST(CrossEntropy, LabelsOfTheWrongLengthAreAnError) {
  EXPECT_TRUE(throws_error_containing([] { cross_entropy(Tensor::zeros({3, 4}), labels_of({0, 1})); }, "must be [3]"));
}

// The class-weighted definition (torch.nn.functional.cross_entropy with weight=w, mean
// reduction): sum_i sum_c target_ic w_c (-log p_ic) / sum_i w[y_i], in f64.
double reference_weighted_loss(const std::vector<double>& z, const std::vector<int64_t>& y,
                               const std::vector<double>& w, double eps) {
  const size_t classes = w.size();
  double total = 0, weight = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double m = -INFINITY, se = 0;
    for (size_t c = 0; c < classes; ++c) m = std::max(m, z[i * classes + c]);
    for (size_t c = 0; c < classes; ++c) se += std::exp(z[i * classes + c] - m);
    for (size_t c = 0; c < classes; ++c) {
      double logp = z[i * classes + c] - m - std::log(se);
      double target = (static_cast<int64_t>(c) == y[i] ? 1 - eps : 0) + eps / static_cast<double>(classes);
      total -= target * w[c] * logp;
    }
    weight += w[static_cast<size_t>(y[i])];
  }
  return total / weight;
}

Tensor weights_of(const std::vector<double>& w, DType t = DType::F64) {
  return Tensor::from_vector(w, {static_cast<int64_t>(w.size())}, t);
}

TEST(WeightedCrossEntropy, MatchesTheDefinition) {
  Tensor z = random_tensor({6, 4}, 7);
  std::vector<int64_t> y{3, 0, 1, 1, 2, 0};
  std::vector<double> w{0.5, 2.0, 1.0, 3.5};
  EXPECT_NEAR(cross_entropy(z, labels_of(y), 0.0, weights_of(w)).item(), reference_weighted_loss(z.to_double_vector(), y, w, 0.0),
              1e-14);
}

TEST(WeightedCrossEntropy, MatchesTheDefinitionWithLabelSmoothing) {
  Tensor z = scale(random_tensor({5, 3}, 8), 2.0);
  std::vector<int64_t> y{2, 0, 1, 1, 1};
  std::vector<double> w{4.0, 0.25, 1.5};
  EXPECT_NEAR(cross_entropy(z, labels_of(y), 0.1, weights_of(w)).item(),
              reference_weighted_loss(z.to_double_vector(), y, w, 0.1), 1e-14);
}

TEST(WeightedCrossEntropy, EqualWeightsGiveTheUnweightedLossAndGradient) {
  Tensor z = random_tensor({7, 5}, 9, DType::F32).set_requires_grad(true);
  Tensor y = labels_of({4, 0, 1, 3, 3, 2, 0});
  Tensor plain = cross_entropy(z, y, 0.1);
  plain.backward();
  std::vector<double> g_plain = z.grad().to_double_vector();
  z.set_grad(Tensor());
  Tensor weighted = cross_entropy(z, y, 0.1, weights_of({3, 3, 3, 3, 3}, DType::F32));
  weighted.backward();
  EXPECT_NEAR(weighted.item(), plain.item(), 1e-6);
  EXPECT_TRUE(all_close(z.grad(), Tensor::from_vector(g_plain, z.shape(), DType::F32), 1e-7, 1e-6));
}

TEST(WeightedCrossEntropy, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck(
      [](const auto& in) { return cross_entropy(in[0], labels_of({2, 0, 1, 2}), 0.0, weights_of({1.0, 0.2, 5.0})); },
      {random_tensor({4, 3}, 10).set_requires_grad(true)}));
}

TEST(WeightedCrossEntropy, GradientWithLabelSmoothingMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck(
      [](const auto& in) {
        return cross_entropy(in[0], labels_of({4, 1, 0}), 0.2, weights_of({1.0, 2.0, 0.0, 0.5, 3.0}));
      },
      {random_tensor({3, 5}, 11).set_requires_grad(true)}));
}

TEST(WeightedCrossEntropy, WeightsOfTheWrongShapeOrDtypeAreAnError) {
  EXPECT_TRUE(throws_error_containing(
      [] { cross_entropy(Tensor::zeros({2, 3}), labels_of({0, 1}), 0.0, weights_of({1, 1}, DType::F32)); },
      "class_weights must be f32 [3]"));
  EXPECT_TRUE(throws_error_containing(
      [] { cross_entropy(Tensor::zeros({2, 3}), labels_of({0, 1}), 0.0, weights_of({1, 1, 1}, DType::F64)); },
      "class_weights must be f32 [3]"));
}

TEST(WeightedCrossEntropy, NegativeOrNonFiniteWeightIsAnErrorNamingItsClass) {
  EXPECT_TRUE(throws_error_containing(
      [] { cross_entropy(Tensor::zeros({2, 3}), labels_of({0, 1}), 0.0, weights_of({1, -1, 1}, DType::F32)); },
      "class weight -1 of class 1 must be finite and >= 0"));
  EXPECT_TRUE(throws_error_containing(
      [] { cross_entropy(Tensor::zeros({2, 3}), labels_of({0, 1}), 0.0, weights_of({1, 1, NAN}, DType::F32)); },
      "of class 2 must be finite"));
}

TEST(AccuracyCount, CountsRowsWhoseArgmaxIsTheLabel) {
  Tensor z = Tensor::from_vector(std::vector<double>{0.1, 0.9, 0.0,   // argmax 1
                                                     2.0, -1., 1.0,   // argmax 0
                                                     0.0, 0.0, 3.0},  // argmax 2
                                 {3, 3}, DType::F32);
  EXPECT_EQ(accuracy_count(z, labels_of({1, 2, 2})).item(), 2.0);
}

TEST(AccuracyCount, TiesGoToTheFirstMaximalClassAndNanCountsAsMaximal) {
  Tensor z = Tensor::from_vector(std::vector<double>{1.0, 1.0, 0.0, 0.0, NAN, 5.0}, {2, 3}, DType::F32);
  EXPECT_EQ(accuracy_count(z, labels_of({0, 1})).item(), 2.0);
  EXPECT_EQ(accuracy_count(z, labels_of({1, 2})).item(), 0.0);
}

TEST(AccuracyCount, ReturnsAnI64Scalar) {
  Tensor c = accuracy_count(Tensor::zeros({2, 2}), labels_of({0, 1}));
  EXPECT_EQ(c.dtype(), DType::I64);
  EXPECT_EQ(c.dim(), 0);
}

}  // namespace
}  // namespace tandem::kernels
