// Saved dropout keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved: Params::keep_out in the
// forward, keep_in in the backward) in every attention kernel, run on the CPU under
// tests/testing/warp_emulator.h with attention.cu's launches:
//   - every forward kernel writes byte b of the buffer as Philox block b's 8 keep bits
//     (kernels/attention_params.h's definition), every byte of every square, and gives the
//     same out and lse as without saving;
//   - every backward path reading them gives the bits of the same path recomputing them,
//     computes no Philox block, and really uses the bytes (inverted bytes change dQKV);
//   - with trimmed key tiles and padded rows (one with no real key), a backward reads
//     only bytes the forward's kernels wrote, but for the one case attention.cu zeroes the
//     buffer for: the ordered fused paths read key tile 0 of a row with no real key, which
//     the forward skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "tests/kernels/attention_testing.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::make_problem;
using testing::same_bits;
using Case = testing::AttentionCase;
using Problem = testing::AttentionProblem;

const Case kCases[] = {
    {1, 128, 2, 32, {}, 0.2},             // whole tiles and squares; DP = 32
    {2, 100, 1, 64, {100, 37}, 0.1},      // a partial square and tile; padding; DP = 64
    {1, 70, 1, 80, {}, 0.3},              // DP = 128: the dK/dV pass's 32-query tiles
    {3, 130, 1, 64, {0, 65, 128}, 0.2},   // a row with no real key, one key into a tile, a tile boundary
};

class EmulatedSavedKeepBits : public EmulatedAttentionVariants {};

struct Forward {
  Tensor out, lse;
  std::vector<uint8_t> keep;  // empty: not saved
};

// The forward `kernel` on p visiting `tiles`; with `poison`, saving the keep bits into a buffer whose
// bytes start as *poison (trimmed, zeroed first as attention.cu does unless not `zero_keep`).
Forward forward_of(const Problem& p, AttentionForwardKernel kernel, const uint8_t* poison,
                   AttentionKeyTiles tiles = AttentionKeyTiles::All, bool zero_keep = true) {
  Forward f{Tensor::empty(p.out.shape(), p.t), Tensor::empty(p.lse.shape(), DType::F32), {}};
  if (poison != nullptr) f.keep.assign(static_cast<size_t>(attention_keep_bytes(p.s)), *poison);
  TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention forward", [&] {
    emulated_forward<scalar_t>(p.qkv, p.mask, f.out, f.lse, p.s, p.d, kernel, warp_emulator::Schedule::RoundRobin,
                               tiles, f.keep.empty() ? nullptr : f.keep.data(), zero_keep);
  });
  return f;
}

std::string name_of(Path path) { return "path " + std::to_string(static_cast<int>(path)); }

TEST_P(EmulatedSavedKeepBits, ForwardSavesEveryPhiloxBlocksKeepBits) {
  const Problem p = make_problem(attention_case(), dtype());
  const uint32_t threshold = dropout_threshold(p.d.p);
  for (AttentionForwardKernel kernel : forward_kernels()) {
    // Named by number: the switches' names are in the CUDA build's library, and this suite runs without it.
    const std::string what = "forward kernel " + std::to_string(static_cast<int>(kernel));
    const Forward plain = forward_of(p, kernel, nullptr);
    for (uint8_t poison : {uint8_t{0x00}, uint8_t{0xff}}) {  // a byte left unwritten differs from one of them
      const Forward saved = forward_of(p, kernel, &poison);
      EXPECT_TRUE(same_bits(saved.out, plain.out)) << what;
      EXPECT_TRUE(same_bits(saved.lse, plain.lse)) << what;
      int64_t wrong = 0, dropped = 0;
      for (size_t b = 0; b < saved.keep.size(); ++b) {
        const uint32_t expected = dropout_keep8(p.d.seed, p.d.subsequence(), b, threshold);
        wrong += saved.keep[b] != expected;
        dropped += 8 - __builtin_popcount(expected);
      }
      EXPECT_EQ(wrong, 0) << what << ", poison " << int{poison} << ": bytes unlike the mask definition's";
      EXPECT_GT(dropped, 0) << what;
    }
  }
}

