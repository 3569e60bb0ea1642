// How many blocks of the opt-in attention kernels fit one SM of an sm_90 GPU: the
// promises of their __launch_bounds__ (kPipelinedBlocksPerSm in
// kernels/cuda/attention_forward_pipelined.cuh, kFusedBlocksPerSm in
// kernels/cuda/attention_backward_fused.cuh, kSplitPipelinedBlocksPerSm in
// kernels/cuda/attention_backward_pipelined.cuh), by default and under
// TANDEM_ATTENTION_OCCUPANCY=high. The first GPU run found every
// attention kernel at two blocks (8 warps) per SM; these kernels are now compiled
// for more, and a register count or a shared-memory carveout that undoes that
// fails here instead of showing up only as a slower benchmark. Skipped without a
// GPU (TANDEM_REQUIRE_GPU=1 makes that a failure) and on other architectures,
// whose shared memory per SM differs.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "core/check.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/require_gpu.h"

#if TANDEM_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

// Skips unless device 0 is an sm_90 GPU.
#define REQUIRE_SM90()                                                                           \
  do {                                                                                           \
    TANDEM_REQUIRE_GPU();                                                                        \
    int major = 0;                                                                               \
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));     \
    if (major != 9) GTEST_SKIP() << "the launch bounds are sized for sm_90's 228 KB per SM";     \
  } while (0)

// Expects blocks(head_dim, t) == blocks_per_sm for each (head_dim, blocks_per_sm), in bf16 and f16.
template <class F>
void expect_blocks_in_16_bits(F blocks, std::initializer_list<std::pair<int64_t, int>> expected) {
  for (DType t : {DType::BF16, DType::F16})
    for (const auto& [head_dim, per_sm] : expected)
      EXPECT_EQ(blocks(head_dim, t), per_sm) << dtype_name(t) << " head_dim " << head_dim;
}

TEST(AttentionOccupancy, ThePipelinedForwardFitsFourBlocksAtHeadDimsUpTo64AndTwoAt128) {
  REQUIRE_SM90();
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_forward_blocks_per_sm(dh, t, AttentionForwardKernel::Pipelined); },
      {{32, 4}, {64, 4}, {128, 2}});
}

TEST(AttentionOccupancy, TheWidePipelinedForwardFitsTwoBlocksAtEveryHeadDim) {
  REQUIRE_SM90();
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_forward_blocks_per_sm(dh, t, AttentionForwardKernel::PipelinedWide); },
      {{32, 2}, {64, 2}, {128, 2}});
}

TEST(AttentionOccupancy, TheFusedBackwardFitsThreeBlocksIn16BitsAtHeadDimsUpTo64) {
  REQUIRE_SM90();
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::Fused); },
      {{32, 3}, {64, 3}, {128, 2}});
  EXPECT_EQ(attention_backward_blocks_per_sm(64, DType::F32, AttentionBackwardPath::Fused), 2);
}

TEST(AttentionOccupancy, TheOrderedFusedBackwardFitsAsTheFusedOneAndItsPipelinedFormTwoBlocks) {
  REQUIRE_SM90();
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::FusedOrdered); },
      {{32, 3}, {64, 3}, {128, 2}});
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) {
        return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::FusedOrderedPipelined);
      },
      {{32, 2}, {64, 2}, {128, 2}});
}

TEST(AttentionOccupancy, HighFitsFiveForwardAndThreeSplitPipelinedBlocksAtHeadDim32AndChangesNothingElse) {
  REQUIRE_SM90();
  const testing::ForcedSwitch high(set_attention_occupancy_for_testing, AttentionOccupancy::High);
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_forward_blocks_per_sm(dh, t, AttentionForwardKernel::Pipelined); },
      {{32, 5}, {64, 4}, {128, 2}});
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_forward_blocks_per_sm(dh, t, AttentionForwardKernel::PipelinedWide); },
      {{32, 2}, {64, 2}});
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::SplitPipelined); },
      {{32, 3}, {64, 2}, {128, 2}});
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::Fused); },
      {{32, 3}});
}

TEST(AttentionOccupancy, SplitPipelinedFitsTwoBlocksByDefault) {
  REQUIRE_SM90();
  expect_blocks_in_16_bits(
      [](int64_t dh, DType t) { return attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::SplitPipelined); },
      {{32, 2}, {64, 2}, {128, 2}});
}

TEST(AttentionOccupancy, AHeadDimPast128IsAnErrorNamingIt) {
  TANDEM_REQUIRE_GPU();
  try {
    attention_forward_blocks_per_sm(129, DType::BF16, AttentionForwardKernel::Pipelined);
    ADD_FAILURE() << "head_dim 129 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim must be 1..128, got 129"), std::string::npos) << e.what();
  }
}

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
