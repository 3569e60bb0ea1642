// The attention forward's block order (TANDEM_ATTENTION_BLOCK_ORDER, kernels/cuda/attention_switches.h),
// on the CPU under tests/testing/warp_emulator.h with attention.cu's launches:
//   - the grid: tiles first lays a head's 64-row query tiles side by side on x (the emulator, as a
//     GPU's block scheduler, starts blocks in that order), heads first puts the heads on x, and past
//     65535 heads (a grid's y limit) the heads come first whatever the switch;
//   - block_tile gives each block of either grid its (head, tile) once;
//   - every forward kernel gives the heads-first bits tiles first (output and lse), in f32 and bf16
//     (f16 runs bf16's code), with several heads and tiles, padding and dropout (the backward
//     kernels do not read the order: the same results in give the same gradient); so do the
//     high-occupancy forward and trimmed key tiles. A kernel that read blockIdx.x as its head in a tiles-first grid would compute other
//     heads' tiles and leave some unwritten (the outputs start as NaN).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::ForcedSwitch;
using testing::make_problem;
using testing::same_bits;
using Case = testing::AttentionCase;
using Problem = testing::AttentionProblem;

// The forward's parameters as its launch sets them under `order`.
Params params_under(AttentionBlockOrder order, const AttentionShape& s) {
  Params p = make_params(s, {});
  p.tiles_first = tiles_first_applies(s, order);
  return p;
}

Grid forward_grid(const AttentionShape& s, const Params& p) { return block_grid(p, s.batch * s.heads, row_tiles(s)); }

TEST(EmulatedBlockGrid, TilesFirstPutsTheTilesOnXAndTheHeadsOnY) {
  const AttentionShape s{3, 130, 4, 32};  // 12 heads, 3 tiles
  const Grid tiles = forward_grid(s, params_under(AttentionBlockOrder::TilesFirst, s));
  EXPECT_EQ(tiles.x, 3u);
  EXPECT_EQ(tiles.y, 12u);
  const Grid heads = forward_grid(s, params_under(AttentionBlockOrder::HeadsFirst, s));
  EXPECT_EQ(heads.x, 12u);
  EXPECT_EQ(heads.y, 3u);
}

TEST(EmulatedBlockGrid, HeadsComeFirstPastTheGridsYLimitWhateverTheSwitch) {
  EXPECT_TRUE(params_under(AttentionBlockOrder::TilesFirst, {65535, 10, 1, 8}).tiles_first);
  const AttentionShape past{65536, 10, 1, 8};
  const Params p = params_under(AttentionBlockOrder::TilesFirst, past);
  EXPECT_FALSE(p.tiles_first);
  const Grid grid = forward_grid(past, p);
  EXPECT_EQ(grid.x, 65536u);
  EXPECT_EQ(grid.y, 1u);
}

// The (head, tile) of every block of s's grid under `order`, in the order the emulator starts them.
std::vector<std::pair<int, int>> places_in_launch_order(AttentionBlockOrder order, const AttentionShape& s) {
  const Params p = params_under(order, s);
  const Grid grid = forward_grid(s, p);
  std::vector<std::pair<int, int>> places;
  warp_emulator::launch(grid.x, grid.y, kThreads, 0, [&] {
    if (threadIdx.x == 0) places.emplace_back(block_tile(p).head, block_tile(p).tile);
  });
  return places;
}

TEST(EmulatedBlockGrid, TilesFirstStartsAHeadsTilesOneAfterAnother) {
  const AttentionShape s{2, 200, 3, 16};  // 6 heads, 4 tiles
  const std::vector<std::pair<int, int>> places = places_in_launch_order(AttentionBlockOrder::TilesFirst, s);
  ASSERT_EQ(places.size(), 24u);
  for (size_t i = 0; i < places.size(); ++i)
    EXPECT_EQ(places[i], std::make_pair(static_cast<int>(i / 4), static_cast<int>(i % 4))) << "block " << i;
  const std::vector<std::pair<int, int>> heads = places_in_launch_order(AttentionBlockOrder::HeadsFirst, s);
  ASSERT_EQ(heads.size(), 24u);
  for (size_t i = 0; i < heads.size(); ++i)
    EXPECT_EQ(heads[i], std::make_pair(static_cast<int>(i % 6), static_cast<int>(i / 6))) << "block " << i;
}

