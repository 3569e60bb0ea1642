// The pipelined CUDA attention forward (kernels/cuda/attention_forward_pipelined.cuh),
// with one and with two row tiles per warp (pipelined, pipelined_wide), on a GPU,
// and the switch that selects it (TANDEM_ATTENTION_FORWARD).
//
// On a GPU, for f16 and bf16 at the sizes of attention_parity_test.cc (S 1 to
// 512, odd head dims, every padded width, padding with an all-padding row,
// dropout): attention() with the switch on pipelined against the CPU op,
// output and gradient (the backward reads the pipelined forward's lse); and
// the two forward kernels called directly on the same buffers, output and
// lse. Under the warp emulator the two kernels agree bit for bit; on a GPU
// the compiler may contract the shared softmax code differently in the two
// kernels, so they are held to one rounding of the 16-bit type (output) and
// f32 rounding (lse). Skipped where no GPU is present (TANDEM_REQUIRE_GPU=1
// makes that a failure). The switch's parsing runs everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/check.h"
#include "kernels/attention.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

#if TANDEM_WITH_CUDA
#include "core/stream.h"
#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_switches.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using testing::all_close;
using testing::attention_output_tolerance;
using testing::padding_mask;
using testing::random_tensor;
using testing::rejects_naming_variable_and_value;
using testing::same_lse;
using Case = testing::AttentionCase;

TEST(AttentionForwardSwitch, IsPipelinedUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_attention_forward(nullptr), AttentionForwardKernel::Pipelined);
  EXPECT_EQ(parse_attention_forward(""), AttentionForwardKernel::Pipelined);
  EXPECT_EQ(parse_attention_forward("tiled"), AttentionForwardKernel::Tiled);
  EXPECT_EQ(parse_attention_forward("pipelined"), AttentionForwardKernel::Pipelined);
  EXPECT_EQ(parse_attention_forward("pipelined_wide"), AttentionForwardKernel::PipelinedWide);
  for (const char* bad : {"Pipelined", "1", "pipelined ", "wide"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_attention_forward, "TANDEM_ATTENTION_FORWARD", bad));
}

TEST(AttentionForwardSwitch, ATestOverrideWinsUntilItIsCleared) {
  const AttentionForwardKernel from_environment = parse_attention_forward(std::getenv("TANDEM_ATTENTION_FORWARD"));
  EXPECT_EQ(attention_forward_kernel(), from_environment);
  for (AttentionForwardKernel k :
       {AttentionForwardKernel::Pipelined, AttentionForwardKernel::PipelinedWide, AttentionForwardKernel::Tiled}) {
    set_attention_forward_for_testing(k);
    EXPECT_EQ(attention_forward_kernel(), k);
  }
  set_attention_forward_for_testing(std::nullopt);
  EXPECT_EQ(attention_forward_kernel(), from_environment);
}

// One rounding of the 16-bit type, relative to values of size O(1).
double one_rounding(DType t) { return t == DType::BF16 ? 0x1p-8 : 0x1p-11; }

class PipelinedForwardCuda : public ::testing::TestWithParam<std::tuple<DType, Case, AttentionForwardKernel>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
  void TearDown() override { set_attention_forward_for_testing(std::nullopt); }
};

TEST_P(PipelinedForwardCuda, AttentionWithTheSwitchOnMatchesTheCpuReference) {
  const auto& [t, c, kernel] = GetParam();
  set_attention_forward_for_testing(kernel);
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(c, t);
  const testing::Tolerance fo = attention_output_tolerance(t), go = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(r.out_gpu, r.out_cpu, fo.atol, fo.rtol)) << "forward";
  EXPECT_TRUE(all_close(r.grad_gpu, r.grad_cpu, go.atol, go.rtol)) << "gradient";
}

TEST_P(PipelinedForwardCuda, MatchesTheTiledKernelToOneRounding) {
  const auto& [t, c, kernel] = GetParam();
  const AttentionShape s{c.batch, c.seq, c.heads, c.head_dim};
  const AttentionDropout d{static_cast<float>(c.dropout), 31, 4};
  const Device gpu = Device::cuda(0);
  Tensor qkv = random_tensor({s.batch, s.seq, 3 * s.heads * s.head_dim}, 1, t, gpu);
  Tensor mask = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq, gpu);
  const uint8_t* m = testing::mask_ptr(mask);
  void* stream = cuda::current_stream(0).handle();
  Tensor out[2], lse[2];
  for (int k = 0; k < 2; ++k) {
    out[k] = Tensor::full({s.batch, s.seq, s.heads * s.head_dim}, std::nan(""), t, gpu);
    lse[k] = Tensor::full({s.batch, s.heads, s.seq}, std::nan(""), DType::F32, gpu);
    attention_forward_cuda(qkv.data_ptr(), m, out[k].data_ptr(), lse[k].data<float>(), s, d, t, 0, stream,
                           k == 0 ? AttentionForwardKernel::Tiled : kernel);
  }
  EXPECT_TRUE(all_close(out[1].to(Device::cpu()), out[0].to(Device::cpu()), one_rounding(t), one_rounding(t)));
  EXPECT_TRUE(same_lse(lse[1].to(Device::cpu()), lse[0].to(Device::cpu())));
}

const Case kCases[] = {
    {1, 1, 1, 7, {}, 0.0},                     // one token, tiny head: plain loads
    {1, 1, 2, 16, {}, 0.3},                    // one token with dropout: 16-byte copies
    {2, 7, 3, 20, {7, 3}, 0.0},                // batch > 1, padding
    {3, 7, 2, 33, {7, 0, 5}, 0.2},             // an all-padding row, dropout, Dh padded to 64
    {1, 129, 2, 64, {100}, 0.0},               // one key past a whole tile
    {2, 129, 4, 40, {}, 0.1},                  // zero-filled columns 40-63, dropout
    {1, 512, 2, 64, {512}, 0.0},               // the longest sequence: eight tiles through two buffers
    {2, 512, 2, 96, {512, 300}, 0.1},          // Dh padded to 128, padding, dropout
    {2, 512, 1, 128, {}, 0.0},                 // the largest head dim
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.0},  // many heads, assorted lengths
};

INSTANTIATE_TEST_SUITE_P(Cases, PipelinedForwardCuda,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases),
                                            ::testing::Values(AttentionForwardKernel::Pipelined,
                                                              AttentionForwardKernel::PipelinedWide)),
                         testing::pipelined_dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
