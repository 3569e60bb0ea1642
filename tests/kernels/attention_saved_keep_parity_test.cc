// Saved dropout keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved) and their switch:
//   - the parser: unset, empty or recompute is Recompute, saved is Saved, and a bad
//     value's error names the variable and the value;
//   - on the CPU the switch changes nothing (the CPU reference always recomputes):
//     the op gives the same output and gradient bits;
//   - on a GPU: every forward kernel writes byte b of the buffer as Philox block b's
//     keep bits (kernels/attention_params.h), and every backward path reading them
//     gives the bits of the same path recomputing them, every key tile or trimmed,
//     f32/bf16/f16, with padding (a row with no real key); through the op with the
//     switch set, against the CPU reference. Skipped without a GPU (failed under
//     TANDEM_REQUIRE_GPU=1). attention_saved_keep_emulated_test.cc runs the same
//     device code under the warp emulator.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/stream.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using testing::random_tensor;
using testing::same_bits;
using Case = testing::AttentionCase;

TEST(AttentionDropoutKeepSwitch, IsRecomputeUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_dropout_keep(nullptr), AttentionDropoutKeep::Recompute);
  EXPECT_EQ(parse_attention_dropout_keep(""), AttentionDropoutKeep::Recompute);
  EXPECT_EQ(parse_attention_dropout_keep("recompute"), AttentionDropoutKeep::Recompute);
  EXPECT_EQ(parse_attention_dropout_keep("saved"), AttentionDropoutKeep::Saved);
  for (const char* bad : {"Saved", "stored", "1"})
    EXPECT_TRUE(testing::rejects_naming_variable_and_value(parse_attention_dropout_keep,
                                                           "TANDEM_ATTENTION_DROPOUT_KEEP", bad));
}

// The op's output and qkv gradient on the CPU with the switch at `keep`.
std::pair<Tensor, Tensor> cpu_attention(const Case& c, AttentionDropoutKeep keep) {
  const testing::ForcedSwitch guard(set_attention_dropout_keep_for_testing, keep);
  Tensor qkv = random_tensor({c.batch, c.seq, 3 * c.heads * c.head_dim}, 1, DType::F32).set_requires_grad(true);
  const Tensor mask = testing::padding_mask(c.lengths, c.seq);
  Tensor out = attention(qkv, mask, static_cast<int>(c.heads), c.dropout, 31, 4);
  out.backward(random_tensor(out.shape(), 2, DType::F32));
  return {out, qkv.grad()};
}

TEST(AttentionDropoutKeepSwitch, ChangesNothingOnTheCpu) {
  const Case c{2, 40, 2, 16, {40, 23}, 0.3};
  const auto [out_saved, grad_saved] = cpu_attention(c, AttentionDropoutKeep::Saved);
  const auto [out, grad] = cpu_attention(c, AttentionDropoutKeep::Recompute);
  EXPECT_TRUE(same_bits(out_saved, out));
  EXPECT_TRUE(same_bits(grad_saved, grad));
}

struct Results {
  Tensor out, lse, dqkv;     // on the CPU
  std::vector<uint8_t> keep;  // the saved bytes; empty when recomputing
};

