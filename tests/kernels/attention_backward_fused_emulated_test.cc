// The fused attention backward's device code (kernels/cuda/attention_backward_fused.cuh)
// run on the CPU under tests/testing/warp_emulator.h, with the launches of
// kernels/cuda/attention.cu's fused path (rowdot, then per chunk of heads the
// fused kernel and the dQ reduction), against
//   - the CPU reference (kernels/cpu/attention_cpu.h): f32, bf16, f16; every
//     padded head width (Dh 7, 24, 33, 64, 80, 128: DP 32, 64, 128, the last
//     with 16-query tiles), S in {1, 7, 65, 70, 100, 129} (none a multiple
//     of 64), padding with a fully padded row, dropout;
//   - the split path's same kernels: dK and dV bit for bit, dQ to f32 rounding
//     (the split path carries one accumulator across key tiles, the fused path
//     adds per-tile sums: different f32 roundings, the same terms);
// and its plan: chunked launches give the same bits as one, the chunks stay
// within the scratch limit, and one Philox block per 8 decisions (half the
// split path's two passes).
//
// Forward outputs come from the CPU reference (the backward reads out only for
// D = dO . O, and lse); the emulated forward is attention_emulated_test.cc's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "kernels/cuda/attention_backward_fused.cuh"
#include "tests/kernels/attention_backward_comparison.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::all_close;
using testing::cpu_backward;
using testing::dq_agrees_to_f32_rounding;
using testing::dqkv_part;
using testing::make_problem;
using testing::mask_ptr;
using Case = testing::AttentionCase;
using Problem = testing::AttentionProblem;

class EmulatedFusedBackward : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(EmulatedFusedBackward, MatchesTheCpuReference) {
  const auto& [t, c] = GetParam();
  const Problem p = make_problem(c, t);
  const testing::Tolerance tol = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(emulated_backward(p, Path::Fused), cpu_backward(p), tol.atol, tol.rtol));
}

const Case kCases[] = {
    {1, 1, 1, 7, {}, 0.0},            // one token, scalar loads, DP = 32
    {2, 7, 3, 24, {7, 3}, 0.0},       // padding, several heads, DP = 32
    {3, 7, 2, 33, {7, 0, 5}, 0.2},    // a fully padded row and dropout, DP = 64
    {1, 70, 2, 64, {70}, 0.1},        // two key tiles, vector loads, dropout
    {2, 65, 1, 80, {65, 13}, 0.0},    // DP = 128 (16-query tiles), one key past a tile, padding
    {1, 129, 1, 128, {100}, 0.3},     // three key tiles, the largest head dim, dropout
    {2, 100, 2, 24, {100, 61}, 0.5},  // dropout over partial 16 x 16 squares
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedFusedBackward,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

// dK and dV the same bits (with dropout, also the same decisions), dQ to f32 rounding
// (tests/kernels/attention_backward_comparison.h says why and how close); with one key tile the same bits.
class EmulatedFusedVersusSplit : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(EmulatedFusedVersusSplit, SameDkDvBitsAndDqToF32Rounding) {
  const auto& [t, c] = GetParam();
  const Problem p = make_problem(c, t);
  const std::vector<double> fused = emulated_backward(p, Path::Fused).to_double_vector();
  const std::vector<double> split = emulated_backward(p, Path::Split).to_double_vector();
  const int64_t width = c.heads * c.head_dim, key_tiles = row_tiles(p.s);
  EXPECT_TRUE(dqkv_part(fused, width, 1) == dqkv_part(split, width, 1)) << "dK";
  EXPECT_TRUE(dqkv_part(fused, width, 2) == dqkv_part(split, width, 2)) << "dV";
  const std::vector<double> a = dqkv_part(fused, width, 0), b = dqkv_part(split, width, 0);
  if (key_tiles == 1) EXPECT_TRUE(a == b) << "dQ with one key tile";
  else EXPECT_TRUE(dq_agrees_to_f32_rounding(a, b, key_tiles, t));
}

const Case kPairCases[] = {
    {1, 64, 2, 64, {50}, 0.1},        // one key tile: dQ the same bits
    {2, 100, 2, 24, {100, 61}, 0.3},  // two key tiles, padding, dropout, DP = 32
    {1, 129, 1, 80, {120}, 0.2},      // three key tiles, DP = 128
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedFusedVersusSplit,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kPairCases)),
                         testing::dtype_and_case_name);

