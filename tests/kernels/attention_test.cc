// Attention on the CPU: known formulas, padding, dropout, gradients against
// finite differences, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/philox.h"
#include "kernels/attention.h"
#include "kernels/attention_params.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
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

// The dropout threshold and scale recomputed from p: round(p * 2^16), 2^16 / (2^16 - threshold).
int64_t expected_threshold(double p) { return std::lround(double(float(p)) * 65536.0); }
double expected_scale(double p) { return 65536.0 / double(65536 - expected_threshold(p)); }

// The keep decision recomputed from core/philox.h alone, independently of attention_params.h:
// 16 x 16 squares of 32 blocks, (i, j) in block 4 (i % 8) + (j % 8) / 2 of its square, whose
// 16-bit halves hold (i, j), (i, j + 1) | (i + 8, j), (i + 8, j + 1) | then the same 8 keys on.
bool expected_keep(uint64_t seed, uint64_t offset, int64_t bh, int64_t i, int64_t j, int64_t S, double p) {
  const int64_t n = (S + 15) / 16;
  const uint64_t square = static_cast<uint64_t>((bh * n + i / 16) * n + j / 16);
  const Philox4 block = philox_block(seed, offset, square * 32 + static_cast<uint64_t>(4 * (i % 8) + (j % 8) / 2));
  const uint32_t word = block.v[2 * (j % 16 >= 8) + (i % 16 >= 8)];
  const uint32_t u = j % 2 == 0 ? word & 0xffffu : word >> 16;
  return u >= expected_threshold(p);
}

// philox7x16 (kernels/attention_dropout_rng.h), recomputed from core/philox.h alone as the rule is
// written in attention_params.h: 16 x 16 squares of 16 Philox4x32-7 blocks; (i, j) in block
// 4 ((i % 8) / 2) + (j % 8) / 2 of its square, byte 8 (i % 2) + 4 (j % 16 / 8) + 2 (i % 16 / 8) + j % 2,
// kept when it is >= round(p * 256), and kept probabilities scaled by 256 / (256 - that).
uint64_t expected_block7(int64_t bh, int64_t i, int64_t j, int64_t S) {
  const int64_t n = (S + 15) / 16;
  return static_cast<uint64_t>(((bh * n + i / 16) * n + j / 16) * 16 + 4 * ((i % 8) / 2) + (j % 8) / 2);
}
int expected_byte7(int64_t i, int64_t j) {
  return static_cast<int>(8 * (i % 2) + 4 * (j % 16 / 8) + 2 * (i % 16 / 8) + j % 2);
}
bool expected_keep7(uint64_t seed, uint64_t offset, int64_t bh, int64_t i, int64_t j, int64_t S, double p) {
  const uint64_t block = expected_block7(bh, i, j, S);
  const Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(offset),
                     static_cast<uint32_t>(offset >> 32)}};
  const Philox4 r = philox4x32<7>(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const int byte = expected_byte7(i, j);
  return ((r.v[byte / 4] >> (8 * (byte % 4))) & 0xffu) >= std::lround(double(float(p)) * 256.0);
}
double expected_scale7(double p) { return 256.0 / double(256 - std::lround(double(float(p)) * 256.0)); }

// The op under `rng` against its rule recomputed by `keep` with kept probabilities scaled by `scale`.
template <class Keep>
void expect_the_op_drops_by_the_rule(AttentionDropoutRng rng, Keep&& keep, double scale) {
  const testing::ForcedSwitch rule(set_attention_dropout_rng_for_testing, rng);
  const int64_t B = 2, S = 37, H = 2, Dh = 3;  // squares of 16: three per side, the last partial
  const double p = 0.3;
  const uint64_t seed = 1234, offset = 77;
  Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 11);
  for (int64_t b = 0; b < B; ++b)  // equal keys: every probability is 1/S
    for (int64_t i = 1; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d) qkv_at(qkv, H, Dh, b, i, 1, h, d) = qkv_at(qkv, H, Dh, b, 0, 1, h, d);
  // f64 takes the reference loops, f32 the ISA kernels' Philox blocks (philox10x8): both follow the rule.
  const std::vector<double> out64 = attention(qkv, Tensor(), H, p, seed, offset).to_double_vector();
  const std::vector<double> out32 = attention(qkv.to(DType::F32), Tensor(), H, p, seed, offset).to_double_vector();
  int dropped = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t d = 0; d < Dh; ++d) {
          double expect = 0;
          for (int64_t j = 0; j < S; ++j) {
            const bool kept = keep(seed, offset, b * H + h, i, j, S, p);
            dropped += !kept && d == 0;
            if (kept) expect += qkv_at(qkv, H, Dh, b, j, 2, h, d) / double(S) * scale;
          }
          const size_t at = static_cast<size_t>((b * S + i) * H * Dh + h * Dh + d);
          EXPECT_NEAR(out64[at], expect, 1e-12);
          EXPECT_NEAR(out32[at], expect, 1e-5);  // a wrong decision moves it by about 1/S
        }
  EXPECT_GT(dropped, 0);  // the case exercises dropping at all
}

