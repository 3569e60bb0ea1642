// Attention on the CPU: known formulas, padding, dropout, gradients against
// finite differences, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/philox.h"
#include "kernels/attention.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::gradcheck;
using testing::padding_mask;
using testing::random_tensor;

// Element (b, i, part, h, d) of a packed qkv [B, S, 3*H*Dh] (part 0 = q, 1 = k, 2 = v).
double& qkv_at(Tensor& qkv, int64_t H, int64_t Dh, int64_t b, int64_t i, int64_t part, int64_t h, int64_t d) {
  const int64_t S = qkv.size(1), W = 3 * H * Dh;
  return qkv.data<double>()[(b * S + i) * W + (part * H + h) * Dh + d];
}

TEST(Attention, SingleTokenOutputsItsOwnValue) {
  const int64_t H = 2, Dh = 3;
  Tensor qkv = random_tensor({2, 1, 3 * H * Dh}, 1);
  Tensor out = attention(qkv, Tensor(), H);
  ASSERT_EQ(out.shape(), Shape({2, 1, H * Dh}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < Dh; ++d)
        EXPECT_EQ(out.data<double>()[b * H * Dh + h * Dh + d], qkv_at(qkv, H, Dh, b, 0, 2, h, d));
}

TEST(Attention, EqualKeysAverageTheValuesOfRealTokens) {
  // All keys equal: every score in a row is the same, so the output is the mean of the real values.
  const int64_t B = 2, S = 5, H = 2, Dh = 3;
  const std::vector<int64_t> lengths{5, 3};
  Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 1; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d) qkv_at(qkv, H, Dh, b, i, 1, h, d) = qkv_at(qkv, H, Dh, b, 0, 1, h, d);
  Tensor out = attention(qkv, padding_mask(lengths, S), H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < Dh; ++d) {
        double mean = 0;
        for (int64_t j = 0; j < lengths[b]; ++j) mean += qkv_at(qkv, H, Dh, b, j, 2, h, d) / double(lengths[b]);
        for (int64_t i = 0; i < S; ++i)  // padded query rows too: they attend to the real keys
          EXPECT_NEAR(out.data<double>()[(b * S + i) * H * Dh + h * Dh + d], mean, 1e-12) << b << " " << i;
      }
}

TEST(Attention, AllPaddingSequenceGivesZerosAndZeroGradientsNotNan) {
  const int64_t B = 2, S = 3, H = 2, Dh = 4;
  Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 3, DType::F32).set_requires_grad(true);
  Tensor out = attention(qkv, padding_mask({3, 0}, S), H);
  out.backward(random_tensor(out.shape(), 4, DType::F32));
  const std::vector<double> o = out.to_double_vector(), g = qkv.grad().to_double_vector();
  for (double v : o) EXPECT_TRUE(std::isfinite(v));
  for (double v : g) EXPECT_TRUE(std::isfinite(v));
  for (int64_t k = S * H * Dh; k < 2 * S * H * Dh; ++k) EXPECT_EQ(o[k], 0.0) << k;
  for (int64_t k = S * 3 * H * Dh; k < 2 * S * 3 * H * Dh; ++k) EXPECT_EQ(g[k], 0.0) << k;
}

// Runs attention forward and backward; returns {out, dqkv}.
std::pair<Tensor, Tensor> run(const Tensor& qkv_in, const Tensor& mask, int64_t H, const Tensor& dout, double p) {
  Tensor qkv = qkv_in.detach().clone().set_requires_grad(true);
  Tensor out = attention(qkv, mask, static_cast<int>(H), p, 7, 11);
  out.backward(dout);
  return {out, qkv.grad()};
}

class PaddingInvariance : public ::testing::TestWithParam<double> {};

