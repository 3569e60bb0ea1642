// cuDNN's fused attention (kernels/cuda/attention_cudnn.h) as a cross-check of
// Tandem's own CUDA attention kernels: on the same inputs both must agree with
// the CPU reference, forward and backward, in bf16 and f16, with and without a
// key-padding mask. The GPU cases skip without a GPU; what the back-end refuses
// is checked before any device work, so those tests run everywhere.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "core/stream.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::padding_mask;
using testing::random_tensor;

struct Case {
  DType t;
  int64_t batch, seq, heads, head_dim;
  std::vector<int64_t> lengths;  // empty: no mask; else real-token prefixes (what cuDNN's padding mask can express)
};

class CudnnAttention : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

// The same tolerances as the CUDA parity tests (tests/kernels/attention_parity_test.cc): the GPU rounds
// P and dS to the 16-bit type before the tensor-core products.
TEST_P(CudnnAttention, AgreesWithTandemsKernelsAndTheCpuReference) {
  const Case& c = GetParam();
  const AttentionShape s{c.batch, c.seq, c.heads, c.head_dim};
  const Shape qkv_shape{c.batch, c.seq, 3 * c.heads * c.head_dim}, out_shape{c.batch, c.seq, c.heads * c.head_dim};
  Tensor qkv_cpu = random_tensor(qkv_shape, 1, c.t).set_requires_grad(true);
  Tensor mask_cpu = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq);
  Tensor dout_cpu = random_tensor(out_shape, 2, c.t);
  Tensor out_ref = attention(qkv_cpu, mask_cpu, static_cast<int>(c.heads));
  out_ref.backward(dout_cpu);

  // Tandem's kernels on the GPU.
  Tensor qkv_gpu = qkv_cpu.detach().to(Device::cuda(0)).set_requires_grad(true);
  Tensor mask_gpu = c.lengths.empty() ? Tensor() : mask_cpu.to(Device::cuda(0));
  Tensor dout_gpu = dout_cpu.to(Device::cuda(0));
  Tensor out_ours = attention(qkv_gpu, mask_gpu, static_cast<int>(c.heads));
  out_ours.backward(dout_gpu);

  // cuDNN on the same device buffers.
  Tensor qkv = qkv_gpu.detach();
  Tensor out = Tensor::empty(out_shape, c.t, Device::cuda(0));
  Tensor stats = Tensor::empty({c.batch, c.heads, c.seq}, DType::F32, Device::cuda(0));
  Tensor dqkv = Tensor::empty(qkv_shape, c.t, Device::cuda(0));
  void* stream = cuda::current_stream(0).handle();
  const uint8_t* mask = c.lengths.empty() ? nullptr : mask_gpu.data<uint8_t>();
  attention_forward_cudnn(qkv.data_ptr(), mask, out.data_ptr(), stats.data<float>(), s, c.t, 0, stream);
  attention_backward_cudnn(qkv.data_ptr(), mask, out.data_ptr(), stats.data<float>(), dout_gpu.data_ptr(),
                           dqkv.data_ptr(), s, c.t, 0, stream);

  const double fa = c.t == DType::BF16 ? 2e-2 : 3e-3, ga = c.t == DType::BF16 ? 5e-2 : 8e-3;
  EXPECT_TRUE(all_close(out, out_ref, fa, fa)) << "cuDNN forward vs the CPU reference";
  EXPECT_TRUE(all_close(out, out_ours, fa, fa)) << "cuDNN forward vs Tandem's kernels";
  EXPECT_TRUE(all_close(dqkv, qkv_cpu.grad(), ga, ga)) << "cuDNN gradient vs the CPU reference";
  EXPECT_TRUE(all_close(dqkv, qkv_gpu.grad(), ga, ga)) << "cuDNN gradient vs Tandem's kernels";
}

const Case kCases[] = {
    {DType::BF16, 2, 128, 4, 64, {}},
    {DType::F16, 2, 128, 4, 64, {}},
    {DType::BF16, 3, 200, 2, 32, {200, 17, 1}},  // padding, a length-1 sequence
    {DType::F16, 2, 512, 2, 64, {512, 300}},     // the shape: head dim 64, sequence 512
    {DType::BF16, 1, 77, 1, 128, {50}},          // the largest head dim, a sequence not a multiple of 64
};

INSTANTIATE_TEST_SUITE_P(Cases, CudnnAttention, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.t)) + "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_Dh" + std::to_string(c.head_dim) + (c.lengths.empty() ? "" : "_padded");
});

TEST(CudnnAttentionLimits, RejectsF32BeforeAnyDeviceWork) {
  try {
    attention_forward_cudnn(nullptr, nullptr, nullptr, nullptr, {1, 8, 1, 64}, DType::F32, 0, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32"), std::string::npos) << e.what();
  }
}

TEST(CudnnAttentionLimits, RejectsAHeadDimThatIsNotAMultipleOf8) {
  try {
    attention_backward_cudnn(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, {1, 8, 1, 60}, DType::BF16, 0,
                             nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 60"), std::string::npos) << e.what();
  }
}

TEST(CudnnAttentionLimits, RejectsAMaskWithRealTokensAfterPadding) {
  TANDEM_REQUIRE_GPU();
  const int64_t S = 16;
  Tensor qkv = random_tensor({1, S, 3 * 64}, 3, DType::BF16, Device::cuda(0));
  std::vector<int64_t> m(S, 1);
  m[5] = 0;  // a hole: real tokens after padding
  Tensor mask = Tensor::from_vector(m, {1, S}, DType::U8, Device::cuda(0));
  Tensor out = Tensor::empty({1, S, 64}, DType::BF16, Device::cuda(0));
  Tensor stats = Tensor::empty({1, 1, S}, DType::F32, Device::cuda(0));
  try {
    attention_forward_cudnn(qkv.data_ptr(), mask.data<uint8_t>(), out.data_ptr(), stats.data<float>(), {1, S, 1, 64},
                            DType::BF16, 0, cuda::current_stream(0).handle());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("real token at 6 after padding at 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::kernels