TEST(AttentionDropout, DropsEachProbabilityByThePhiloxRuleAndRescales) {
  expect_the_op_drops_by_the_rule(AttentionDropoutRng::Philox10x8, expected_keep, expected_scale(0.3));
}

TEST(AttentionDropout, UnderPhilox7x16DropsEachProbabilityByItsRuleAndRescales) {
  expect_the_op_drops_by_the_rule(AttentionDropoutRng::Philox7x16, expected_keep7, expected_scale7(0.3));
}

TEST(AttentionDropoutMask, UnderPhilox7x16EveryBlockByteDecidesExactlyOneElementAndBlocksAreDense) {
  // For S a multiple of 16 the (block, byte) pairs of heads 0 and 1 are a bijection onto [0, 2 S^2 / 16) x [0, 16).
  const int64_t S = 48, heads = 2, blocks = heads * S * S / 16;
  std::vector<int> uses(static_cast<size_t>(blocks * 16), 0);
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const uint64_t group = attention_dropout_group(bh, i, j, S);
        const uint64_t block = attention_dropout_block16(group);
        const int byte = 8 * attention_dropout_half(group) + attention_dropout_slot(i, j);
        ASSERT_EQ(block, expected_block7(bh, i, j, S)) << i << ", " << j;
        ASSERT_EQ(byte, expected_byte7(i, j)) << i << ", " << j;
        ++uses[block * 16 + static_cast<uint64_t>(byte)];
      }
  for (size_t k = 0; k < uses.size(); ++k) ASSERT_EQ(uses[k], 1) << "block " << k / 16 << " byte " << k % 16;
}

TEST(AttentionDropoutMask, UnderPhilox7x16EachDecisionIsAByteOfItsPhilox4x32_7Block) {
  int differs = 0, checked = 0;
  for (int64_t S : {37, 64}) {
    const AttentionDropout d{0.3f, 0x1234567890abull, (uint64_t{3} << 16) | 5, nullptr, AttentionDropoutRng::Philox7x16};
    for (int64_t bh = 0; bh < 3; ++bh)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) {
          const bool keep = attention_dropout_keep(d, bh, i, j, S);
          ASSERT_EQ(keep, expected_keep7(d.seed, d.offset, bh, i, j, S, d.p)) << "S " << S << ", " << i << ", " << j;
          differs += keep != attention_dropout_keep({d.p, d.seed, d.offset}, bh, i, j, S);
          ++checked;
        }
  }
  EXPECT_GT(differs, checked / 5);  // another mask than philox10x8's, not a relabelling of it
}

TEST(AttentionDropout, KeepsAboutOneMinusPOfTheProbabilitiesInExpectation) {
  // Equal keys and v = 1: each output is (1/S) * sum_j keep_ij * scale, whose mean is 1.
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

TEST(AttentionDropout, AStepCountInMemoryGivesTheMaskOfTheCombinedOffset) {
  // A capturable step (kernels/dropout_mask.h) passes the call's 16 bits and points at the step count.
  const int64_t step = 3;
  Tensor q1 = random_tensor({2, 9, 3 * 2 * 4}, 12, DType::F32).set_requires_grad(true);
  Tensor q2 = random_tensor({2, 9, 3 * 2 * 4}, 12, DType::F32).set_requires_grad(true);
  Tensor combined = attention(q1, Tensor(), 2, 0.2, 5, (uint64_t{step} << 16) | 6);
  Tensor from_memory = attention(q2, Tensor(), 2, 0.2, 5, 6, &step);
  EXPECT_EQ(from_memory.to_double_vector(), combined.to_double_vector());
  combined.backward(Tensor::full(combined.shape(), 1.0));
  from_memory.backward(Tensor::full(from_memory.shape(), 1.0));
  EXPECT_EQ(q2.grad().to_double_vector(), q1.grad().to_double_vector());
  EXPECT_NE(attention(q2, Tensor(), 2, 0.2, 5, 6).to_double_vector(), combined.to_double_vector());
}

// ---- The mask definition itself (kernels/attention_params.h).

TEST(AttentionDropoutMask, EveryBlockSlotDecidesExactlyOneElementAndBlocksAreDense) {
  // For S a multiple of 16 the (block, slot) pairs of heads 0 and 1 are a bijection onto [0, 2 * S^2 / 8) x [0, 8).
  const int64_t S = 48, heads = 2, blocks = heads * S * S / 8;
  std::vector<int> uses(static_cast<size_t>(blocks * 8), 0);
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const uint64_t block = attention_dropout_group(bh, i, j, S);
        ASSERT_LT(block, static_cast<uint64_t>(blocks));
        ++uses[block * 8 + static_cast<uint64_t>(attention_dropout_slot(i, j))];
      }
  for (size_t k = 0; k < uses.size(); ++k) ASSERT_EQ(uses[k], 1) << "block " << k / 8 << " slot " << k % 8;
}

