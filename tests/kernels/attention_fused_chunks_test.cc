// TANDEM_ATTENTION_FUSED_CHUNKS=waves (kernels/cuda/attention_switches.h): the fused backward's heads
// split into launches of whole rounds of the blocks the device holds at once:
//   - the parser (every build): unset, empty or even is Even, waves is Waves, and a bad value's error
//     names the variable and the value;
//   - on a GPU, through the op: with more heads than one launch's scratch holds, the fused path gives the
//     even chunks' bits, with dropout and padding. The chunks differ in 16 bits on an H100 or H200 (132
//     SMs, 3 blocks each: 396): 128 heads of S = 512, Dh = 64 go as 64 + 64 even (2 rounds each) and
//     49 + 49 + 30 by waves (1 each); in f32 (2 blocks per SM) both are even. The ordered variants' chunks
//     (a head's scratch is an eighth as large there) would need over 511 such heads to differ: their plan
//     is the emulated tests' alone.
//     Skipped without a GPU (failed under TANDEM_REQUIRE_GPU=1).
// attention_backward_fused_emulated_test.cc checks the plan (the rounds it saves, never more than
// even's, the limit kept) and chunks of whole rounds under the emulator.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/attention_switches.h"  // plain C++, built everywhere (kernels/CMakeLists.txt)
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/require_gpu.h"

namespace tandem::kernels {
namespace {

TEST(AttentionFusedChunksSwitch, IsEvenUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_fused_chunks(nullptr), AttentionFusedChunks::Even);
  EXPECT_EQ(parse_attention_fused_chunks(""), AttentionFusedChunks::Even);
  EXPECT_EQ(parse_attention_fused_chunks("even"), AttentionFusedChunks::Even);
  EXPECT_EQ(parse_attention_fused_chunks("waves"), AttentionFusedChunks::Waves);
  for (const char* bad : {"Waves", "rounds", "0"})
    EXPECT_TRUE(testing::rejects_naming_variable_and_value(parse_attention_fused_chunks,
                                                           "TANDEM_ATTENTION_FUSED_CHUNKS", bad));
}

#if TANDEM_WITH_CUDA
using testing::ForcedSwitch;
using testing::same_bits;
using Case = testing::AttentionCase;

// attention() on GPU 0, forward and backward, from testing::attention_op_on_the_gpu's inputs,
// with the backward `path` and its chunks `chunks`: out and qkv's gradient, on the CPU.
std::pair<Tensor, Tensor> on_the_gpu(const Case& c, DType t, AttentionBackwardPath path, AttentionFusedChunks chunks) {
  const ForcedSwitch k(set_attention_fused_chunks_for_testing, chunks);
  const ForcedSwitch b(set_attention_backward_path_for_testing, path);
  return testing::attention_op_on_the_gpu(c, t);
}

class AttentionFusedChunksOnTheGpu : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionFusedChunksOnTheGpu, WavesGiveTheEvenChunksBits) {
  const auto& [t, c] = GetParam();
  const auto [out, grad] = on_the_gpu(c, t, AttentionBackwardPath::Fused, AttentionFusedChunks::Even);
  const auto [out_waves, grad_waves] = on_the_gpu(c, t, AttentionBackwardPath::Fused, AttentionFusedChunks::Waves);
  EXPECT_TRUE(same_bits(out_waves, out)) << "forward";
  EXPECT_TRUE(same_bits(grad_waves, grad)) << "gradient";
}

const Case kCases[] = {
    {8, 512, 16, 64, {512, 300, 0, 512, 64, 511, 1, 200}, 0.1},  // 128 heads: chunks of 1 MiB heads
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.0},                    // one chunk either way
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFusedChunksOnTheGpu,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
