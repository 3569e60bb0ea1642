// 16-bit compute with f32 accumulation: results stay within one 16-bit rounding
// of the exact f64 result even when the reduction is long, which would not hold
// if products were accumulated in 16 bits.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/reduce.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::random_tensor;

TEST(MixedPrecision, Bf16LinearAccumulatesInF32) {
  // K = 4096 terms: bf16 accumulation would lose ~all low bits; f32 accumulation keeps
  // the result within bf16 output rounding (2^-8 relative) of the f64 result.
  Tensor x = random_tensor({4, 4096}, 1, DType::BF16), w = random_tensor({3, 4096}, 2, DType::BF16);
  Tensor exact = linear(x.to(DType::F64), w.to(DType::F64));
  Tensor y = linear(x, w);
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_TRUE(all_close(y, exact, 0.05, 1.0 / 128));
}

TEST(MixedPrecision, F16SumOfManyOnesIsExact) {
  // 3000 ones: an f16 accumulator would stall at 2048; f32 accumulation reaches 3000
  // (representable in f16).
  Tensor x = Tensor::full({3000}, 1.0, DType::F16);
  EXPECT_EQ(sum(x).item(), 3000.0);
}

TEST(MixedPrecision, CastBackwardReturnsAnF32GradientForF32MasterWeights) {
  Tensor master = random_tensor({8, 16}, 3, DType::F32).set_requires_grad(true);
  Tensor x = random_tensor({2, 16}, 4, DType::BF16);
  Tensor y = sum(cast(linear(x, cast(master, DType::BF16)), DType::F32));
  y.backward();
  ASSERT_TRUE(master.grad().defined());
  EXPECT_EQ(master.grad().dtype(), DType::F32);
  // d sum(x w^T)/dw[o, i] = sum_r x[r, i], the same for every output row o.
  std::vector<double> g = master.grad().to_double_vector(), xs = x.to_double_vector();
  for (int64_t i = 0; i < 16; ++i) {
    double expect = xs[static_cast<size_t>(i)] + xs[static_cast<size_t>(16 + i)];
    for (int64_t o = 0; o < 8; ++o) EXPECT_NEAR(g[static_cast<size_t>(o * 16 + i)], expect, 0.02 + 0.01 * std::fabs(expect));
  }
}

}  // namespace
}  // namespace tandem::kernels
