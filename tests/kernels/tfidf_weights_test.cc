// tfidf_weights against its definition computed here in double: tf from the
// mask's counts (sublinear or raw) times idf of the id, L2-normalised per row.
#include "kernels/tfidf_weights.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/errors.h"

namespace tandem::kernels {
namespace {

// Two rows of five: row 0 has counts 1, 3, 2 and padding; row 1 only padding and a zero-idf id.
const std::vector<int64_t> kIds = {2, 4, 5, 0, 0, 6, 0, 0, 0, 0};
const std::vector<int64_t> kMask = {1, 3, 2, 0, 0, 4, 0, 0, 0, 0};
const std::vector<double> kIdf = {9, 9, 1.0, 9, 2.5, 1.75, 0};

std::vector<double> reference(bool sublinear) {
  std::vector<double> w(kIds.size(), 0.0);
  for (size_t b = 0; b < 2; ++b) {
    double squares = 0;
    for (size_t s = 0; s < 5; ++s) {
      const size_t i = b * 5 + s;
      if (kMask[i] == 0) continue;
      const double c = static_cast<double>(kMask[i]);
      w[i] = (sublinear ? 1 + std::log(c) : c) * kIdf[static_cast<size_t>(kIds[i])];
      squares += w[i] * w[i];
    }
    for (size_t s = 0; s < 5 && squares > 0; ++s) w[b * 5 + s] /= std::sqrt(squares);
  }
  return w;
}

Tensor ids(DType t = DType::I64) { return Tensor::from_vector(kIds, {2, 5}, t); }
Tensor mask() { return Tensor::from_vector(kMask, {2, 5}, DType::U8); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "position " << i;
}

TEST(TfidfWeights, SublinearTfTimesIdfNormalisedPerRow) {
  const Tensor w = tfidf_weights(ids(), mask(), Tensor::from_vector(kIdf, {7}, DType::F64), true);
  EXPECT_EQ(w.dtype(), DType::F64);
  EXPECT_FALSE(w.requires_grad());
  expect_near(w.to_double_vector(), reference(true), 1e-15);
}

TEST(TfidfWeights, RawTfIsTheCount) {
  const Tensor w = tfidf_weights(ids(DType::I32), mask(), Tensor::from_vector(kIdf, {7}, DType::F32), false);
  EXPECT_EQ(w.dtype(), DType::F32);
  expect_near(w.to_double_vector(), reference(false), 1e-7);
}

TEST(TfidfWeights, EachRowHasUnitNormAndARowOfZeroWeightsStaysZero) {
  const std::vector<double> w = tfidf_weights(ids(), mask(), Tensor::from_vector(kIdf, {7}, DType::F64), true)
                                    .to_double_vector();
  double row0 = 0;
  for (size_t s = 0; s < 5; ++s) row0 += w[s] * w[s];
  EXPECT_NEAR(row0, 1.0, 1e-15);
  for (size_t s = 5; s < 10; ++s) {
    EXPECT_FALSE(std::isnan(w[s]));
    EXPECT_EQ(w[s], 0.0);  // id 6 has idf 0, the rest is padding
  }
}

TEST(TfidfWeights, AnIdOutsideTheIdfTableIsAnErrorNamingIt) {
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{2, 7}, {1, 2}, DType::I64);
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { tfidf_weights(bad, Tensor::full({1, 2}, 1, DType::U8), Tensor::full({7}, 1.0), true); },
      "token id 7 at [batch 0, position 1] is outside the idf table [0, 7)"));
}

TEST(TfidfWeights, MaskOfAnotherShapeIsAnError) {
  EXPECT_TRUE(testing::throws_error_containing(
      [] { tfidf_weights(ids(), Tensor::full({5, 2}, 1, DType::U8), Tensor::full({7}, 1.0), true); },
      "mask must be u8 of the ids' shape"));
}

}  // namespace
}  // namespace tandem::kernels
