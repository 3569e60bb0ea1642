// The fused attention backward (TANDEM_ATTENTION_BACKWARD=fused,
// kernels/cuda/attention_backward_fused.cuh) on a GPU: against the CPU
// reference through the op, f32/bf16/f16, the shapes of
// attention_parity_test.cc that exercise every padded head width, padding and
// dropout; against the split path on the same inputs (dK, dV the same bits, dQ
// to f32 rounding: attention_backward_fused_emulated_test.cc says why),
// including more heads than one launch takes; and bit for bit run to run.
// fused_ordered (the dQ shares added in place, in key-tile order) and
// fused_ordered_pipelined (the same, query tiles double-buffered) against fused:
// the same bits, and fused_ordered against the CPU reference.
// Skipped without a GPU (failed under TANDEM_REQUIRE_GPU=1). The switch's
// parser is tested on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/stream.h"
#include "kernels/attention.h"
#include "tests/kernels/attention_backward_comparison.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using testing::all_close;
using testing::dq_agrees_to_f32_rounding;
using testing::gpu_backward;
using testing::dqkv_part;
using testing::padding_mask;
using testing::random_tensor;
using testing::rejects_naming_variable_and_value;
using Case = testing::AttentionCase;

TEST(AttentionBackwardSwitch, IsAutoUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_backward_path(nullptr), AttentionBackwardPath::Auto);
  EXPECT_EQ(parse_attention_backward_path(""), AttentionBackwardPath::Auto);
  EXPECT_EQ(parse_attention_backward_path("auto"), AttentionBackwardPath::Auto);
  EXPECT_EQ(parse_attention_backward_path("split"), AttentionBackwardPath::Split);
  EXPECT_EQ(parse_attention_backward_path("fused"), AttentionBackwardPath::Fused);
  EXPECT_EQ(parse_attention_backward_path("split_pipelined"), AttentionBackwardPath::SplitPipelined);
  EXPECT_EQ(parse_attention_backward_path("fused_ordered"), AttentionBackwardPath::FusedOrdered);
  EXPECT_EQ(parse_attention_backward_path("fused_ordered_pipelined"), AttentionBackwardPath::FusedOrderedPipelined);
  for (const char* bad : {"Fused", "1", "fused ", "pipelined", "ordered"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_attention_backward_path, "TANDEM_ATTENTION_BACKWARD", bad));
}

TEST(AttentionBackwardSwitch, AutoIsFusedInF32OrWithDropoutAndSplitPipelinedForSixteenBitsWithout) {
  const auto resolve = [](bool is_f32, bool dropout) {
    return resolve_attention_backward(AttentionBackwardPath::Auto, is_f32, dropout);
  };
  EXPECT_EQ(resolve(true, false), AttentionBackwardPath::Fused);
  EXPECT_EQ(resolve(true, true), AttentionBackwardPath::Fused);
  EXPECT_EQ(resolve(false, true), AttentionBackwardPath::Fused);
  EXPECT_EQ(resolve(false, false), AttentionBackwardPath::SplitPipelined);
}

TEST(AttentionBackwardSwitch, SplitAndFusedStandForThemselves) {
  for (bool is_f32 : {false, true})
    for (bool dropout : {false, true}) {
      EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::Split, is_f32, dropout), AttentionBackwardPath::Split);
      EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::Fused, is_f32, dropout), AttentionBackwardPath::Fused);
      EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::FusedOrdered, is_f32, dropout),
                AttentionBackwardPath::FusedOrdered);
    }
}

TEST(AttentionBackwardSwitch, SplitPipelinedIsSplitInF32) {
  for (bool dropout : {false, true}) {
    EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::SplitPipelined, false, dropout),
              AttentionBackwardPath::SplitPipelined);
    EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::SplitPipelined, true, dropout),
              AttentionBackwardPath::Split);
  }
}

TEST(AttentionBackwardSwitch, FusedOrderedPipelinedIsFusedOrderedInF32) {
  for (bool dropout : {false, true}) {
    EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::FusedOrderedPipelined, false, dropout),
              AttentionBackwardPath::FusedOrderedPipelined);
    EXPECT_EQ(resolve_attention_backward(AttentionBackwardPath::FusedOrderedPipelined, true, dropout),
              AttentionBackwardPath::FusedOrdered);
  }
}

TEST(AttentionBackwardSwitch, TestsCanForceEitherPath) {
  set_attention_backward_path_for_testing(AttentionBackwardPath::Fused);
  EXPECT_EQ(attention_backward_path(), AttentionBackwardPath::Fused);
  set_attention_backward_path_for_testing(AttentionBackwardPath::Split);
  EXPECT_EQ(attention_backward_path(), AttentionBackwardPath::Split);
  set_attention_backward_path_for_testing(std::nullopt);
}

class AttentionFusedBackwardParity : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionFusedBackwardParity, MatchesTheCpuReference) {
  const auto& [t, c] = GetParam();
  const testing::ForcedSwitch fused(set_attention_backward_path_for_testing, AttentionBackwardPath::Fused);
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(c, t);
  const testing::Tolerance tol = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(r.grad_gpu, r.grad_cpu, tol.atol, tol.rtol));
}

