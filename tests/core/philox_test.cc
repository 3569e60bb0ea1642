#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"
#include "core/random.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

// Known-answer vectors from the Random123 distribution (kat_vectors), Philox4x32-10 and Philox4x32-7 (the
// seven-round generator of attention dropout's philox7x16 rule).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    int rounds;
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 expect;
  };
  const Philox4 zeros{{0, 0, 0, 0}}, ones{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
  const Philox4 pi{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  const Kat kats[] = {
      {10, zeros, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {10, ones, 0xffffffffu, 0xffffffffu, {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {10, pi, 0xa4093822u, 0x299f31d0u, {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
      {7, zeros, 0, 0, {{0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u}}},
      {7, ones, 0xffffffffu, 0xffffffffu, {{0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u}}},
      {7, pi, 0xa4093822u, 0x299f31d0u, {{0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}}},
  };
  for (const Kat& k : kats) {
    const Philox4 r = k.rounds == 7 ? philox4x32<7>(k.ctr, k.k0, k.k1) : philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.expect.v[i]) << k.rounds << " rounds, word " << i;
  }
}

// philox_block lays the block index and the subsequence into the counter and the seed into the key,
// for either round count.
TEST(Philox, BlocksOfAStreamAreTheGeneratorAtTheirCounter) {
  const uint64_t seed = 0x299f31d0a4093822ull, sub = 0x0370734413198a2eull, block = 0x85a308d3243f6a88ull;
  const Philox4 ctr{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  const Philox4 r7 = philox_block<7>(seed, sub, block), r10 = philox_block(seed, sub, block);
  const Philox4 e7 = philox4x32<7>(ctr, 0xa4093822u, 0x299f31d0u), e10 = philox4x32_10(ctr, 0xa4093822u, 0x299f31d0u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r7.v[i], e7.v[i]) << "word " << i;
    EXPECT_EQ(r10.v[i], e10.v[i]) << "word " << i;
  }
}

TEST(Philox, UniformStreamIsInUnitIntervalWithTheRightMean) {
  Tensor t = Tensor::empty({100000}, DType::F32);
  fill_uniform(t, 42, 0);
  double s = 0;
  for (double v : t.to_double_vector()) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    s += v;
  }
  EXPECT_NEAR(s / 100000, 0.5, 0.005);
}

TEST(Philox, NormalStreamHasUnitVariance) {
  Tensor t = Tensor::empty({100000}, DType::F64);
  fill_normal(t, 1, 0);
  double s = 0, s2 = 0;
  for (double v : t.to_double_vector()) {
    s += v;
    s2 += v * v;
  }
  double m = s / 100000;
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(s2 / 100000 - m * m, 1.0, 0.02);
}

TEST(Philox, StreamsDependOnSeedAndSubsequenceOnly) {
  Tensor a = Tensor::empty({64}), b = Tensor::empty({64}), c = Tensor::empty({64}), d = Tensor::empty({128});
  fill_uniform(a, 5, 1);
  fill_uniform(b, 5, 1);
  fill_uniform(c, 5, 2);
  fill_uniform(d, 5, 1);
  EXPECT_EQ(a.to_double_vector(), b.to_double_vector());
  EXPECT_NE(a.to_double_vector(), c.to_double_vector());
  // A longer tensor starts with the same elements: element i depends on i only.
  EXPECT_EQ(d.narrow(0, 64).to_double_vector(), a.to_double_vector());
}

TEST(PhiloxCuda, UniformIsBitIdenticalOnCpuAndGpu) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Tensor h = Tensor::empty({10007}, t), d = Tensor::empty({10007}, t, Device::cuda(0));
    fill_uniform(h, 77, 3, -1, 1);
    fill_uniform(d, 77, 3, -1, 1);
    EXPECT_EQ(d.to_double_vector(), h.to_double_vector()) << dtype_name(t);
  }
}

TEST(PhiloxCuda, NormalAgreesWithCpuToRounding) {
  TANDEM_REQUIRE_GPU();
  Tensor h = Tensor::empty({10007}), d = Tensor::empty({10007}, DType::F32, Device::cuda(0));
  fill_normal(h, 77, 3);
  fill_normal(d, 77, 3);
  EXPECT_TRUE(testing::all_close(d, h, 1e-5, 1e-5));
}

}  // namespace
}  // namespace tandem