// The ordered accumulation adds the key tiles' dQ shares in dq_reduce_kernel's order: every element of
// dQ, dK and dV the same bits as the unordered fused path.
class EmulatedFusedOrdered : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(EmulatedFusedOrdered, GivesTheUnorderedFusedPathsBits) {
  const auto& [t, c] = GetParam();
  const Problem p = make_problem(c, t);
  EXPECT_TRUE(emulated_backward(p, Path::FusedOrdered).to_double_vector() ==
              emulated_backward(p, Path::Fused).to_double_vector());
}

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedFusedOrdered,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

// The double-buffered ordered kernel (16 bits): the unordered fused path's bits, also with one warp run
// as far ahead of the others as the barriers allow, either way round (a query tile's prefetch issued
// over a buffer, or a dS stored over a tile, that another warp still reads poisons the results).
class EmulatedFusedOrderedPipelined : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(EmulatedFusedOrderedPipelined, GivesTheUnorderedFusedPathsBitsWithWarpsSkewedEitherWay) {
  const auto& [t, c] = GetParam();
  const Problem p = make_problem(c, t);
  const std::vector<double> fused = emulated_backward(p, Path::Fused).to_double_vector();
  for (auto schedule : {warp_emulator::Schedule::RoundRobin, warp_emulator::Schedule::WarpByWarp,
                        warp_emulator::Schedule::WarpByWarpReversed})
    EXPECT_TRUE(emulated_backward(p, Path::FusedOrderedPipelined, kFusedScratchLimit, schedule).to_double_vector() ==
                fused)
        << "schedule " << static_cast<int>(schedule);
}

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedFusedOrderedPipelined,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

TEST(EmulatedFusedOrdered, ChunkedLaunchesGiveTheSameBitsAsOne) {
  const Problem p = make_problem({2, 70, 3, 20, {70, 33}, 0.2}, DType::BF16);
  const size_t per_head = fused_scratch_bytes_per_head(p.s, true);
  ASSERT_EQ(plan_fused_backward(p.s, 5 * per_head / 2, true).heads_per_launch, 2);  // 6 heads: 3 launches of 2
  const std::vector<double> chunked = emulated_backward(p, Path::FusedOrdered, 5 * per_head / 2).to_double_vector();
  EXPECT_TRUE(chunked == emulated_backward(p, Path::FusedOrdered).to_double_vector());
}

// Key tile 0 waits for turn 0 on every query tile: with the flags left at 1, its first wait cannot be
// met, and the emulator, where nothing else would ever pass the turn, fails the launch naming it.
TEST(EmulatedFusedOrdered, AKeyTileWaitsForItsTurn) {
  const Problem p = make_problem({1, 70, 1, 32, {}, 0.0}, DType::BF16);
  Tensor dqkv = Tensor::empty(p.qkv.shape(), p.t);
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { emulated_fused<BFloat16>(p, dqkv, kFusedScratchLimit, true, 1); },
      "turn_wait_acquire: waiting for turn 0, the flag holds 1"));
}

TEST(EmulatedFusedBackwardPlan, OrderedScratchIsOneF32DqAndItsTurnFlagsPerHead) {
  const AttentionShape bert{64, 512, 12, 64};
  EXPECT_EQ(fused_scratch_bytes_per_head(bert, true), sizeof(float) * 512 * 64 + sizeof(int) * 32);
  EXPECT_EQ(plan_fused_backward(bert, kFusedScratchLimit, true).heads_per_launch, 384);  // 768 heads in 2 launches
  // Tiny heads: at most 65535 per launch (the ordered grid's y dimension), however many fit the scratch.
  EXPECT_EQ(plan_fused_backward({70000, 1, 1, 8}, kFusedScratchLimit, true).heads_per_launch, 35000);
}

TEST(EmulatedFusedBackwardPlan, ChunkedLaunchesGiveTheSameBitsAsOne) {
  const Problem p = make_problem({2, 70, 3, 20, {70, 33}, 0.2}, DType::BF16);
  const size_t per_head = fused_scratch_bytes_per_head(p.s);
  ASSERT_EQ(plan_fused_backward(p.s, 5 * per_head / 2).heads_per_launch, 2);  // 6 heads: 3 launches of 2
  ASSERT_EQ(plan_fused_backward(p.s).heads_per_launch, 6);
  const std::vector<double> chunked = emulated_backward(p, Path::Fused, 5 * per_head / 2).to_double_vector();
  EXPECT_TRUE(chunked == emulated_backward(p, Path::Fused).to_double_vector());
}