// Forward `kernel` and backward `path` on GPU 0 visiting `tiles`, saving the keep bits or not.
Results run(const Case& c, DType t, const Tensor& qkv, AttentionForwardKernel kernel, AttentionBackwardPath path,
            AttentionKeyTiles tiles, bool saved) {
  set_attention_key_tiles_for_testing(tiles);
  const AttentionShape s{c.batch, c.seq, c.heads, c.head_dim};
  const AttentionDropout d{static_cast<float>(c.dropout), 7, 3};
  const Device gpu = Device::cuda(0);
  const Tensor mask = c.lengths.empty() ? Tensor() : testing::padding_mask(c.lengths, c.seq, gpu);
  const Tensor dout = random_tensor({s.batch, s.seq, s.heads * s.head_dim}, 6, t, gpu);
  Tensor out = Tensor::full(dout.shape(), std::nan(""), t, gpu);
  Tensor lse = Tensor::full({s.batch, s.heads, s.seq}, std::nan(""), DType::F32, gpu);
  Tensor dqkv = Tensor::full(qkv.shape(), std::nan(""), t, gpu);
  Tensor keep = saved ? Tensor::full({attention_keep_bytes(s)}, 0x5a, DType::U8, gpu) : Tensor();
  uint8_t* keep_bytes = saved ? keep.data<uint8_t>() : nullptr;
  void* stream = cuda::current_stream(0).handle();
  attention_forward_cuda(qkv.data_ptr(), testing::mask_ptr(mask), out.data_ptr(), lse.data<float>(), s, d, t, 0, stream,
                         kernel, keep_bytes);
  attention_backward_cuda(qkv.data_ptr(), testing::mask_ptr(mask), out.data_ptr(), lse.data<float>(), dout.data_ptr(),
                          dqkv.data_ptr(), s, d, t, 0, stream, path, keep_bytes);
  set_attention_key_tiles_for_testing(std::nullopt);
  Results r{out.to(Device::cpu()), lse.to(Device::cpu()), dqkv.to(Device::cpu()), {}};
  if (saved) {
    const Tensor bytes = keep.to(Device::cpu());
    r.keep.assign(bytes.data<uint8_t>(), bytes.data<uint8_t>() + bytes.numel());
  }
  return r;
}

class AttentionSavedKeepBits : public testing::GpuAttentionVariants {};

std::string variant_name(AttentionForwardKernel kernel, AttentionBackwardPath path, AttentionKeyTiles tiles) {
  return std::string(attention_forward_kernel_name(kernel)) + " / " + attention_backward_path_name(path) + " / " +
         attention_key_tiles_name(tiles);
}

TEST_P(AttentionSavedKeepBits, ForwardSavesEachPhiloxBlocksKeepBits) {
  const Case& c = attention_case();
  const AttentionDropout d{static_cast<float>(c.dropout), 7, 3};
  const uint32_t threshold = dropout_threshold(d.p);
  const Tensor x = qkv();
  for (const auto& [kernel, path] : variants()) {
    const Results r = run(c, dtype(), x, kernel, path, AttentionKeyTiles::All, true);
    int64_t wrong = 0;
    for (size_t b = 0; b < r.keep.size(); ++b)
      wrong += r.keep[b] != dropout_keep8(d.seed, d.subsequence(), b, threshold);
    EXPECT_EQ(wrong, 0) << variant_name(kernel, path, AttentionKeyTiles::All) << ": of " << r.keep.size() << " bytes";
  }
}

TEST_P(AttentionSavedKeepBits, BackwardReadingThemGivesTheRecomputedBits) {
  const Tensor x = qkv();
  for (AttentionKeyTiles tiles : {AttentionKeyTiles::All, AttentionKeyTiles::Trimmed})
    for (const auto& [kernel, path] : variants()) {
      const Results recomputed = run(attention_case(), dtype(), x, kernel, path, tiles, false);
      const Results saved = run(attention_case(), dtype(), x, kernel, path, tiles, true);
      const std::string what = variant_name(kernel, path, tiles);
      EXPECT_TRUE(same_bits(saved.out, recomputed.out)) << what;
      EXPECT_TRUE(same_bits(saved.lse, recomputed.lse)) << what;
      EXPECT_TRUE(same_bits(saved.dqkv, recomputed.dqkv)) << what;
    }
}

TEST_P(AttentionSavedKeepBits, ThroughTheOpMatchesTheCpuReference) {
  const testing::ForcedSwitch saved(set_attention_dropout_keep_for_testing, AttentionDropoutKeep::Saved);
  const testing::GpuAndCpuResults r = testing::attention_on_gpu_and_cpu(attention_case(), dtype());
  const testing::Tolerance tol = testing::attention_gradient_tolerance(dtype());
  EXPECT_TRUE(testing::all_close(r.grad_gpu, r.grad_cpu, tol.atol, tol.rtol));
}

const Case kCases[] = {
    {3, 200, 2, 64, {0, 65, 128}, 0.2},     // a row with no real key, one key into a tile, a tile boundary
    {2, 256, 8, 32, {}, 0.1},               // the configs' head dim
    {2, 257, 2, 96, {64, 200}, 0.1},        // DP = 128; a partial square
    {4, 130, 3, 45, {1, 130, 64, 70}, 0.3}, // odd Dh (scalar loads), assorted lengths
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionSavedKeepBits,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
