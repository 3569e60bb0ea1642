// The CUDA attention kernels under attention dropout's philox7x16 rule
// (TANDEM_ATTENTION_DROPOUT_RNG; kernels/attention_params.h), run on the CPU by
// tests/testing/warp_emulator.h: every forward kernel and backward path against
// the CPU reference under the same rule, and the saved keep bits (the forward's
// bytes against the rule's, the backward reading them without Philox and with
// the recomputing backward's bits). attention_emulated_test.cc checks the
// decisions each lane holds and the Philox blocks each pass computes. Also
// TANDEM_ATTENTION_OCCUPANCY=high's split_pipelined kernels under the rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::all_close;
using testing::same_bits;
using Case = testing::AttentionCase;
using Problem = testing::AttentionProblem;

const Case kCases[] = {
    {3, 7, 2, 33, {7, 0, 5}, 0.2},    // an all-padding row, DP = 64
    {2, 100, 2, 20, {100, 61}, 0.5},  // partial 16 x 16 squares, a square without a partner, several heads
    {1, 70, 1, 80, {}, 0.3},          // DP = 128: the dK/dV pass's 32-query tiles
};

class EmulatedPhilox7x16 : public EmulatedAttentionVariants {
 protected:
  Problem problem() const { return testing::make_problem(attention_case(), dtype(), AttentionDropoutRng::Philox7x16); }
};

std::string kernel_name(AttentionForwardKernel k) { return "forward kernel " + std::to_string(static_cast<int>(k)); }
std::string path_name(Path path) { return "backward path " + std::to_string(static_cast<int>(path)); }

TEST_P(EmulatedPhilox7x16, EveryForwardKernelMatchesTheCpuReference) {
  const Problem p = problem();  // p.out, p.lse: the CPU reference's, under philox7x16
  const testing::Tolerance tol = testing::attention_output_tolerance(p.t);
  for (AttentionForwardKernel kernel : forward_kernels()) {
    Tensor out = Tensor::empty(p.out.shape(), p.t), lse = Tensor::empty(p.lse.shape(), DType::F32);
    TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention forward", [&] {
      emulated_forward<scalar_t>(p.qkv, p.mask, out, lse, p.s, p.d, kernel);
    });
    EXPECT_TRUE(all_close(out, p.out, tol.atol, tol.rtol)) << kernel_name(kernel);
    EXPECT_TRUE(testing::same_lse(lse, p.lse)) << kernel_name(kernel);
  }
}

TEST_P(EmulatedPhilox7x16, EveryBackwardPathMatchesTheCpuReference) {
  const Problem p = problem();
  const Tensor expected = testing::cpu_backward(p);
  const testing::Tolerance tol = testing::attention_gradient_tolerance(p.t);
  for (Path path : backward_paths())
    EXPECT_TRUE(all_close(emulated_backward(p, path), expected, tol.atol, tol.rtol)) << path_name(path);
}

TEST_P(EmulatedPhilox7x16, TheRuleChangesTheGradient) {
  // Not a relabelling: the default rule's problem, same inputs, gives another split backward.
  const Problem p = problem(), other = testing::make_problem(attention_case(), dtype());
  EXPECT_FALSE(same_bits(emulated_backward(p, Path::Split), emulated_backward(other, Path::Split)));
}

// The keep bits `kernel` saves on p (into a buffer poisoned with 0x5a).
std::vector<uint8_t> saved_keep_bits(const Problem& p, AttentionForwardKernel kernel) {
  std::vector<uint8_t> keep(static_cast<size_t>(attention_keep_bytes(p.s)), 0x5a);
  Tensor out = Tensor::empty(p.out.shape(), p.t), lse = Tensor::empty(p.lse.shape(), DType::F32);
  TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention forward", [&] {
    emulated_forward<scalar_t>(p.qkv, p.mask, out, lse, p.s, p.d, kernel, warp_emulator::Schedule::RoundRobin,
                               AttentionKeyTiles::All, keep.data());
  });
  return keep;
}

TEST_P(EmulatedPhilox7x16, EveryForwardKernelSavesTheRulesKeepBits) {
  const Problem p = problem();
  const uint32_t threshold = attention_dropout_threshold(p.d);
  for (AttentionForwardKernel kernel : forward_kernels()) {
    const std::vector<uint8_t> keep = saved_keep_bits(p, kernel);
    int64_t wrong = 0;
    for (size_t g = 0; g < keep.size(); ++g) wrong += keep[g] != attention_keep8(p.d, g, threshold);
    EXPECT_EQ(wrong, 0) << kernel_name(kernel) << ": bytes unlike the rule's";
  }
}

TEST_P(EmulatedPhilox7x16, EveryBackwardPathReadingTheSavedBitsGivesTheRecomputedBitsWithoutPhilox) {
  const Problem p = problem();
  const std::vector<uint8_t> keep = saved_keep_bits(p, AttentionForwardKernel::Tiled);
  for (Path path : backward_paths()) {
    const Tensor recomputed = emulated_backward(p, path);
    philox_blocks_computed = 0;
    const Tensor saved = emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin,
                                           AttentionKeyTiles::All, keep.data());
    EXPECT_EQ(philox_blocks_computed, 0) << path_name(path);
    EXPECT_TRUE(same_bits(saved, recomputed)) << path_name(path);
  }
}

// TANDEM_ATTENTION_OCCUPANCY=high's split_pipelined passes at DP = 32 (32-query dK/dV tiles) under the
// rule: the default kernels' bits, recomputing the decisions or reading the saved ones.
TEST(EmulatedPhilox7x16HighOccupancy, SplitPipelinedGivesTheDefaultBitsRecomputingOrReadingTheSavedBits) {
  const Problem p = testing::make_problem({2, 100, 2, 20, {100, 61}, 0.5}, DType::BF16, AttentionDropoutRng::Philox7x16);
  const std::vector<uint8_t> keep = saved_keep_bits(p, AttentionForwardKernel::Pipelined);
  const Tensor recomputed = emulated_backward(p, Path::SplitPipelined);
  const testing::ForcedSwitch high(set_attention_occupancy_for_testing, AttentionOccupancy::High);
  EXPECT_TRUE(same_bits(emulated_backward(p, Path::SplitPipelined), recomputed)) << "recomputing";
  EXPECT_TRUE(same_bits(emulated_backward(p, Path::SplitPipelined, kFusedScratchLimit,
                                          warp_emulator::Schedule::RoundRobin, AttentionKeyTiles::All, keep.data()),
                        recomputed))
      << "reading the saved bits";
}

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedPhilox7x16,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

}  // namespace
}  // namespace tandem::kernels