// keep(bh, i, j) for S x S matrices of several heads, one stream.
std::vector<uint8_t> mask_of(const AttentionDropout& d, int64_t heads, int64_t S) {
  std::vector<uint8_t> m(static_cast<size_t>(heads * S * S));
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j)
        m[static_cast<size_t>((bh * S + i) * S + j)] = attention_dropout_keep(d, bh, i, j, S);
  return m;
}

// Both rules of kernels/attention_dropout_rng.h, and the size of their uniforms' range.
struct Rule {
  AttentionDropoutRng rng;
  double range;
};
constexpr Rule kRules[] = {{AttentionDropoutRng::Philox10x8, 65536.0}, {AttentionDropoutRng::Philox7x16, 256.0}};

TEST(AttentionDropoutMask, KeepRateIsOneMinusTheQuantisedP) {
  const int64_t heads = 4, S = 256;  // 262144 decisions
  for (const Rule& rule : kRules)
    for (float p : {0.1f, 0.5f}) {
      const AttentionDropout d{p, 17, 3, nullptr, rule.rng};
      const std::vector<uint8_t> m = mask_of(d, heads, S);
      double kept = 0;
      for (uint8_t k : m) kept += k;
      const double n = double(m.size()), q = 1.0 - std::round(p * rule.range) / rule.range;
      EXPECT_NEAR(kept / n, q, 5 * std::sqrt(q * (1 - q) / n)) << attention_dropout_rng_name(rule.rng) << ", p = " << p;
    }
}

// Pearson correlation of the decisions at (bh, i, j) and (bh + dh, i + di, j + dj) over every pair inside the matrices.
double pair_correlation(const std::vector<uint8_t>& m, int64_t heads, int64_t S, int64_t dh, int64_t di, int64_t dj,
                        int64_t* pairs) {
  double n = 0, sa = 0, sb = 0, sab = 0;
  for (int64_t bh = 0; bh + dh < heads; ++bh)
    for (int64_t i = 0; i + di < S; ++i)
      for (int64_t j = 0; j + dj < S; ++j) {
        const double a = m[static_cast<size_t>((bh * S + i) * S + j)];
        const double b = m[static_cast<size_t>(((bh + dh) * S + i + di) * S + j + dj)];
        n += 1;
        sa += a;
        sb += b;
        sab += a * b;
      }
  *pairs = static_cast<int64_t>(n);
  const double ma = sa / n, mb = sb / n;
  return (sab / n - ma * mb) / std::sqrt(ma * (1 - ma) * mb * (1 - mb));
}

TEST(AttentionDropoutMask, NeighbouringDecisionsAreUncorrelated) {
  // Within a block (the other half of a word, the other word; under philox7x16 also the other byte and
  // the query row i ^ 1), between neighbouring blocks and squares, across heads.
  const int64_t heads = 4, S = 256;
  const int64_t offsets[][3] = {{0, 0, 1}, {0, 8, 0}, {0, 8, 1}, {0, 0, 8}, {0, 1, 0}, {0, 0, 2},
                                {0, 0, 16}, {0, 16, 0}, {0, 1, 1}, {1, 0, 0}, {0, 2, 0}, {0, 9, 0}};
  for (const Rule& rule : kRules) {
    const std::vector<uint8_t> m = mask_of({0.3f, 5, 11, nullptr, rule.rng}, heads, S);
    for (const auto& o : offsets) {
      int64_t pairs = 0;
      const double r = pair_correlation(m, heads, S, o[0], o[1], o[2], &pairs);
      EXPECT_LT(std::fabs(r), 5 / std::sqrt(double(pairs))) << attention_dropout_rng_name(rule.rng) << ": head +"
                                                            << o[0] << ", query +" << o[1] << ", key +" << o[2];
    }
  }
}

TEST(AttentionDropoutMask, StreamsOfNeighbouringOffsetsAreUncorrelated) {
  const int64_t heads = 2, S = 256;
  const std::vector<uint8_t> a = mask_of({0.3f, 5, 11}, heads, S), b = mask_of({0.3f, 5, 12}, heads, S);
  double sa = 0, sb = 0, sab = 0;
  const double n = double(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    sa += a[k];
    sb += b[k];
    sab += a[k] * b[k];
  }
  const double ma = sa / n, mb = sb / n;
  EXPECT_LT(std::fabs((sab / n - ma * mb) / std::sqrt(ma * (1 - ma) * mb * (1 - mb))), 5 / std::sqrt(n));
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
