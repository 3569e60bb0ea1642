// Attention dropout's philox7x16 rule (TANDEM_ATTENTION_DROPOUT_RNG; kernels/attention_dropout_rng.h,
// kernels/attention_params.h): the switch, the rule recomputed from core/philox.h alone, the CPU op under
// it (forward, the backward keeping its forward's rule, finite differences), and on a GPU every
// forward-kernel and backward-path pair against the CPU reference under it, with keep bits recomputed
// and saved (skips without a GPU; fails under TANDEM_REQUIRE_GPU=1). The emulated tests run the same
// device code on the CPU (attention_emulated_test.cc, attention_saved_keep_emulated_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/philox.h"
#include "kernels/attention.h"
#include "kernels/attention_dropout_rng.h"
#include "kernels/attention_params.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_switches.h"
#endif

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::ForcedSwitch;
using testing::gradcheck;
using testing::padding_mask;
using testing::random_tensor;

TEST(AttentionDropoutRngSwitch, DefaultsToPhilox10x8AndNamesBothRules) {
  EXPECT_EQ(parse_attention_dropout_rng(nullptr), AttentionDropoutRng::Philox10x8);
  EXPECT_EQ(parse_attention_dropout_rng(""), AttentionDropoutRng::Philox10x8);
  EXPECT_EQ(parse_attention_dropout_rng("philox10x8"), AttentionDropoutRng::Philox10x8);
  EXPECT_EQ(parse_attention_dropout_rng("philox7x16"), AttentionDropoutRng::Philox7x16);
  EXPECT_STREQ(attention_dropout_rng_name(AttentionDropoutRng::Philox7x16), "philox7x16");
}

TEST(AttentionDropoutRngSwitch, ABadValueIsAnErrorNamingTheVariableAndTheValue) {
  try {
    parse_attention_dropout_rng("philox7");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("TANDEM_ATTENTION_DROPOUT_RNG"), std::string::npos) << m;
    EXPECT_NE(m.find("'philox7'"), std::string::npos) << m;
  }
}

AttentionDropout philox7(float p, uint64_t seed, uint64_t offset) {
  return {p, seed, offset, nullptr, AttentionDropoutRng::Philox7x16};
}

TEST(AttentionDropoutPhilox7x16, ThresholdIsRoundPTimes256AndTheScaleTheInverseKeepRate) {
  EXPECT_EQ(attention_dropout_threshold(philox7(0.0f, 1, 2)), 0u);
  EXPECT_EQ(attention_dropout_scale<double>(philox7(0.0f, 1, 2)), 1.0);  // p = 0: the exact identity
  EXPECT_EQ(attention_dropout_threshold(philox7(0.1f, 1, 2)), 26u);      // 25.6
  EXPECT_DOUBLE_EQ(attention_dropout_scale<double>(philox7(0.1f, 1, 2)), 256.0 / 230.0);
  EXPECT_EQ(attention_dropout_threshold(philox7(0.5f, 1, 2)), 128u);
  EXPECT_EQ(attention_dropout_threshold(philox7(1.0f / 512, 1, 2)), 1u);  // half way rounds up
  EXPECT_EQ(attention_dropout_threshold(philox7(1.0f / 1024, 1, 2)), 0u);
  EXPECT_EQ(attention_dropout_threshold(philox7(0.999f, 1, 2)), 255u);  // below 1 never everything
  // The default rule's 16-bit threshold is untouched by the field's default.
  EXPECT_EQ(attention_dropout_threshold(AttentionDropout{0.1f, 1, 2}), 6554u);
}

// The decision recomputed from core/philox.h alone, as the rule is written in attention_params.h:
// 16 x 16 squares of 16 Philox4x32-7 blocks; (i, j) in block 4 ((i % 8) / 2) + (j % 8) / 2 of its
// square, byte 8 (i % 2) + 4 (j % 16 / 8) + 2 (i % 16 / 8) + j % 2, kept when it is >= round(p * 256).
uint64_t expected_block(int64_t bh, int64_t i, int64_t j, int64_t S) {
  const int64_t n = (S + 15) / 16;
  return static_cast<uint64_t>(((bh * n + i / 16) * n + j / 16) * 16 + 4 * ((i % 8) / 2) + (j % 8) / 2);
}
int expected_byte(int64_t i, int64_t j) {
  return static_cast<int>(8 * (i % 2) + 4 * (j % 16 / 8) + 2 * (i % 16 / 8) + j % 2);
}
bool expected_keep(uint64_t seed, uint64_t offset, int64_t bh, int64_t i, int64_t j, int64_t S, double p) {
  const uint64_t block = expected_block(bh, i, j, S);
  const Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(offset),
                     static_cast<uint32_t>(offset >> 32)}};
  const Philox4 r = philox4x32<7>(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const int byte = expected_byte(i, j);
  return ((r.v[byte / 4] >> (8 * (byte % 4))) & 0xffu) >= std::lround(double(float(p)) * 256.0);
}

