// transpose: every element where the definition puts it, for every element
// size, the gradient by finite differences, and the error for non-matrices.
#include "kernels/transpose.h"

#include <gtest/gtest.h>

#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::random_tensor;

void expect_transposed(const Tensor& x, const Tensor& y) {
  const int64_t rows = x.size(0), cols = x.size(1);
  ASSERT_EQ(y.shape(), (Shape{cols, rows}));
  const std::vector<double> a = x.to_double_vector(), b = y.to_double_vector();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(b[static_cast<size_t>(c * rows + r)], a[static_cast<size_t>(r * cols + c)]) << r << "," << c;
}

TEST(Transpose, PutsElementRowColumnAtColumnRowForEveryDtype) {
  // Shapes around the 32 x 32 blocks: smaller, ragged, several blocks.
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    for (Shape s : {Shape{1, 1}, Shape{1, 7}, Shape{7, 1}, Shape{33, 31}, Shape{70, 5}, Shape{64, 96}}) {
      SCOPED_TRACE(dtype_name(t));
      std::vector<double> v;
      for (int64_t i = 0; i < s[0] * s[1]; ++i) v.push_back(static_cast<double>(i % 251));
      Tensor x = Tensor::from_vector(v, s, t);
      expect_transposed(x, transpose(x));
    }
}

TEST(Transpose, TwiceIsTheIdentity) {
  Tensor x = random_tensor({45, 38}, 1, DType::F32);
  EXPECT_EQ(transpose(transpose(x)).to_double_vector(), x.to_double_vector());
}

TEST(Transpose, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return transpose(in[0]); },
                        {random_tensor({5, 3}, 2).set_requires_grad(true)}));
}

TEST(Transpose, ANonMatrixIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing([] { transpose(Tensor::zeros({4})); },
                                               "transpose: x must be a 2-D tensor"));
}

}  // namespace
}  // namespace tandem::kernels
