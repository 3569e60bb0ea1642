// How many blocks of the opt-in attention kernels fit one SM of an sm_90 GPU: the
// promises of their __launch_bounds__ (kPipelinedBlocksPerSm in
// kernels/cuda/attention_forward_pipelined.cuh, kFusedBlocksPerSm in
// kernels/cuda/attention_backward_fused.cuh). The first GPU run found every
// attention kernel at two blocks (8 warps) per SM; these kernels are now compiled
// for more, and a register count or a shared-memory carveout that undoes that
// fails here instead of showing up only as a slower benchmark. Skipped without a
// GPU (TANDEM_REQUIRE_GPU=1 makes that a failure) and on other architectures,
// whose shared memory per SM differs.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
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

TEST(AttentionOccupancy, ThePipelinedForwardFitsFourBlocksAtHeadDimsUpTo64AndTwoAt128) {
  REQUIRE_SM90();
  for (DType t : {DType::BF16, DType::F16}) {
    for (int64_t dh : {32, 64})
      EXPECT_EQ(attention_forward_blocks_per_sm(dh, t, AttentionForwardKernel::Pipelined), 4)
          << dtype_name(t) << " head_dim " << dh;
    EXPECT_EQ(attention_forward_blocks_per_sm(128, t, AttentionForwardKernel::Pipelined), 2) << dtype_name(t);
  }
}

TEST(AttentionOccupancy, TheFusedBackwardFitsThreeBlocksIn16BitsAtHeadDimsUpTo64) {
  REQUIRE_SM90();
  for (DType t : {DType::BF16, DType::F16}) {
    for (int64_t dh : {32, 64})
      EXPECT_EQ(attention_backward_blocks_per_sm(dh, t, AttentionBackwardPath::Fused), 3)
          << dtype_name(t) << " head_dim " << dh;
    EXPECT_EQ(attention_backward_blocks_per_sm(128, t, AttentionBackwardPath::Fused), 2) << dtype_name(t);
  }
  EXPECT_EQ(attention_backward_blocks_per_sm(64, DType::F32, AttentionBackwardPath::Fused), 2);
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