TEST(AttentionDropoutPhilox7x16, EveryBlockByteDecidesExactlyOneElementAndBlocksAreDense) {
  // For S a multiple of 16 the (block, byte) pairs of heads 0 and 1 are a bijection onto [0, 2 S^2 / 16) x [0, 16).
  const int64_t S = 48, heads = 2, blocks = heads * S * S / 16;
  std::vector<int> uses(static_cast<size_t>(blocks * 16), 0);
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const uint64_t group = attention_dropout_group(bh, i, j, S);
        const uint64_t block = attention_dropout_block16(group);
        const int byte = 8 * attention_dropout_half(group) + attention_dropout_slot(i, j);
        ASSERT_EQ(block, expected_block(bh, i, j, S)) << i << ", " << j;
        ASSERT_EQ(byte, expected_byte(i, j)) << i << ", " << j;
        ++uses[block * 16 + static_cast<uint64_t>(byte)];
      }
  for (size_t k = 0; k < uses.size(); ++k) ASSERT_EQ(uses[k], 1) << "block " << k / 16 << " byte " << k % 16;
}

TEST(AttentionDropoutPhilox7x16, EachDecisionIsAByteOfItsPhilox4x32_7Block) {
  int differs = 0, checked = 0;
  for (int64_t S : {37, 64}) {
    const AttentionDropout d = philox7(0.3f, 0x1234567890abull, (uint64_t{3} << 16) | 5);
    for (int64_t bh = 0; bh < 3; ++bh)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) {
          const bool keep = attention_dropout_keep(d, bh, i, j, S);
          ASSERT_EQ(keep, expected_keep(d.seed, d.offset, bh, i, j, S, d.p)) << "S " << S << ", " << i << ", " << j;
          differs += keep != attention_dropout_keep({d.p, d.seed, d.offset}, bh, i, j, S);
          ++checked;
        }
  }
  EXPECT_GT(differs, checked / 5);  // another mask than philox10x8's, not a relabelling of it
}

// Element (b, i, part, h, d) of a packed qkv [B, S, 3*H*Dh] (part 0 = q, 1 = k, 2 = v).
double& qkv_at(Tensor& qkv, int64_t H, int64_t Dh, int64_t b, int64_t i, int64_t part, int64_t h, int64_t d) {
  const int64_t S = qkv.size(1), W = 3 * H * Dh;
  return qkv.data<double>()[(b * S + i) * W + (part * H + h) * Dh + d];
}

TEST(AttentionDropoutPhilox7x16, TheOpDropsEachProbabilityByTheRuleAndRescales) {
  const ForcedSwitch rule(set_attention_dropout_rng_for_testing, AttentionDropoutRng::Philox7x16);
  const int64_t B = 2, S = 37, H = 2, Dh = 3;  // squares of 16: three per side, the last partial
  const double p = 0.3, scale = 256.0 / (256.0 - std::lround(0.3f * 256.0));
  const uint64_t seed = 1234, offset = 77;
  Tensor qkv = random_tensor({B, S, 3 * H * Dh}, 11);
  for (int64_t b = 0; b < B; ++b)  // equal keys: every probability is 1/S
    for (int64_t i = 1; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d) qkv_at(qkv, H, Dh, b, i, 1, h, d) = qkv_at(qkv, H, Dh, b, 0, 1, h, d);
  const std::vector<double> out64 = attention(qkv, Tensor(), H, p, seed, offset).to_double_vector();
  const std::vector<double> out32 = attention(qkv.to(DType::F32), Tensor(), H, p, seed, offset).to_double_vector();
  int dropped = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t d = 0; d < Dh; ++d) {
          double expect = 0;
          for (int64_t j = 0; j < S; ++j) {
            const bool keep = expected_keep(seed, offset, b * H + h, i, j, S, p);
            dropped += !keep && d == 0;
            if (keep) expect += qkv_at(qkv, H, Dh, b, j, 2, h, d) / double(S) * scale;
          }
          const size_t at = static_cast<size_t>((b * S + i) * H * Dh + h * Dh + d);
          EXPECT_NEAR(out64[at], expect, 1e-12);
          EXPECT_NEAR(out32[at], expect, 1e-5);  // a wrong decision moves it by about 1/S
        }
  EXPECT_GT(dropped, 0);
}

