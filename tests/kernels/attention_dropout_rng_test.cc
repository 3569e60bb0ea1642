// Attention dropout's philox7x16 rule (TANDEM_ATTENTION_DROPOUT_RNG; kernels/attention_dropout_rng.h,
// kernels/attention_params.h): the switch, the threshold and scale, the CPU op under it (the kept mass,
// the backward keeping its forward's rule, finite differences), and on a GPU every
// forward-kernel and backward-path pair against the CPU reference under it, with keep bits recomputed
// and saved (skips without a GPU; fails under TANDEM_REQUIRE_GPU=1). The emulated tests run the same
// device code on the CPU (attention_emulated_test.cc, attention_philox7_emulated_test.cc);
// attention_test.cc recomputes the rule from core/philox.h alone and checks the op's forward against it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
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