TEST_P(PaddingInvariance, PaddedPositionsDoNotChangeRealOutputsOrGradientsByOneBit) {
  const int64_t B = 2, S = 6, H = 2, Dh = 5, W = 3 * H * Dh;
  const std::vector<int64_t> lengths{6, 4};
  const Tensor mask = padding_mask(lengths, S);
  Tensor qkv = random_tensor({B, S, W}, 5, DType::F32);
  Tensor changed = qkv.clone();
  Tensor noise = random_tensor({B, S, W}, 6, DType::F32);
  // New q, k and v at the padded positions of row 1.
  for (int64_t i = lengths[1]; i < S; ++i)
    for (int64_t c = 0; c < W; ++c)
      changed.data<float>()[(S + i) * W + c] = 10.0f * noise.data<float>()[(S + i) * W + c];
  // Upstream gradient zero at padded rows, as a masked pooling or loss produces.
  Tensor dout = random_tensor({B, S, H * Dh}, 8, DType::F32);
  for (int64_t i = lengths[1]; i < S; ++i)
    for (int64_t c = 0; c < H * Dh; ++c) dout.data<float>()[(S + i) * H * Dh + c] = 0.0f;

  auto [out_a, grad_a] = run(qkv, mask, H, dout, GetParam());
  auto [out_b, grad_b] = run(changed, mask, H, dout, GetParam());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < lengths[b]; ++i) {
      EXPECT_EQ(0, std::memcmp(out_a.data<float>() + (b * S + i) * H * Dh, out_b.data<float>() + (b * S + i) * H * Dh,
                               sizeof(float) * H * Dh))
          << "output row " << b << "," << i;
      EXPECT_EQ(0, std::memcmp(grad_a.data<float>() + (b * S + i) * W, grad_b.data<float>() + (b * S + i) * W,
                               sizeof(float) * W))
          << "gradient row " << b << "," << i;
    }
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutDropout, PaddingInvariance, ::testing::Values(0.0, 0.25));

TEST(Attention, PaddedKeysAndValuesGetExactlyZeroGradient) {
  // Even when padded query rows do receive an upstream gradient, k and v at padded positions
  // had probability 0 everywhere, so their gradients are exactly 0 (as in PyTorch).
  const int64_t B = 2, S = 5, H = 2, Dh = 3, W = 3 * H * Dh;
  Tensor qkv = random_tensor({B, S, W}, 9, DType::F32);
  auto [out, grad] = run(qkv, padding_mask({5, 2}, S), H, random_tensor({B, S, H * Dh}, 10, DType::F32), 0.0);
  for (int64_t i = 2; i < S; ++i)
    for (int64_t c = H * Dh; c < W; ++c) EXPECT_EQ(grad.data<float>()[(S + i) * W + c], 0.0f) << i << " " << c;
}

// The keep decision recomputed from core/philox.h's uniform stream, independently of attention_params.h.
bool expected_keep(uint64_t seed, uint64_t offset, int64_t bh, int64_t i, int64_t j, int64_t S, double p) {
  const uint64_t block = (static_cast<uint64_t>(bh) * S + i) * ((S + 3) / 4) + j / 4;
  return philox_uniform(seed, offset, 4 * block + j % 4) >= static_cast<float>(p);
}

TEST(AttentionDropout, DropsEachProbabilityByThePhiloxRuleAndRescales) {
  const int64_t B = 2, S = 5, H = 2, Dh = 3;
  const double p = 0.3;
  const uint64_t seed = 1234, offset = 77;
  Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 11);
  for (int64_t b = 0; b < B; ++b)  // equal keys: every probability is 1/S
    for (int64_t i = 1; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d) qkv_at(qkv, H, Dh, b, i, 1, h, d) = qkv_at(qkv, H, Dh, b, 0, 1, h, d);
  Tensor out = attention(qkv, Tensor(), H, p, seed, offset);
  int dropped = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t d = 0; d < Dh; ++d) {
          double expect = 0;
          for (int64_t j = 0; j < S; ++j) {
            const bool keep = expected_keep(seed, offset, b * H + h, i, j, S, p);
            dropped += !keep && d == 0;
            if (keep) expect += qkv_at(qkv, H, Dh, b, j, 2, h, d) / double(S) / (1.0 - double(float(p)));
          }
          EXPECT_NEAR(out.data<double>()[(b * S + i) * H * Dh + h * Dh + d], expect, 1e-12);
        }
  EXPECT_GT(dropped, 0);  // the case exercises dropping at all
}

TEST(AttentionDropout, KeepsAboutOneMinusPOfTheProbabilitiesInExpectation) {
  // Equal keys and v = 1: each output is (1/S) * sum_j keep_ij / (1 - p), whose mean is 1.
  const int64_t B = 2, S = 128, H = 4, Dh = 2;
  Tensor qkv = Tensor::full({B, S, 3 * H * Dh}, 1.0, DType::F32);
  Tensor out = attention(qkv, Tensor(), H, 0.3, 99, 0);
  double mean = 0;
  for (double v : out.to_double_vector()) mean += v / double(out.numel());
  EXPECT_NEAR(mean, 1.0, 0.01);  // 131072 decisions: standard error 0.0018
}