TEST(AttentionDropoutPhilox7x16, KeepsTheProbabilitiesMassInExpectation) {
  // Equal keys and v = 1: each output is (1/S) * sum_j keep_ij * scale, whose mean is 1.
  const ForcedSwitch rule(set_attention_dropout_rng_for_testing, AttentionDropoutRng::Philox7x16);
  Tensor out = attention(Tensor::full({2, 128, 3 * 4 * 2}, 1.0, DType::F32), Tensor(), 4, 0.3, 99, 0);
  double mean = 0;
  for (double v : out.to_double_vector()) mean += v / double(out.numel());
  EXPECT_NEAR(mean, 1.0, 0.01);  // 131072 decisions: standard error 0.0018
}

// qkv's gradient of attention(qkv) . dout, the forward under `forward_rule` and the backward under `backward_rule`.
std::vector<double> gradient(AttentionDropoutRng forward_rule, AttentionDropoutRng backward_rule) {
  Tensor qkv = random_tensor({2, 19, 3 * 2 * 8}, 21, DType::F32).set_requires_grad(true);
  Tensor out;
  {
    const ForcedSwitch rule(set_attention_dropout_rng_for_testing, forward_rule);
    out = attention(qkv, padding_mask({19, 11}, 19), 2, 0.25, 8, 9);
  }
  const ForcedSwitch rule(set_attention_dropout_rng_for_testing, backward_rule);
  out.backward(random_tensor(out.shape(), 22, DType::F32));
  return qkv.grad().to_double_vector();
}

TEST(AttentionDropoutPhilox7x16, TheBackwardUsesTheRuleItsForwardRecorded) {
  using R = AttentionDropoutRng;
  EXPECT_EQ(gradient(R::Philox7x16, R::Philox10x8), gradient(R::Philox7x16, R::Philox7x16));
  EXPECT_EQ(gradient(R::Philox10x8, R::Philox7x16), gradient(R::Philox10x8, R::Philox10x8));
  EXPECT_NE(gradient(R::Philox7x16, R::Philox7x16), gradient(R::Philox10x8, R::Philox10x8));
}

TEST(AttentionDropoutPhilox7x16, GradientsMatchFiniteDifferences) {
  const ForcedSwitch rule(set_attention_dropout_rng_for_testing, AttentionDropoutRng::Philox7x16);
  const Tensor mask = padding_mask({4, 3}, 4);
  EXPECT_TRUE(gradcheck([&](const auto& in) { return attention(in[0], mask, 2, 0.3, 21, 3); },
                        {random_tensor({2, 4, 3 * 2 * 3}, 16).set_requires_grad(true)}));
}

#if TANDEM_WITH_CUDA
using Case = testing::AttentionCase;

// Every forward kernel and backward path (GpuAttentionVariants), keep bits recomputed and saved, under
// philox7x16 against the CPU reference under it: the same decisions, so the parity tests' tolerances.
class AttentionDropoutPhilox7x16OnTheGpu : public testing::GpuAttentionVariants {};

TEST_P(AttentionDropoutPhilox7x16OnTheGpu, EveryKernelPairMatchesTheCpuReference) {
  const ForcedSwitch rule(set_attention_dropout_rng_for_testing, AttentionDropoutRng::Philox7x16);
  const DType t = dtype();
  const testing::Tolerance fo = testing::attention_output_tolerance(t), go = testing::attention_gradient_tolerance(t);
  for (const auto& [forward, backward] : variants())
    for (AttentionDropoutKeep keep : {AttentionDropoutKeep::Recompute, AttentionDropoutKeep::Saved}) {
      SCOPED_TRACE(std::string(attention_forward_kernel_name(forward)) + " + " +
                   attention_backward_path_name(backward) + ", keep bits " + attention_dropout_keep_name(keep));
      const ForcedSwitch f(set_attention_forward_for_testing, forward);
      const ForcedSwitch b(set_attention_backward_path_for_testing, backward);
      const ForcedSwitch k(set_attention_dropout_keep_for_testing, keep);
      const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(attention_case(), t);
      EXPECT_TRUE(all_close(r.out_gpu, r.out_cpu, fo.atol, fo.rtol)) << "forward";
      EXPECT_TRUE(all_close(r.grad_gpu, r.grad_cpu, go.atol, go.rtol)) << "gradient";
    }
}

const Case kGpuCases[] = {
    {3, 7, 2, 33, {7, 0, 5}, 0.2},    // an all-padding row, Dh padded to 64
    {2, 129, 4, 45, {}, 0.1},         // odd Dh, a partial square pair at the end
    {2, 100, 2, 20, {100, 61}, 0.5},  // partial 16 x 16 squares
    {2, 256, 2, 96, {256, 130}, 0.1}, // Dh padded to 128: 32-query dK/dV tiles
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionDropoutPhilox7x16OnTheGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kGpuCases)),
                         testing::dtype_and_case_name);
#endif

}  // namespace
}  // namespace tandem::kernels
