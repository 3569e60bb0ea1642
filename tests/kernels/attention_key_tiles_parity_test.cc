// Trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed) on a GPU: every
// forward kernel and backward path gives the same bits as visiting every key
// tile, in f32, bf16 and f16, on padded batches whose masks leave whole tiles
// padding (a row with no real key, rows ending on a tile boundary, dropout);
// and K and V of the skipped keys set to NaN change nothing when trimmed and
// poison the results otherwise, so the kernels really skip them (the ordered
// fused paths run key tile 0 of a row with no real key: that tile stays clean). Skipped
// without a GPU (failed under TANDEM_REQUIRE_GPU=1). The switch's parser is
// tested on the CPU; attention_key_tiles_emulated_test.cc runs the same device
// code under the warp emulator.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/stream.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using testing::any_nan;
using testing::padding_mask;
using testing::random_tensor;
using testing::rejects_naming_variable_and_value;
using testing::same_bits;
using Case = testing::AttentionCase;

TEST(AttentionKeyTilesSwitch, IsAllUnlessSetAndNamesTheVariableAndValueOnABadOne) {
  EXPECT_EQ(parse_attention_key_tiles(nullptr), AttentionKeyTiles::All);
  EXPECT_EQ(parse_attention_key_tiles(""), AttentionKeyTiles::All);
  EXPECT_EQ(parse_attention_key_tiles("all"), AttentionKeyTiles::All);
  EXPECT_EQ(parse_attention_key_tiles("trimmed"), AttentionKeyTiles::Trimmed);
  for (const char* bad : {"Trimmed", "none", "1"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_attention_key_tiles, "TANDEM_ATTENTION_KEY_TILES", bad));
}

struct Results {
  Tensor out, lse, dqkv;  // on the CPU
};

// The forward `kernel` and the backward `path` on GPU 0, visiting `tiles`, from qkv (on the GPU).
Results run(const Case& c, DType t, const Tensor& qkv, AttentionForwardKernel kernel, AttentionBackwardPath path,
            AttentionKeyTiles tiles) {
  const testing::ForcedSwitch guard(set_attention_key_tiles_for_testing, tiles);
  const AttentionShape s{c.batch, c.seq, c.heads, c.head_dim};
  const AttentionDropout d{static_cast<float>(c.dropout), 7, 3};
  const Device gpu = Device::cuda(0);
  const Tensor mask = padding_mask(c.lengths, c.seq, gpu);
  const Tensor dout = random_tensor({s.batch, s.seq, s.heads * s.head_dim}, 6, t, gpu);
  Tensor out = Tensor::full(dout.shape(), std::nan(""), t, gpu);
  Tensor lse = Tensor::full({s.batch, s.heads, s.seq}, std::nan(""), DType::F32, gpu);
  Tensor dqkv = Tensor::full(qkv.shape(), std::nan(""), t, gpu);
  void* stream = cuda::current_stream(0).handle();
  attention_forward_cuda(qkv.data_ptr(), mask.data<uint8_t>(), out.data_ptr(), lse.data<float>(), s, d, t, 0, stream,
                         kernel);
  attention_backward_cuda(qkv.data_ptr(), mask.data<uint8_t>(), out.data_ptr(), lse.data<float>(), dout.data_ptr(),
                          dqkv.data_ptr(), s, d, t, 0, stream, path);
  return {out.to(Device::cpu()), lse.to(Device::cpu()), dqkv.to(Device::cpu())};
}

// "pipelined / fused": a variant's name in a failure message.
std::string variant_name(AttentionForwardKernel kernel, AttentionBackwardPath path) {
  return std::string(attention_forward_kernel_name(kernel)) + " / " + attention_backward_path_name(path);
}

class AttentionTrimmedKeyTiles : public testing::GpuAttentionVariants {};

TEST_P(AttentionTrimmedKeyTiles, GiveTheSameBitsAsEveryTile) {
  const Tensor x = qkv();
  for (const auto& [kernel, path] : variants()) {
    const Results all = run(attention_case(), dtype(), x, kernel, path, AttentionKeyTiles::All);
    const Results trimmed = run(attention_case(), dtype(), x, kernel, path, AttentionKeyTiles::Trimmed);
    const std::string what = variant_name(kernel, path);
    EXPECT_TRUE(same_bits(trimmed.out, all.out)) << what;
    EXPECT_TRUE(same_bits(trimmed.lse, all.lse)) << what;
    EXPECT_TRUE(same_bits(trimmed.dqkv, all.dqkv)) << what;
  }
}

TEST_P(AttentionTrimmedKeyTiles, NeverReadTheSkippedKeys) {
  const Tensor clean = qkv();
  for (const auto& [kernel, path] : variants()) {
    const bool ordered = path == AttentionBackwardPath::FusedOrdered ||
                         path == AttentionBackwardPath::FusedOrderedPipelined;
    const Tensor poison = testing::with_padding_tiles_poisoned(attention_case(), clean, ordered);
    const Results expected = run(attention_case(), dtype(), clean, kernel, path, AttentionKeyTiles::Trimmed);
    const Results got = run(attention_case(), dtype(), poison, kernel, path, AttentionKeyTiles::Trimmed);
    const std::string what = variant_name(kernel, path);
    EXPECT_TRUE(same_bits(got.out, expected.out)) << what;
    EXPECT_TRUE(same_bits(got.dqkv, expected.dqkv)) << what;
    EXPECT_TRUE(any_nan(run(attention_case(), dtype(), poison, kernel, path, AttentionKeyTiles::All).out))
        << what << ": visiting every tile reads the NaN keys";
  }
}

const Case kCases[] = {
    {3, 200, 2, 64, {0, 65, 128}, 0.2},   // no real key, one key into a tile, a tile boundary; dropout
    {2, 512, 4, 32, {512, 100}, 0.0},     // seven padding tiles in row 1
    {2, 257, 2, 96, {64, 200}, 0.1},      // DP = 128; real keys ending on a tile boundary
    {4, 130, 3, 45, {1, 130, 64, 70}, 0.0},  // odd Dh (scalar loads), assorted lengths
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionTrimmedKeyTiles,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
