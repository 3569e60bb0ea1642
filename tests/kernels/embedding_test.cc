// embedding(ids, tok, pos): values, gradients against finite differences, and errors.
#include <gtest/gtest.h>

#include "kernels/embedding.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::random_tensor;
using testing::throws_error_containing;

// tok[v, d] = 10 v + d and pos[s, d] = 0.5 s, so every output element names its source rows.
Tensor counting_table(int64_t rows, int64_t dim, double row_step, double col_step) {
  std::vector<double> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < dim; ++d) v.push_back(row_step * static_cast<double>(r) + col_step * static_cast<double>(d));
  return Tensor::from_vector(v, {rows, dim}, DType::F32);
}

TEST(Embedding, AddsTheTokenRowAndThePositionRow) {
  Tensor tok = counting_table(6, 3, 10, 1), pos = counting_table(4, 3, 0.5, 0);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{5, 0, 2, 2, 1, 5}, {2, 3});
  Tensor out = embedding(ids, tok, pos);
  ASSERT_EQ(out.shape(), Shape({2, 3, 3}));
  std::vector<double> y = out.to_double_vector();
  const int64_t id[6] = {5, 0, 2, 2, 1, 5};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t d = 0; d < 3; ++d)
        EXPECT_EQ(y[static_cast<size_t>((b * 3 + s) * 3 + d)], 10.0 * id[b * 3 + s] + d + 0.5 * s) << b << s << d;
}

TEST(Embedding, I32AndI64IdsGiveTheSameOutput) {
  Tensor tok = random_tensor({7, 5}, 1, DType::F32), pos = random_tensor({3, 5}, 2, DType::F32);
  std::vector<int64_t> ids{6, 0, 3, 3, 1, 2};
  Tensor a = embedding(Tensor::from_vector(ids, {2, 3}, DType::I64), tok, pos);
  Tensor b = embedding(Tensor::from_vector(ids, {2, 3}, DType::I32), tok, pos);
  EXPECT_EQ(a.to_double_vector(), b.to_double_vector());
}

TEST(Embedding, GradientsOfBothTablesMatchFiniteDifferencesWithRepeatedIds) {
  // Id 1 occurs four times, id 4 never; 5 positions for sequences of 3.
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 1, 3, 0, 1, 1}, {2, 3}, DType::I32);
  Tensor tok = random_tensor({5, 4}, 3).set_requires_grad(true);
  Tensor pos = random_tensor({5, 4}, 4).set_requires_grad(true);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return embedding(ids, in[0], in[1]); }, {tok, pos}));
}

TEST(Embedding, UnusedIdsAndPositionsGetZeroGradient) {
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 0}, {1, 2});
  Tensor tok = random_tensor({4, 3}, 5, DType::F32).set_requires_grad(true);
  Tensor pos = random_tensor({6, 3}, 6, DType::F32).set_requires_grad(true);
  embedding(ids, tok, pos).backward(Tensor::full({1, 2, 3}, 1.0));
  std::vector<double> gt = tok.grad().to_double_vector(), gp = pos.grad().to_double_vector();
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_EQ(gt[static_cast<size_t>(1 * 3 + d)], 0.0);  // id 1 unused
    EXPECT_EQ(gt[static_cast<size_t>(3 * 3 + d)], 0.0);  // id 3 unused
    EXPECT_EQ(gt[static_cast<size_t>(2 * 3 + d)], 1.0);
    for (int64_t s = 2; s < 6; ++s) EXPECT_EQ(gp[static_cast<size_t>(s * 3 + d)], 0.0);
  }
}

TEST(Embedding, Bf16TableGradientIsSummedInF32AndRoundedOnce) {
  // 300 occurrences of 1.0: a bf16 running sum would stall at 256; f32 accumulation gives 300
  // (representable in bf16: 300 = 1.00101100b * 2^8 needs 6 mantissa bits).
  Tensor ids = Tensor::zeros({3, 100}, DType::I64);
  Tensor tok = Tensor::zeros({2, 1}, DType::BF16).set_requires_grad(true);
  Tensor pos = Tensor::zeros({100, 1}, DType::BF16);
  embedding(ids, tok, pos).backward(Tensor::full({3, 100, 1}, 1.0, DType::BF16));
  EXPECT_EQ(tok.grad().to_double_vector(), (std::vector<double>{300.0, 0.0}));
}

TEST(Embedding, OutOfRangeIdIsAnErrorNamingItsPosition) {
  Tensor tok = random_tensor({4, 2}, 7, DType::F32), pos = random_tensor({3, 2}, 8, DType::F32);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 9, 1}, {2, 3});
  EXPECT_TRUE(throws_error_containing([&] { embedding(ids, tok, pos); },
                                      "token id 9 at [batch 1, position 1] is outside the vocabulary [0, 4)"));
}

TEST(Embedding, NegativeIdIsAnError) {
  Tensor tok = random_tensor({4, 2}, 7, DType::F32), pos = random_tensor({3, 2}, 8, DType::F32);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{-1}, {1, 1}, DType::I32);
  EXPECT_TRUE(throws_error_containing([&] { embedding(ids, tok, pos); }, "token id -1"));
}

TEST(Embedding, SequenceLongerThanThePositionTableIsAnError) {
  Tensor tok = random_tensor({4, 2}, 7, DType::F32), pos = random_tensor({3, 2}, 8, DType::F32);
  EXPECT_TRUE(throws_error_containing([&] { embedding(Tensor::zeros({1, 4}, DType::I64), tok, pos); },
                                      "sequence length 4 exceeds the 3 learned positions"));
}

TEST(Embedding, FloatIdsAreAnError) {
  Tensor tok = random_tensor({4, 2}, 7, DType::F32), pos = random_tensor({3, 2}, 8, DType::F32);
  EXPECT_TRUE(throws_error_containing([&] { embedding(Tensor::zeros({1, 2}), tok, pos); }, "ids must be i32 or i64"));
}

}  // namespace
}  // namespace tandem::kernels