const Case kCases[] = {
    {1, 1, 1, 7, {}, 0.0},                     // one token, tiny head
    {3, 7, 2, 33, {7, 0, 5}, 0.2},             // a fully padded row, dropout, DP = 64
    {1, 129, 2, 64, {100}, 0.0},               // one key past two whole tiles
    {2, 129, 4, 45, {}, 0.1},                  // odd Dh, dropout
    {2, 512, 2, 96, {512, 300}, 0.1},          // DP = 128 (16-query tiles), padding, dropout
    {2, 512, 1, 128, {}, 0.0},                 // the largest head dim
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.0},  // many heads, assorted lengths
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFusedBackwardParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

class AttentionFusedVersusSplit : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

// dK, dV the same bits; dQ to f32 rounding (tests/kernels/attention_backward_comparison.h).
TEST_P(AttentionFusedVersusSplit, SameDkDvBitsAndDqToF32Rounding) {
  const auto& [t, c] = GetParam();
  const std::vector<double> fused = gpu_backward(c, t, AttentionBackwardPath::Fused);
  const std::vector<double> split = gpu_backward(c, t, AttentionBackwardPath::Split);
  const int64_t width = c.heads * c.head_dim, key_tiles = (c.seq + 63) / 64;
  EXPECT_TRUE(dqkv_part(fused, width, 1) == dqkv_part(split, width, 1)) << "dK";
  EXPECT_TRUE(dqkv_part(fused, width, 2) == dqkv_part(split, width, 2)) << "dV";
  EXPECT_TRUE(dq_agrees_to_f32_rounding(dqkv_part(fused, width, 0), dqkv_part(split, width, 0), key_tiles, t));
}

const Case kPairCases[] = {
    {2, 100, 2, 24, {100, 61}, 0.3},  // DP = 32, padding, dropout
    {2, 512, 2, 96, {512, 300}, 0.1},  // DP = 128, eight key tiles
    {5, 512, 13, 64, {512, 400, 300, 200, 1}, 0.1},  // 65 heads: two launches of the fused kernel
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFusedVersusSplit,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kPairCases)),
                         testing::dtype_and_case_name);

TEST(AttentionFusedBackward, IsBitReproducible) {
  TANDEM_REQUIRE_GPU();
  const Case c{2, 300, 4, 64, {300, 211}, 0.1};
  const std::vector<double> first = gpu_backward(c, DType::BF16, AttentionBackwardPath::Fused);
  for (int run = 1; run < 3; ++run)
    EXPECT_TRUE(gpu_backward(c, DType::BF16, AttentionBackwardPath::Fused) == first) << "run " << run;
}

// fused_ordered adds the same dQ shares in the same order as fused's reduction (the emulated tests
// show it bit for bit): on a GPU too, every element of dQ, dK and dV, at the CPU parity cases' shapes.
// (Several launches, which needs more than 512 heads of 512 x 64 here, are the emulated tests'.)
class AttentionFusedOrdered : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionFusedOrdered, GivesTheFusedPathsBits) {
  const auto& [t, c] = GetParam();
  const std::vector<double> fused = gpu_backward(c, t, AttentionBackwardPath::Fused);
  EXPECT_TRUE(gpu_backward(c, t, AttentionBackwardPath::FusedOrdered) == fused) << "fused_ordered";
  // In f32 this is fused_ordered again (resolve_attention_backward); in 16 bits the double-buffered kernel.
  EXPECT_TRUE(gpu_backward(c, t, AttentionBackwardPath::FusedOrderedPipelined) == fused) << "fused_ordered_pipelined";
}

TEST_P(AttentionFusedOrdered, MatchesTheCpuReference) {
  const auto& [t, c] = GetParam();
  set_attention_backward_path_for_testing(AttentionBackwardPath::FusedOrdered);
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(c, t);
  set_attention_backward_path_for_testing(std::nullopt);
  const testing::Tolerance tol = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(r.grad_gpu, r.grad_cpu, tol.atol, tol.rtol));
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFusedOrdered,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

TEST(AttentionFusedOrdered, IsBitReproducibleWithManyHeadsAndKeyTiles) {
  TANDEM_REQUIRE_GPU();
  // 8 x 12 heads of 512: 96 heads x 8 key tiles, every turn flag passed seven times per query tile.
  const Case c{8, 512, 12, 64, {512, 400, 300, 1, 512, 129, 64, 65}, 0.1};
  const std::vector<double> first = gpu_backward(c, DType::BF16, AttentionBackwardPath::FusedOrdered);
  EXPECT_TRUE(first == gpu_backward(c, DType::BF16, AttentionBackwardPath::Fused));
  for (int run = 1; run < 3; ++run)
    EXPECT_TRUE(gpu_backward(c, DType::BF16, AttentionBackwardPath::FusedOrdered) == first) << "run " << run;
  for (int run = 0; run < 2; ++run)
    EXPECT_TRUE(gpu_backward(c, DType::BF16, AttentionBackwardPath::FusedOrderedPipelined) == first)
        << "pipelined, run " << run;
}

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
