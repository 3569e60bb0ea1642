// Trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed): key_end_kernel, and
// every attention kernel skipping the 64-key tiles past each batch row's last
// real key, run on the CPU under tests/testing/warp_emulator.h with
// attention.cu's launches:
//   - key_end_kernel against a scan of the mask on the CPU (masks with holes,
//     a row with no real key, a real last key, more rows than a block's warps);
//   - the same bits as visiting every tile, for the forward (tiled, pipelined,
//     pipelined wide) and the backward (split, split pipelined, fused, fused
//     ordered, fused ordered pipelined), in f32, bf16 and f16, where whole
//     tiles are padding: a row with none real, a row whose real keys end on a
//     tile boundary, several padding tiles, dropout;
//   - that the skipped tiles are not read: K and V of their keys set to NaN
//     change nothing when trimmed, and poison the results when every tile is
//     visited (so the comparison can fail). The ordered fused paths run key
//     tile 0 of a row with no real key (their chain's end writes its dQ), so
//     for them that tile stays clean.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::any_nan;
using testing::same_bits;
using Case = testing::AttentionCase;
using Problem = testing::AttentionProblem;

std::vector<int> emulated_key_end_of(const std::vector<std::vector<uint8_t>>& rows) {
  const int64_t seq = static_cast<int64_t>(rows[0].size());
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const Tensor mask = Tensor::from_vector(flat, {static_cast<int64_t>(rows.size()), seq}, DType::U8);
  Params params = make_params({static_cast<int64_t>(rows.size()), seq, 1, 8}, {0.0f, 0, 0});
  return emulated_key_ends(mask, {static_cast<int64_t>(rows.size()), seq, 1, 8}, AttentionKeyTiles::Trimmed, params);
}

TEST(EmulatedKeyEnd, IsOnePastEachRowsLastRealKey) {
  std::vector<std::vector<uint8_t>> rows(6, std::vector<uint8_t>(70, 0));
  rows[0][0] = 1;                                  // only the first key
  rows[1][3] = rows[1][40] = rows[1][66] = 1;      // holes; the last real key in the third warp-stride
  rows[2] = std::vector<uint8_t>(70, 1);           // all real: S
  /* rows[3]: none real */
  for (int j = 0; j < 33; ++j) rows[4][j] = 1;     // right padding, one past a lane stride
  rows[5][69] = 1;                                 // only the last key
  EXPECT_EQ(emulated_key_end_of(rows), (std::vector<int>{1, 67, 70, 0, 33, 70}));  // rows past one block's 4 warps
}

TEST(EmulatedKeyEnd, HandlesASequenceOfOne) {
  EXPECT_EQ(emulated_key_end_of({{1}, {0}}), (std::vector<int>{1, 0}));
}

// Cases whose masks leave whole 64-key tiles padding (one head: the heads share every code path).
const Case kCases[] = {
    {2, 129, 1, 24, {129, 40}, 0.0},     // row 1: tiles 1 and 2 padding; DP = 32
    {3, 130, 1, 64, {0, 65, 128}, 0.2},  // no real key, one key into a tile, a tile boundary; dropout; DP = 64
    {1, 129, 1, 80, {64}, 0.1},          // real keys ending on a tile boundary; DP = 128
    {2, 70, 1, 33, {1, 70}, 0.0},        // one real key; scalar loads (Dh 33)
};

class EmulatedTrimmedKeyTiles : public EmulatedAttentionVariants {};

struct Forward {
  Tensor out, lse;
};

Forward emulated_forward_of(const Problem& p, AttentionForwardKernel kernel, AttentionKeyTiles tiles) {
  Forward f{Tensor::empty(p.out.shape(), p.t), Tensor::empty(p.lse.shape(), DType::F32)};
  TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention forward", [&] {
    emulated_forward<scalar_t>(p.qkv, p.mask, f.out, f.lse, p.s, p.d, kernel, warp_emulator::Schedule::RoundRobin,
                               tiles);
  });
  return f;
}

