// The pipelined split backward (TANDEM_ATTENTION_BACKWARD=split_pipelined,
// kernels/cuda/attention_backward_pipelined.cuh) on a GPU: against the CPU
// reference through the op, bf16/f16 (f32 runs the split path), shapes that
// exercise every padded head width, padding and dropout; and bit for bit
// against the split path on the same inputs (the same products on the same
// values: only how the streamed tiles reach shared memory differs). Skipped
// without a GPU (failed under TANDEM_REQUIRE_GPU=1). The device code runs on the
// CPU in attention_backward_pipelined_emulated_test.cc; the switch's parser is
// tested in attention_backward_fused_parity_test.cc.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>
#include <vector>

#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using Case = testing::AttentionCase;

class AttentionSplitPipelined : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionSplitPipelined, MatchesTheCpuReference) {
  const auto& [t, c] = GetParam();
  const testing::ForcedSwitch pipelined(set_attention_backward_path_for_testing, AttentionBackwardPath::SplitPipelined);
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(c, t);
  const testing::Tolerance tol = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(testing::all_close(r.grad_gpu, r.grad_cpu, tol.atol, tol.rtol));
}

TEST_P(AttentionSplitPipelined, GivesTheSplitPathsBits) {
  const auto& [t, c] = GetParam();
  EXPECT_TRUE(testing::gpu_backward(c, t, AttentionBackwardPath::SplitPipelined) ==
              testing::gpu_backward(c, t, AttentionBackwardPath::Split));
}

const Case kCases[] = {
    {1, 1, 1, 8, {}, 0.0},                     // one token: one partial query tile
    {3, 7, 2, 33, {7, 0, 5}, 0.2},             // a fully padded row, dropout, plain loads, DP = 64
    {2, 129, 4, 45, {}, 0.1},                  // odd Dh, dropout, three query tiles
    {2, 512, 2, 96, {512, 300}, 0.1},          // DP = 128 (32-query tiles: sixteen), padding, dropout
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.0},  // many heads, assorted lengths
    {2, 512, 12, 64, {512, 400}, 0.1},         // the bench's head dim and sequence
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionSplitPipelined,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
