// TANDEM_ATTENTION_OCCUPANCY=high (kernels/cuda/attention_switches.h): at head dims up to 32, in
// 16 bits, the pipelined forward compiled for five blocks per SM and split_pipelined's two passes
// for three (the dK/dV pass with 32-query tiles):
//   - the parser (every build): unset, empty or default is Default, high is High, and a bad
//     value's error names the variable and the value;
//   - on a GPU, through the op: the pipelined forward and split_pipelined backward give the default
//     kernels' bits, with dropout under both rules and the keep bits recomputed or saved, padding
//     (a row with no real key) and partial tiles; at head dim 64, where nothing changes, too.
//     Skipped without a GPU (failed under TANDEM_REQUIRE_GPU=1).
// attention_occupancy_test.cc checks the blocks per SM; the emulated tests
// (attention_{forward,backward}_pipelined_emulated_test.cc) run the same device code on the CPU.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "kernels/attention_dropout_rng.h"
#include "kernels/cuda/attention_switches.h"  // plain C++, built everywhere (kernels/CMakeLists.txt)
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/require_gpu.h"

namespace tandem::kernels {
namespace {

TEST(AttentionOccupancySwitch, IsDefaultUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_occupancy(nullptr), AttentionOccupancy::Default);
  EXPECT_EQ(parse_attention_occupancy(""), AttentionOccupancy::Default);
  EXPECT_EQ(parse_attention_occupancy("default"), AttentionOccupancy::Default);
  EXPECT_EQ(parse_attention_occupancy("high"), AttentionOccupancy::High);
  for (const char* bad : {"High", "max", "5"})
    EXPECT_TRUE(
        testing::rejects_naming_variable_and_value(parse_attention_occupancy, "TANDEM_ATTENTION_OCCUPANCY", bad));
}

#if TANDEM_WITH_CUDA
using testing::ForcedSwitch;
using testing::same_bits;
using Case = testing::AttentionCase;

// attention() on GPU 0, forward and backward, from testing::attention_op_on_the_gpu's inputs,
// with the pipelined forward and split_pipelined backward at `occupancy`: out and qkv's gradient, on the CPU.
std::pair<Tensor, Tensor> pipelined_on_the_gpu(const Case& c, DType t, AttentionOccupancy occupancy) {
  const ForcedSwitch o(set_attention_occupancy_for_testing, occupancy);
  const ForcedSwitch f(set_attention_forward_for_testing, AttentionForwardKernel::Pipelined);
  const ForcedSwitch b(set_attention_backward_path_for_testing, AttentionBackwardPath::SplitPipelined);
  return testing::attention_op_on_the_gpu(c, t);
}

class AttentionHighOccupancy : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionHighOccupancy, GivesTheDefaultKernelsBits) {
  const auto& [t, c] = GetParam();
  for (AttentionDropoutRng rng : {AttentionDropoutRng::Philox10x8, AttentionDropoutRng::Philox7x16})
    for (AttentionDropoutKeep keep : {AttentionDropoutKeep::Recompute, AttentionDropoutKeep::Saved}) {
      SCOPED_TRACE(std::string("rule ") + attention_dropout_rng_name(rng) + ", keep bits " +
                   attention_dropout_keep_name(keep));
      const ForcedSwitch r(set_attention_dropout_rng_for_testing, rng);
      const ForcedSwitch k(set_attention_dropout_keep_for_testing, keep);
      const auto [out, grad] = pipelined_on_the_gpu(c, t, AttentionOccupancy::Default);
      const auto [out_high, grad_high] = pipelined_on_the_gpu(c, t, AttentionOccupancy::High);
      EXPECT_TRUE(same_bits(out_high, out)) << "forward";
      EXPECT_TRUE(same_bits(grad_high, grad)) << "gradient";
      if (c.dropout == 0) break;  // the rule and the keep bits change nothing then
    }
}

const Case kCases[] = {
    {1, 1, 1, 8, {}, 0.0},                     // one token: one partial tile of each
    {2, 100, 2, 20, {100, 61}, 0.5},           // plain loads (Dh = 20), partial 32-query tiles
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.1},  // many heads, assorted lengths, dropout
    {8, 256, 8, 32, {256, 60, 0, 200, 17, 256, 99, 140}, 0.1},  // the configs' head dim, sequence and dropout
    {2, 129, 2, 64, {129, 70}, 0.1},           // head dim 64: the default kernels either way
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionHighOccupancy,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
