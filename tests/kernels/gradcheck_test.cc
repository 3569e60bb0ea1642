// Every op's backward against central finite differences in f64.
#include <gtest/gtest.h>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/reduce.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::random_tensor;

Tensor leaf(const Shape& s, uint64_t seed) { return random_tensor(s, seed).set_requires_grad(true); }

TEST(Gradcheck, Add) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return add(in[0], in[1]); }, {leaf({3, 4}, 1), leaf({3, 4}, 2)}));
}

TEST(Gradcheck, Mul) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return mul(in[0], in[1]); }, {leaf({5}, 3), leaf({5}, 4)}));
}

TEST(Gradcheck, MulWithOnlyOneInputRequiringGrad) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return mul(in[0], in[1]); }, {leaf({5}, 3), random_tensor({5}, 4)}));
}

TEST(Gradcheck, Scale) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return scale(in[0], -0.37); }, {leaf({2, 3}, 5)}));
}

TEST(Gradcheck, Relu) {
  // Random normal inputs are almost surely away from the kink at 0 by more than eps.
  EXPECT_TRUE(gradcheck([](const auto& in) { return relu(in[0]); }, {leaf({4, 5}, 6)}));
}

TEST(Gradcheck, LinearWithBias) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return linear(in[0], in[1], in[2]); },
                        {leaf({3, 5}, 7), leaf({4, 5}, 8), leaf({4}, 9)}));
}

TEST(Gradcheck, LinearWithoutBiasOnA3dInput) {
  EXPECT_TRUE(
      gradcheck([](const auto& in) { return linear(in[0], in[1]); }, {leaf({2, 3, 5}, 10), leaf({6, 5}, 11)}));
}

TEST(Gradcheck, Sum) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return sum(in[0]); }, {leaf({3, 7}, 12)}));
}

TEST(Gradcheck, Mean) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return mean(in[0]); }, {leaf({3, 7}, 13)}));
}

TEST(Gradcheck, CastThroughF32) {
  // Round trip through f32 loses precision: compare with a tolerance that fits f32 rounding.
  testing::GradcheckOptions o;
  o.eps = 1e-3;
  o.rtol = 1e-3;
  o.atol = 1e-4;
  EXPECT_TRUE(gradcheck([](const auto& in) { return cast(scale(cast(in[0], DType::F32), 2.0), DType::F64); },
                        {leaf({4}, 14)}, o));
}

TEST(Gradcheck, TwoLayerMlpWithASharedParameterUsedTwice) {
  // h = relu(x W1^T + b1); y = relu(h W2^T + b2) W1'... : W_shared is used in both layers,
  // so its gradient is the sum of two paths.
  auto mlp = [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &w_shared = in[1], &b1 = in[2], &b2 = in[3], &w_out = in[4];
    Tensor h1 = relu(linear(x, w_shared, b1));
    Tensor h2 = relu(linear(h1, w_shared, b2));
    return mean(mul(linear(add(h2, h1), w_out), linear(h1, w_out)));
  };
  EXPECT_TRUE(gradcheck(mlp, {random_tensor({6, 4}, 20), leaf({4, 4}, 21), leaf({4}, 22), leaf({4}, 23),
                              leaf({3, 4}, 24)}));
}

}  // namespace
}  // namespace tandem::kernels
