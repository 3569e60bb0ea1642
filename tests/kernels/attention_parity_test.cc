// The fused CUDA attention kernels against the CPU reference, forward and
// backward, in f32, bf16 and f16, at odd sizes: S in {1, 7, 129, 512}, head
// dims that are not multiples of 32 (each padded tile width: 32, 64, 128),
// batch 1 and > 1, with and without padding (including an all-padding row),
// with and without dropout. Skipped where no GPU is present.
//
// Tolerances: the CPU reference computes in f32 from the same 16-bit inputs
// and rounds once; the GPU rounds the probabilities P and dS to the input
// type before they enter the tensor-core products (as FlashAttention does).
// For outputs of size O(1) that adds about one ulp of the 16-bit type: bf16
// 2^-8, f16 2^-11 relative. Gradients sum up to S such terms. f32 differs only
// by summation order. Dropout masks are identical on both sides, so with
// dropout the results still agree to rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "kernels/attention.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::padding_mask;
using testing::random_tensor;
using Case = testing::AttentionCase;

class AttentionCudaParity : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_P(AttentionCudaParity, ForwardAndBackwardMatchTheCpuReference) {
  const auto& [t, c] = GetParam();
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(c, t);
  const testing::Tolerance fo = testing::attention_output_tolerance(t), go = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(r.out_gpu, r.out_cpu, fo.atol, fo.rtol)) << "forward";
  EXPECT_TRUE(all_close(r.grad_gpu, r.grad_cpu, go.atol, go.rtol)) << "gradient";
}

const Case kCases[] = {
    {1, 1, 1, 7, {}, 0.0},                   // one token, tiny head
    {1, 1, 2, 13, {}, 0.3},                  // one token with dropout
    {2, 7, 3, 20, {7, 3}, 0.0},              // batch > 1, padding
    {3, 7, 2, 33, {7, 0, 5}, 0.2},           // an all-padding row, dropout, Dh padded to 64
    {1, 129, 2, 64, {100}, 0.0},             // one key past a whole tile
    {2, 129, 4, 45, {}, 0.1},                // odd Dh, dropout
    {1, 512, 2, 64, {512}, 0.0},             // the longest sequence, mask all real
    {2, 512, 2, 96, {512, 300}, 0.1},        // Dh padded to 128, padding, dropout
    {2, 512, 1, 128, {}, 0.0},               // the largest head dim
    {4, 257, 8, 32, {257, 256, 1, 130}, 0.0},  // many heads, assorted lengths
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCudaParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

TEST(AttentionCuda, AllPaddingRowIsZeroWithZeroGradientsNotNan) {
  TANDEM_REQUIRE_GPU();
  const int64_t S = 70, H = 2, Dh = 24;
  Tensor qkv = random_tensor({2, S, 3 * H * Dh}, 3, DType::BF16, Device::cuda(0)).set_requires_grad(true);
  Tensor out = attention(qkv, padding_mask({40, 0}, S, Device::cuda(0)), H);
  out.backward(random_tensor(out.shape(), 4, DType::BF16, Device::cuda(0)));
  const std::vector<double> o = out.to_double_vector(), g = qkv.grad().to_double_vector();
  for (double v : o) ASSERT_TRUE(std::isfinite(v));
  for (double v : g) ASSERT_TRUE(std::isfinite(v));
  for (int64_t k = S * H * Dh; k < 2 * S * H * Dh; ++k) EXPECT_EQ(o[k], 0.0) << k;
  for (int64_t k = S * 3 * H * Dh; k < 2 * S * 3 * H * Dh; ++k) EXPECT_EQ(g[k], 0.0) << k;
}

TEST(AttentionCuda, BackwardIsBitReproducible) {
  TANDEM_REQUIRE_GPU();
  Tensor qkv = random_tensor({2, 300, 3 * 4 * 64}, 5, DType::BF16, Device::cuda(0));
  Tensor dout = random_tensor({2, 300, 4 * 64}, 6, DType::BF16, Device::cuda(0));
  Tensor mask = padding_mask({300, 211}, 300, Device::cuda(0));
  std::vector<double> first;
  for (int run = 0; run < 3; ++run) {
    Tensor x = qkv.detach().clone().set_requires_grad(true);
    attention(x, mask, 4, 0.1, 8, 9).backward(dout);
    std::vector<double> g = x.grad().to_double_vector();
    if (run == 0) first = g;
    else EXPECT_TRUE(g == first) << "run " << run;
  }
}

TEST(AttentionCuda, RejectsHeadDimsBeyondTheFusedKernels) {
  TANDEM_REQUIRE_GPU();
  Tensor qkv = Tensor::zeros({1, 4, 3 * 129}, DType::F32, Device::cuda(0));
  EXPECT_THROW(attention(qkv, Tensor(), 1), Error);
}

}  // namespace
}  // namespace tandem::kernels