Tensor emulated_backward_of(const Problem& p, Path path, AttentionKeyTiles tiles) {
  return emulated_backward(p, path, kFusedScratchLimit, warp_emulator::Schedule::RoundRobin, tiles);
}

// p (of case c) with its padding tiles' K and V poisoned (testing::with_padding_tiles_poisoned).
Problem poisoned(const Problem& p, const Case& c, bool keep_first_tile = false) {
  Problem q = p;
  q.qkv = testing::with_padding_tiles_poisoned(c, p.qkv, keep_first_tile);
  return q;
}

TEST_P(EmulatedTrimmedKeyTiles, ForwardGivesTheSameBitsAsEveryTile) {
  const Problem p = make_problem(attention_case(), dtype());
  for (AttentionForwardKernel kernel : forward_kernels()) {
    const Forward all = emulated_forward_of(p, kernel, AttentionKeyTiles::All);
    const Forward trimmed = emulated_forward_of(p, kernel, AttentionKeyTiles::Trimmed);
    EXPECT_TRUE(same_bits(trimmed.out, all.out)) << "forward kernel " << static_cast<int>(kernel);
    EXPECT_TRUE(same_bits(trimmed.lse, all.lse)) << "forward kernel " << static_cast<int>(kernel);
  }
}

TEST_P(EmulatedTrimmedKeyTiles, BackwardGivesTheSameBitsAsEveryTile) {
  const Problem p = make_problem(attention_case(), dtype());
  for (Path path : backward_paths())
    EXPECT_TRUE(same_bits(emulated_backward_of(p, path, AttentionKeyTiles::Trimmed),
                          emulated_backward_of(p, path, AttentionKeyTiles::All)))
        << "path " << static_cast<int>(path);
}

// The same checks' inputs with the skipped keys' K and V poisoned (bf16 and f32: f16 runs bf16's code).
class EmulatedTrimmedKeyTilesPoisoned : public EmulatedTrimmedKeyTiles {};

TEST_P(EmulatedTrimmedKeyTilesPoisoned, ForwardNeverReadsTheSkippedKeys) {
  const Problem clean = make_problem(attention_case(), dtype());
  const Problem poison = poisoned(clean, attention_case());
  for (AttentionForwardKernel kernel : forward_kernels()) {
    const Forward expected = emulated_forward_of(clean, kernel, AttentionKeyTiles::Trimmed);
    const Forward trimmed = emulated_forward_of(poison, kernel, AttentionKeyTiles::Trimmed);
    EXPECT_TRUE(same_bits(trimmed.out, expected.out)) << "forward kernel " << static_cast<int>(kernel);
    EXPECT_TRUE(same_bits(trimmed.lse, expected.lse)) << "forward kernel " << static_cast<int>(kernel);
    EXPECT_TRUE(any_nan(emulated_forward_of(poison, kernel, AttentionKeyTiles::All).out))
        << "forward kernel " << static_cast<int>(kernel) << ": visiting every tile reads the NaN keys";
  }
}

TEST_P(EmulatedTrimmedKeyTilesPoisoned, BackwardNeverReadsTheSkippedKeys) {
  const Problem clean = make_problem(attention_case(), dtype());
  for (Path path : backward_paths()) {
    // out and lse stay the clean forward's
    const bool ordered = path == Path::FusedOrdered || path == Path::FusedOrderedPipelined;
    const Problem poison = poisoned(clean, attention_case(), ordered);
    EXPECT_TRUE(same_bits(emulated_backward_of(poison, path, AttentionKeyTiles::Trimmed),
                          emulated_backward_of(clean, path, AttentionKeyTiles::Trimmed)))
        << "path " << static_cast<int>(path);
  }
  EXPECT_TRUE(any_nan(emulated_backward_of(poisoned(clean, attention_case()), Path::Split, AttentionKeyTiles::All)))
      << "visiting every tile reads the NaN keys";
}

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedTrimmedKeyTiles,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedTrimmedKeyTilesPoisoned,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

}  // namespace
}  // namespace tandem::kernels
