// TANDEM_ATTENTION_BLOCK_ORDER=tiles_first (kernels/cuda/attention_switches.h): the attention
// forward's grid with a head's 64-row query tiles side by side instead of the heads:
//   - the parser (every build): unset, empty or heads_first is HeadsFirst, tiles_first is TilesFirst,
//     and a bad value's error names the variable and the value;
//   - on a GPU, through the op: every forward kernel, each followed by the backward paths in turn
//     (which read its lse), gives the heads-first output and gradient bit for bit, with dropout (keep
//     bits recomputed and saved), padding and partial tiles. Skipped without a GPU (failed under
//     TANDEM_REQUIRE_GPU=1).
// attention_block_order_emulated_test.cc checks the grid and runs the same device code on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_switches.h"  // plain C++, built everywhere (kernels/CMakeLists.txt)
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/require_gpu.h"

namespace tandem::kernels {
namespace {

TEST(AttentionBlockOrderSwitch, IsHeadsFirstUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_block_order(nullptr), AttentionBlockOrder::HeadsFirst);
  EXPECT_EQ(parse_attention_block_order(""), AttentionBlockOrder::HeadsFirst);
  EXPECT_EQ(parse_attention_block_order("heads_first"), AttentionBlockOrder::HeadsFirst);
  EXPECT_EQ(parse_attention_block_order("tiles_first"), AttentionBlockOrder::TilesFirst);
  for (const char* bad : {"Tiles_First", "tiles", "1"})
    EXPECT_TRUE(
        testing::rejects_naming_variable_and_value(parse_attention_block_order, "TANDEM_ATTENTION_BLOCK_ORDER", bad));
}

#if TANDEM_WITH_CUDA
using testing::ForcedSwitch;
using testing::same_bits;
using Case = testing::AttentionCase;

// attention() on GPU 0, forward and backward, from testing::attention_op_on_the_gpu's inputs,
// with `forward` and `backward` and the grids in `order`: out and qkv's gradient, on the CPU.
std::pair<Tensor, Tensor> on_the_gpu(const Case& c, DType t, AttentionForwardKernel forward,
                                     AttentionBackwardPath backward, AttentionBlockOrder order) {
  const ForcedSwitch o(set_attention_block_order_for_testing, order);
  const ForcedSwitch f(set_attention_forward_for_testing, forward);
  const ForcedSwitch b(set_attention_backward_path_for_testing, backward);
  return testing::attention_op_on_the_gpu(c, t);
}

class AttentionBlockOrderOnTheGpu : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionBlockOrderOnTheGpu, TilesFirstGivesTheHeadsFirstBits) {
  const auto& [t, c] = GetParam();
  const bool f32 = t == DType::F32;  // f32 runs the tiled forward and the paths without cp.async
  const std::vector<AttentionForwardKernel> forwards =
      f32 ? std::vector{AttentionForwardKernel::Tiled}
          : std::vector{AttentionForwardKernel::Tiled, AttentionForwardKernel::Pipelined,
                        AttentionForwardKernel::PipelinedWide};
  const std::vector<AttentionBackwardPath> backwards{
      AttentionBackwardPath::Split, AttentionBackwardPath::SplitPipelined, AttentionBackwardPath::Fused,
      AttentionBackwardPath::FusedOrdered, AttentionBackwardPath::FusedOrderedPipelined};
  for (AttentionDropoutKeep keep : {AttentionDropoutKeep::Recompute, AttentionDropoutKeep::Saved}) {
    const ForcedSwitch k(set_attention_dropout_keep_for_testing, keep);
    for (size_t i = 0; i < std::max(forwards.size(), backwards.size()); ++i) {
      // Each forward kernel and each backward path at least once, in pairs.
      const AttentionForwardKernel forward = forwards[i % forwards.size()];
      const AttentionBackwardPath backward = backwards[i % backwards.size()];
      SCOPED_TRACE(std::string("forward ") + attention_forward_kernel_name(forward) + ", backward " +
                   attention_backward_path_name(backward) + ", keep bits " + attention_dropout_keep_name(keep));
      const auto [out, grad] = on_the_gpu(c, t, forward, backward, AttentionBlockOrder::HeadsFirst);
      const auto [out_tiles, grad_tiles] = on_the_gpu(c, t, forward, backward, AttentionBlockOrder::TilesFirst);
      EXPECT_TRUE(same_bits(out_tiles, out)) << "forward";
      EXPECT_TRUE(same_bits(grad_tiles, grad)) << "gradient";
    }
    if (c.dropout == 0) break;  // the keep bits change nothing then
  }
}

const Case kCases[] = {
    {1, 1, 1, 8, {}, 0.0},                     // one token: one partial tile of each
    {2, 100, 3, 20, {100, 61}, 0.5},           // plain loads (Dh = 20), partial tiles
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.1},  // many heads, assorted lengths, dropout
    {3, 200, 5, 64, {200, 0, 129}, 0.1},       // head dim 64, a row with no real key
    {2, 130, 2, 128, {130, 64}, 0.0},          // head dim 128
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionBlockOrderOnTheGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