TEST(EmulatedFusedBackwardPlan, SplitsHeadsIntoTheFewestLaunchesWithinTheLimit) {
  // S = 512, Dh = 64: 8 key tiles of an f32 [512, 64] dQ, 1 MiB per head.
  const AttentionShape bert{64, 512, 12, 64};
  EXPECT_EQ(fused_scratch_bytes_per_head(bert), size_t{1} << 20);
  const FusedBackwardPlan plan = plan_fused_backward(bert);
  EXPECT_EQ(plan.heads_per_launch, 64);  // 768 heads in 12 launches
  EXPECT_EQ(plan.scratch_bytes, kFusedScratchLimit);
  // 65 heads with room for 64: two launches of 33 (and 32), not 64 and 1.
  const FusedBackwardPlan uneven = plan_fused_backward({5, 512, 13, 64});
  EXPECT_EQ(uneven.heads_per_launch, 33);
  EXPECT_EQ(uneven.scratch_bytes, 33 * (size_t{1} << 20));
  // Few heads: one launch, scratch for exactly those.
  EXPECT_EQ(plan_fused_backward({2, 100, 3, 24}).heads_per_launch, 6);
  EXPECT_EQ(plan_fused_backward({2, 100, 3, 24}).scratch_bytes, 6 * sizeof(float) * 2 * 100 * 24);
}

// Rounds of `resident` blocks that `plan`'s launches take for shape s (heads_per_launch per launch, the last
// the rest).
int64_t rounds_of(const AttentionShape& s, const FusedBackwardPlan& plan, int64_t resident) {
  const int64_t heads = s.batch * s.heads, tiles = row_tiles(s);
  int64_t rounds = 0;
  for (int64_t h0 = 0; h0 < heads; h0 += plan.heads_per_launch)
    rounds += block_rounds(std::min(plan.heads_per_launch, heads - h0) * tiles, resident);
  return rounds;
}

TEST(EmulatedFusedBackwardPlan, WavesFillWholeRoundsOfTheResidentBlocks) {
  // 132 SMs x 3 blocks: 396 resident. S = 512: 8 key tiles a head, 1 MiB of scratch, 64 heads at most.
  const AttentionShape bert{64, 512, 12, 64};
  EXPECT_EQ(rounds_of(bert, plan_fused_backward(bert), 396), 24);  // 12 launches of 512 blocks, 2 rounds each
  const FusedBackwardPlan waves = plan_fused_backward(bert, kFusedScratchLimit, false, 396);
  EXPECT_EQ(waves.heads_per_launch, 49);  // 392 blocks: one round
  EXPECT_EQ(waves.scratch_bytes, 49 * (size_t{1} << 20));
  EXPECT_EQ(rounds_of(bert, waves, 396), 16);
  // The configs' 128 x 256 tokens, 8 heads of 32: 4 key tiles, 128 KiB, 512 heads at most; even is two
  // launches of 2048 blocks (6 rounds each), waves 495 heads (1980 blocks, 5 rounds) twice and the rest.
  const AttentionShape configs{128, 256, 8, 32};
  EXPECT_EQ(rounds_of(configs, plan_fused_backward(configs), 396), 12);
  const FusedBackwardPlan configs_waves = plan_fused_backward(configs, kFusedScratchLimit, false, 396);
  EXPECT_EQ(configs_waves.heads_per_launch, 495);
  EXPECT_EQ(rounds_of(configs, configs_waves, 396), 11);
  // Where the even split is as good, it stays: one launch of everything.
  EXPECT_EQ(plan_fused_backward({2, 100, 3, 24}, kFusedScratchLimit, false, 396).heads_per_launch, 6);
  // Without the device's count (0), the even split.
  EXPECT_EQ(plan_fused_backward(bert, kFusedScratchLimit, false, 0).heads_per_launch, 64);
}

