// bias_dropout_add_layer_norm: the bits of bias_dropout_add then layer_norm, forward and every
// gradient (the branch, its bias, the residual, the layer norm's weight and bias), gradients against
// finite differences, and its errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/bias_dropout_add.h"
#include "kernels/bias_dropout_add_layer_norm.h"
#include "kernels/layer_norm.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// The output and the five gradients of the fused op (or of the two ops) on the same inputs.
std::vector<std::vector<double>> results(bool fused, DType t, DType param_type, double p, bool training) {
  const Shape shape{4, 7, 24};
  std::vector<Tensor> in{random_tensor(shape, 1, t), random_tensor({24}, 2, t), random_tensor(shape, 3, t),
                         random_tensor({24}, 4, param_type), random_tensor({24}, 5, param_type)};
  for (Tensor& x : in) x.set_requires_grad(true);
  const uint64_t seed = 9, sub = 13;
  Tensor y = fused ? bias_dropout_add_layer_norm(in[0], in[1], in[2], p, training, seed, sub, nullptr, in[3], in[4])
                   : layer_norm(bias_dropout_add(in[0], in[1], in[2], p, training, seed, sub), in[3], in[4]);
  y.backward(random_tensor(shape, 6, t));
  std::vector<std::vector<double>> out{y.to_double_vector()};
  for (const Tensor& x : in) out.push_back(x.grad().to_double_vector());
  return out;
}

TEST(BiasDropoutAddLayerNorm, GivesTheBitsOfBiasDropoutAddThenLayerNorm) {
  struct Case { DType t, param_type; };
  for (Case c : {Case{DType::F32, DType::F32}, Case{DType::BF16, DType::F32}, Case{DType::BF16, DType::BF16}})
    for (double p : {0.3, 0.0})
      for (bool training : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(c.t)) + ", parameters " + std::string(dtype_name(c.param_type)) + ", p " +
                     std::to_string(p) + (training ? ", training" : ", eval"));
        EXPECT_EQ(results(true, c.t, c.param_type, p, training), results(false, c.t, c.param_type, p, training));
      }
}

TEST(BiasDropoutAddLayerNorm, DropoutChangesTheOutputOnlyInTraining) {
  EXPECT_NE(results(true, DType::F32, DType::F32, 0.3, true)[0], results(true, DType::F32, DType::F32, 0.0, true)[0]);
  EXPECT_EQ(results(true, DType::F32, DType::F32, 0.3, false)[0], results(true, DType::F32, DType::F32, 0.0, true)[0]);
}

TEST(BiasDropoutAddLayerNorm, GradientsMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck(
      [](const auto& in) { return bias_dropout_add_layer_norm(in[0], in[1], in[2], 0.25, true, 3, 4, nullptr, in[3], in[4]); },
      {random_tensor({3, 6}, 7).set_requires_grad(true), random_tensor({6}, 8).set_requires_grad(true),
       random_tensor({3, 6}, 9).set_requires_grad(true), random_tensor({6}, 10).set_requires_grad(true),
       random_tensor({6}, 11).set_requires_grad(true)}));
}

TEST(BiasDropoutAddLayerNorm, AStepCountInMemoryGivesTheMaskOfTheCombinedSubsequence) {
  const int64_t step = 5;
  const uint64_t call = 7;
  Tensor x = random_tensor({3, 40}, 12, DType::F32), b = random_tensor({40}, 13, DType::F32);
  Tensor r = random_tensor({3, 40}, 14, DType::F32), w = random_tensor({40}, 15, DType::F32);
  Tensor lb = random_tensor({40}, 16, DType::F32);
  EXPECT_EQ(bias_dropout_add_layer_norm(x, b, r, 0.4, true, 1, call, &step, w, lb).to_double_vector(),
            bias_dropout_add_layer_norm(x, b, r, 0.4, true, 1, (uint64_t{step} << 16) | call, nullptr, w, lb)
                .to_double_vector());
}

TEST(BiasDropoutAddLayerNorm, AnEmptyBatchGivesAnEmptyOutputAndZeroParameterGradients) {
  std::vector<Tensor> in{random_tensor({0, 5}, 1), random_tensor({5}, 2), random_tensor({0, 5}, 3),
                         random_tensor({5}, 4), random_tensor({5}, 5)};
  for (Tensor& x : in) x.set_requires_grad(true);
  Tensor y = bias_dropout_add_layer_norm(in[0], in[1], in[2], 0.3, true, 1, 2, nullptr, in[3], in[4]);
  EXPECT_EQ(y.shape(), (Shape{0, 5}));
  y.backward(Tensor::zeros({0, 5}, DType::F64));
  for (int i : {1, 3, 4}) EXPECT_EQ(in[static_cast<size_t>(i)].grad().to_double_vector(), std::vector<double>(5, 0.0)) << i;
}

TEST(BiasDropoutAddLayerNorm, BadProbabilityShapesAndDtypesAreErrorsNamingTheOp) {
  const Tensor x = random_tensor({2, 4}, 1), b = random_tensor({4}, 2), r = random_tensor({2, 4}, 3);
  const Tensor w = random_tensor({4}, 4), lb = random_tensor({4}, 5);
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { bias_dropout_add_layer_norm(x, b, r, 1.5, true, 0, 0, nullptr, w, lb); },
      "bias_dropout_add_layer_norm: dropout probability must be in [0, 1], got 1.5"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { bias_dropout_add_layer_norm(x, b, random_tensor({2, 5}, 6), 0.1, true, 0, 0, nullptr, w, lb); },
      "bias_dropout_add_layer_norm"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { bias_dropout_add_layer_norm(x, random_tensor({3}, 7), r, 0.1, true, 0, 0, nullptr, w, lb); },
      "bias_dropout_add_layer_norm: bias"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { bias_dropout_add_layer_norm(x, b, r, 0.1, true, 0, 0, nullptr, random_tensor({5}, 8), random_tensor({5}, 9)); },
      "bias_dropout_add_layer_norm: weight"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { bias_dropout_add_layer_norm(x, b, r, 0.1, true, 0, 0, nullptr, random_tensor({4}, 10, DType::BF16), lb); },
      "bias_dropout_add_layer_norm"));
}

}  // namespace
}  // namespace tandem::kernels