TEST(AttentionDropout, DependsOnlyOnSeedAndOffsetAndPZeroIgnoresThem) {
  Tensor qkv = random_tensor({2, 9, 3 * 2 * 4}, 12, DType::F32);
  auto same = [](const Tensor& a, const Tensor& b) { return a.to_double_vector() == b.to_double_vector(); };
  EXPECT_TRUE(same(attention(qkv, Tensor(), 2, 0.2, 5, 6), attention(qkv, Tensor(), 2, 0.2, 5, 6)));
  EXPECT_FALSE(same(attention(qkv, Tensor(), 2, 0.2, 5, 6), attention(qkv, Tensor(), 2, 0.2, 5, 7)));
  EXPECT_FALSE(same(attention(qkv, Tensor(), 2, 0.2, 5, 6), attention(qkv, Tensor(), 2, 0.2, 6, 6)));
  EXPECT_TRUE(same(attention(qkv, Tensor(), 2, 0.0, 5, 6), attention(qkv, Tensor(), 2, 0.0, 8, 9)));
}

Tensor leaf(const Shape& s, uint64_t seed) { return random_tensor(s, seed).set_requires_grad(true); }

TEST(AttentionGradcheck, SeveralHeadsOddHeadDimNoPadding) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return attention(in[0], Tensor(), 3); }, {leaf({2, 4, 3 * 3 * 5}, 13)}));
}

TEST(AttentionGradcheck, PaddingIncludingAnAllPaddingSequence) {
  const Tensor mask = padding_mask({5, 2, 0}, 5);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return attention(in[0], mask, 2); }, {leaf({3, 5, 3 * 2 * 3}, 14)}));
}

TEST(AttentionGradcheck, SingleToken) {
  EXPECT_TRUE(gradcheck([](const auto& in) { return attention(in[0], Tensor(), 2); }, {leaf({1, 1, 3 * 2 * 3}, 15)}));
}

TEST(AttentionGradcheck, DropoutWithPadding) {
  const Tensor mask = padding_mask({4, 3}, 4);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return attention(in[0], mask, 2, 0.3, 21, 3); },
                        {leaf({2, 4, 3 * 2 * 3}, 16)}));
}

TEST(Attention, SixteenBitInputsComputeInF32AndRoundOnce) {
  // bf16 inputs: the result equals the f64 result on the same (bf16) inputs to within one bf16 rounding.
  const int64_t B = 2, S = 33, H = 2, Dh = 16;
  const Tensor mask = padding_mask({33, 20}, S);
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 17, t);
    Tensor exact = attention(qkv.to(DType::F64), mask, H);
    Tensor got = attention(qkv, mask, H);
    EXPECT_EQ(got.dtype(), t);
    const double ulp = t == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
    EXPECT_TRUE(testing::all_close(got, exact, 1e-3 * ulp, ulp)) << dtype_name(t);
  }
}

// Expects attention(...) to throw an Error whose message contains `what`.
template <class F>
void expect_error(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << what << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Attention, RejectsBadArgumentsWithClearErrors) {
  Tensor qkv = random_tensor({2, 3, 12}, 18, DType::F32);
  expect_error([&] { attention(random_tensor({3, 12}, 1, DType::F32), Tensor(), 2); }, "[batch, seq, 3 * heads");
  expect_error([&] { attention(qkv, Tensor(), 5); }, "3 * num_heads * head_dim");
  expect_error([&] { attention(qkv, Tensor(), 0); }, "num_heads must be >= 1");
  expect_error([&] { attention(qkv, Tensor::zeros({2, 3}, DType::F32), 2); }, "must be u8");
  expect_error([&] { attention(qkv, padding_mask({3, 3, 3}, 3), 2); }, "key_padding_mask");
  expect_error([&] { attention(qkv, Tensor(), 2, 1.0); }, "dropout_p must be in [0, 1)");
  expect_error([&] { attention(qkv, Tensor(), 2, -0.1); }, "dropout_p must be in [0, 1)");
  expect_error([&] { attention(qkv.to(DType::I32), Tensor(), 2); }, "floating");
}

}  // namespace
}  // namespace tandem::kernels