TEST(EmulatedFusedBackwardPlan, WavesNeverTakeMoreRoundsOrScratchThanTheLimitAllows) {
  for (const AttentionShape s : {AttentionShape{64, 512, 12, 64}, AttentionShape{128, 256, 8, 32},
                                 AttentionShape{32, 512, 8, 32}, AttentionShape{5, 512, 13, 64},
                                 AttentionShape{1000, 64, 4, 16}, AttentionShape{7, 4096, 1, 64},
                                 AttentionShape{70000, 1, 1, 8}, AttentionShape{3, 1000, 2, 128}})
    for (bool ordered : {false, true})
      for (int64_t resident : {1, 7, 132, 264, 396, 528, 100000}) {
        SCOPED_TRACE(testing::case_name({s.batch, s.seq, s.heads, s.head_dim, {}, 0.0}) + (ordered ? " ordered" : "") +
                     ", resident " + std::to_string(resident));
        const FusedBackwardPlan even = plan_fused_backward(s, kFusedScratchLimit, ordered);
        const FusedBackwardPlan waves = plan_fused_backward(s, kFusedScratchLimit, ordered, resident);
        ASSERT_GT(waves.heads_per_launch, 0);
        EXPECT_LE(waves.scratch_bytes, kFusedScratchLimit);
        EXPECT_EQ(waves.scratch_bytes, static_cast<size_t>(waves.heads_per_launch) *
                                           fused_scratch_bytes_per_head(s, ordered));
        if (ordered) {
          EXPECT_LE(waves.heads_per_launch, 65535);
        }
        EXPECT_LE(rounds_of(s, waves, resident), rounds_of(s, even, resident));
      }
}

// 6 heads with room for 4 and 2 key tiles each, at 4 resident blocks: even is 3 + 3 (2 rounds each), waves
// 4 + 2 (2 rounds and 1). Uneven chunks give the one launch's bits.
TEST(EmulatedFusedBackwardPlan, ChunksOfWholeRoundsGiveTheSameBitsAsOne) {
  const Problem p = make_problem({2, 70, 3, 20, {70, 33}, 0.2}, DType::BF16);
  const size_t limit = 9 * fused_scratch_bytes_per_head(p.s) / 2;
  ASSERT_EQ(plan_fused_backward(p.s, limit).heads_per_launch, 3);
  ASSERT_EQ(plan_fused_backward(p.s, limit, false, 4).heads_per_launch, 4);
  Tensor chunked = Tensor::empty(p.qkv.shape(), p.t);
  chunked.fill_(std::nan(""));
  emulated_fused<BFloat16>(p, chunked, limit, false, 0, false, warp_emulator::Schedule::RoundRobin,
                           AttentionKeyTiles::All, nullptr, 4);
  EXPECT_TRUE(chunked.to_double_vector() == emulated_backward(p, Path::Fused).to_double_vector());
}

TEST(EmulatedFusedBackwardPlan, FallsBackToTheSplitPathWhenOneHeadExceedsTheLimit) {
  // At Dh = 64 one head needs 4 * ceil(S / 64) * S * 64 bytes: 64 MiB at S = 4096, more beyond.
  EXPECT_EQ(plan_fused_backward({1, 4096, 1, 64}).heads_per_launch, 1);
  EXPECT_EQ(plan_fused_backward({1, 4097, 1, 64}).heads_per_launch, 0);
  EXPECT_EQ(plan_fused_backward({8, 4097, 12, 64}).scratch_bytes, 0u);
}

// One Philox block per 8 decisions: B * H * S^2 / 8 (ceil(S / 16)^2 * 32 per head for other S), where
// the split path computes each block twice (dK/dV and dQ).
TEST(EmulatedFusedBackwardDropout, SpendsOnePhiloxBlockPerEightDecisions) {
  const std::pair<int64_t, int64_t> cases[] = {{128, 128 * 128 / 8}, {100, 7 * 7 * 32}};  // seq, blocks per head
  for (const auto& [seq, blocks] : cases) {
    const Problem p = make_problem({2, seq, 3, 32, {}, 0.1}, DType::F32);
    philox_blocks_computed = 0;
    emulated_backward(p, Path::Fused);
    EXPECT_EQ(philox_blocks_computed, 6 * blocks) << "seq " << seq;
    philox_blocks_computed = 0;
    emulated_backward(p, Path::Split);
    EXPECT_EQ(philox_blocks_computed, 2 * 6 * blocks) << "seq " << seq;
  }
}

}  // namespace
}  // namespace tandem::kernels