TEST(EmulatedBlockGrid, EveryHeadAndTileHasOneBlockEitherWay) {
  const AttentionShape s{3, 130, 5, 16};
  for (AttentionBlockOrder order : {AttentionBlockOrder::HeadsFirst, AttentionBlockOrder::TilesFirst}) {
    const std::vector<std::pair<int, int>> places = places_in_launch_order(order, s);
    const std::set<std::pair<int, int>> distinct(places.begin(), places.end());
    EXPECT_EQ(places.size(), 45u);
    EXPECT_EQ(distinct.size(), 45u) << attention_block_order_name(order);
    EXPECT_EQ(*distinct.begin(), std::make_pair(0, 0));
    EXPECT_EQ(*distinct.rbegin(), std::make_pair(14, 2));
  }
}

struct Forward {
  Tensor out, lse;
};

Forward forward_of(const Problem& p, AttentionForwardKernel kernel, AttentionBlockOrder order,
                   AttentionKeyTiles tiles) {
  const ForcedSwitch o(set_attention_block_order_for_testing, order);
  Forward f{Tensor::empty(p.out.shape(), p.t), Tensor::empty(p.lse.shape(), DType::F32)};
  TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention forward", [&] {
    emulated_forward<scalar_t>(p.qkv, p.mask, f.out, f.lse, p.s, p.d, kernel, warp_emulator::Schedule::RoundRobin,
                               tiles);
  });
  return f;
}

class EmulatedBlockOrder : public EmulatedAttentionVariants {};

TEST_P(EmulatedBlockOrder, TilesFirstGivesTheHeadsFirstForwardBits) {
  const Problem p = make_problem(attention_case(), dtype());
  for (AttentionForwardKernel kernel : forward_kernels()) {
    SCOPED_TRACE("forward kernel " + std::to_string(static_cast<int>(kernel)));
    const Forward heads = forward_of(p, kernel, AttentionBlockOrder::HeadsFirst, AttentionKeyTiles::All);
    const Forward tiles = forward_of(p, kernel, AttentionBlockOrder::TilesFirst, AttentionKeyTiles::All);
    EXPECT_TRUE(same_bits(tiles.out, heads.out)) << "out";
    EXPECT_TRUE(same_bits(tiles.lse, heads.lse)) << "lse";
  }
}

// Several heads and tiles, never as many of each (a kernel reading its place the wrong way round then
// misses some (head, tile) pairs), padding and dropout; every DP. f16 runs bf16's code.
const Case kCases[] = {
    {2, 100, 2, 32, {100, 61}, 0.1},  // 4 heads, 2 tiles; DP = 32
    {2, 130, 1, 64, {130, 0}, 0.0},   // 2 heads, 3 tiles, a row with no real key; DP = 64
    {1, 70, 3, 80, {}, 0.2},          // 3 heads, 2 tiles, no mask; DP = 128
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedBlockOrder,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

// The forward TANDEM_ATTENTION_OCCUPANCY=high runs (16 bits, DP = 32: the pipelined forward at five blocks
// per SM) and trimmed key tiles (whose trip counts come from memory) tiles first, against heads first.
TEST(EmulatedBlockOrderWithOtherSwitches, HighOccupancyKernelsGiveTheHeadsFirstBits) {
  const Problem p = make_problem({2, 100, 2, 32, {100, 61}, 0.1}, DType::BF16);
  const ForcedSwitch o(set_attention_occupancy_for_testing, AttentionOccupancy::High);
  const Forward heads = forward_of(p, AttentionForwardKernel::Pipelined, AttentionBlockOrder::HeadsFirst,
                                   AttentionKeyTiles::All);
  const Forward tiles = forward_of(p, AttentionForwardKernel::Pipelined, AttentionBlockOrder::TilesFirst,
                                   AttentionKeyTiles::All);
  EXPECT_TRUE(same_bits(tiles.out, heads.out));
  EXPECT_TRUE(same_bits(tiles.lse, heads.lse));
}

TEST(EmulatedBlockOrderWithOtherSwitches, TrimmedKeyTilesGiveTheHeadsFirstBits) {
  const Problem p = make_problem({2, 130, 1, 32, {130, 40}, 0.1}, DType::BF16);  // 2 heads, 3 tiles: 2 trimmed
  for (AttentionForwardKernel kernel : {AttentionForwardKernel::Tiled, AttentionForwardKernel::Pipelined}) {
    const Forward heads = forward_of(p, kernel, AttentionBlockOrder::HeadsFirst, AttentionKeyTiles::Trimmed);
    const Forward tiles = forward_of(p, kernel, AttentionBlockOrder::TilesFirst, AttentionKeyTiles::Trimmed);
    EXPECT_TRUE(same_bits(tiles.out, heads.out)) << "forward kernel " << static_cast<int>(kernel);
    EXPECT_TRUE(same_bits(tiles.lse, heads.lse)) << "forward kernel " << static_cast<int>(kernel);
  }
}

}  // namespace
}  // namespace tandem::kernels