TEST_P(EmulatedSavedKeepBits, BackwardReadingThemGivesTheRecomputedBitsWithoutPhilox) {
  const Problem p = make_problem(attention_case(), dtype());
  const uint8_t poison = 0x5a;
  const Forward f = forward_of(p, AttentionForwardKernel::Tiled, &poison);
  for (Path path : backward_paths()) {
    const Tensor recomputed = emulated_backward(p, path);
    philox_blocks_computed = 0;
    const Tensor saved = emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin,
                                           AttentionKeyTiles::All, f.keep.data());
    EXPECT_EQ(philox_blocks_computed, 0) << name_of(path);
    EXPECT_TRUE(same_bits(saved, recomputed)) << name_of(path);
  }
}

TEST_P(EmulatedSavedKeepBits, BackwardUsesTheSavedBytes) {
  const Problem p = make_problem(attention_case(), dtype());
  const uint8_t poison = 0;
  Forward f = forward_of(p, AttentionForwardKernel::Tiled, &poison);
  for (uint8_t& byte : f.keep) byte = static_cast<uint8_t>(~byte);  // every decision the other way
  for (Path path : backward_paths()) {
    const Tensor inverted = emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin,
                                              AttentionKeyTiles::All, f.keep.data());
    EXPECT_FALSE(same_bits(inverted, emulated_backward(p, path))) << name_of(path);
  }
}

TEST_P(EmulatedSavedKeepBits, TrimmedBackwardReadsOnlyBytesTheForwardWroteButKeyTileZeroOfAnEmptyRow) {
  const Case& c = attention_case();
  const Problem p = make_problem(c, dtype());
  // Which bytes the trimmed forward's kernels write (alike under two poisons, without attention.cu's
  // zeroing), and the buffer a backward gets (zeroed first, then written).
  const uint8_t zero = 0x00, ones = 0xff;
  const Forward a = forward_of(p, AttentionForwardKernel::Tiled, &zero, AttentionKeyTiles::Trimmed, false);
  const Forward b = forward_of(p, AttentionForwardKernel::Tiled, &ones, AttentionKeyTiles::Trimmed, false);
  const Forward defined = forward_of(p, AttentionForwardKernel::Tiled, &ones, AttentionKeyTiles::Trimmed);
  // Block `block` lies in key tile 0 (key squares 0-3) of a batch row with no real key.
  const int64_t n = (c.seq + 15) / 16;
  const auto in_empty_row_first_tile = [&](uint64_t block) {
    const int64_t square = static_cast<int64_t>(block / 32), row = square / (n * n) / c.heads;
    return square % n < 4 && !c.lengths.empty() && c.lengths[static_cast<size_t>(row)] == 0;
  };
  const bool has_empty_row = std::find(c.lengths.begin(), c.lengths.end(), 0) != c.lengths.end();
  for (Path path : backward_paths()) {
    const bool ordered = path == Path::FusedOrdered || path == Path::FusedOrderedPipelined;
    std::vector<uint64_t> reads;
    keep_bytes_read = &reads;
    const Tensor saved = emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin,
                                           AttentionKeyTiles::Trimmed, defined.keep.data());
    keep_bytes_read = nullptr;
    EXPECT_FALSE(reads.empty()) << name_of(path);
    int64_t unwritten = 0, zeroed_for = 0;
    for (uint64_t r : reads) {
      if (r < a.keep.size() && a.keep[r] == b.keep[r]) continue;  // written by the forward
      if (ordered && in_empty_row_first_tile(r)) ++zeroed_for;
      else ++unwritten;
    }
    EXPECT_EQ(unwritten, 0) << name_of(path) << ": reads of bytes the trimmed forward's kernels left alone";
    EXPECT_EQ(zeroed_for > 0, ordered && has_empty_row) << name_of(path) << ": what attention.cu's zeroing is for";
    EXPECT_TRUE(same_bits(saved, emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin,
                                                   AttentionKeyTiles::Trimmed)))
        << name_of(path);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedSavedKeepBits,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),  // f16: bf16's code
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

}  // namespace
}  // namespace tandem::kernels
