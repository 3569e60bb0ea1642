// The CUDA attention kernels' own device code (kernels/cuda/attention_kernels.cuh),
// run on the CPU under tests/testing/warp_emulator.h with the launch geometry
// of kernels/cuda/attention.cu, against the CPU reference: forward output and
// lse, and the full backward, in f32, bf16 and f16, at odd shapes (one token,
// partial and multiple 64-row tiles, every padded head width 32/64/128,
// scalar and 16-byte loads, S up to 512), with padding, an all-padding row and
// dropout; and the dropout decisions every lane holds in both fragment layouts
// against the mask definition, with the Philox blocks each pass computes
// counted.
//
// This checks everything in the kernels but the hardware itself: tiling and
// indexing, shared-memory layout, fragment bookkeeping (against the PTX ISA's
// mma.m16n8k16 layouts, as the emulator implements them), the online softmax,
// masking, dropout, barrier placement (a divergent barrier is an error), and
// the 16-bit roundings. Tolerances are those of attention_parity_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "kernels/attention.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::all_close;
using testing::random_tensor;
using Case = testing::AttentionCase;

class EmulatedAttentionKernels : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(EmulatedAttentionKernels, MatchTheCpuReference) {
  const auto& [t, c] = GetParam();
  const testing::AttentionProblem p = testing::make_problem(c, t);  // p.out, p.lse: the CPU reference's
  const Tensor dqkv_ref = testing::cpu_backward(p);

  Tensor out = Tensor::empty(p.out.shape(), t), lse = Tensor::empty(p.lse.shape(), DType::F32);
  Tensor dqkv = Tensor::empty(p.qkv.shape(), t);
  dqkv.fill_(std::nan(""));  // every element must be written
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "emulated attention", [&] {
    emulated_forward<scalar_t>(p.qkv, p.mask, out, lse, p.s, p.d);
    emulated_split_backward<scalar_t>(p.qkv, p.mask, out, lse, p.dout, dqkv, p.s, p.d);
  });
  const testing::Tolerance fo = testing::attention_output_tolerance(t), go = testing::attention_gradient_tolerance(t);
  EXPECT_TRUE(all_close(out, p.out, fo.atol, fo.rtol)) << "forward";
  EXPECT_TRUE(testing::same_lse(lse, p.lse));
  EXPECT_TRUE(all_close(dqkv, dqkv_ref, go.atol, go.rtol)) << "gradient";
}

const Case kCases[] = {
    {1, 1, 1, 7, {}, 0.0},               // one token, scalar loads, DP = 32
    {2, 7, 3, 20, {7, 3}, 0.0},          // padding; 16-bit scalar loads, f32 vector loads
    {3, 7, 2, 33, {7, 0, 5}, 0.2},       // an all-padding row and dropout, DP = 64
    {1, 70, 2, 64, {70}, 0.1},           // two key tiles, vector loads, dropout
    {2, 65, 1, 96, {65, 13}, 0.0},       // DP = 128 (32-query inner tiles in dK/dV), padding
    {1, 129, 1, 128, {100}, 0.3},        // three tiles, the largest head dim, dropout
    {1, 512, 1, 64, {400}, 0.1},         // the longest sequence: eight tiles
    {2, 100, 2, 20, {100, 61}, 0.5},     // dropout over partial 16 x 16 squares, several heads
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedAttentionKernels,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

// The decisions a block's lanes hold, by the fragment layouts, against kernels/attention_params.h element by
// element: keep_bits_along_keys (forward, dQ: rows are queries) for the 64-key tile at k0, and
// keep_bits_along_queries (dK/dV: rows are keys) for the N-query tile at q0.
template <int N>
void expect_lane_keep_bits_match_the_mask(const Params& P, int64_t bh, int tile0, int rows0) {
  // got[row][col] = -1 (not held), 0 or 1, rows = the block's 64 rows from rows0, columns from tile0.
  constexpr int kCols = 8 * N;
  std::vector<int> along_keys(kRows * kCols, -1), along_queries(kRows * kCols, -1);
  warp_emulator::launch(1, 1, kThreads, 0, [&] {
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const int row = warp * 16 + g;
    uint32_t fwd[2], bwd[2];
    keep_bits_along_keys<N>(P, bh, rows0 + row, tile0, t, fwd);
    keep_bits_along_queries<N>(P, bh, tile0, rows0 + row, t, bwd);
    for (int r = 0; r < 2; ++r)
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < 2; ++c) {
          const int at = (row + 8 * r) * kCols + 8 * n + 2 * t + c;
          along_keys[at] = (fwd[r] >> (2 * n + c)) & 1u;
          along_queries[at] = (bwd[r] >> (2 * n + c)) & 1u;
        }
  });
  int checked = 0, dropped = 0;
  for (int row = 0; row < kRows; ++row)
    for (int col = 0; col < kCols; ++col) {
      const int64_t a = rows0 + row, b = tile0 + col;  // row and column indices into the S x S matrix
      ASSERT_NE(along_keys[row * kCols + col], -1) << "no lane holds " << row << ", " << col;
      if (a >= P.seq || b >= P.seq) continue;  // outside the matrix the probabilities are 0: any bit will do
      ASSERT_EQ(along_keys[row * kCols + col], attention_dropout_keep(P.drop, bh, a, b, P.seq))
          << "forward layout, query " << a << ", key " << b;
      ASSERT_EQ(along_queries[row * kCols + col], attention_dropout_keep(P.drop, bh, b, a, P.seq))
          << "transposed layout, key " << a << ", query " << b;
      ++checked;
      dropped += along_keys[row * kCols + col] == 0;
    }
  EXPECT_GT(checked, 0);
  EXPECT_GT(dropped, 0);
}

TEST(EmulatedAttentionDropout, EveryLaneHoldsTheDecisionsOfTheMaskDefinition) {
  for (AttentionDropoutRng rng : {AttentionDropoutRng::Philox10x8, AttentionDropoutRng::Philox7x16}) {
    for (int64_t seq : {128, 100, 150}) {  // whole tiles; a partial square; a partial tile
      SCOPED_TRACE("seq " + std::to_string(seq) + ", rule " + std::to_string(static_cast<int>(rng)));
      const Params P = make_params({2, seq, 3, 32}, {0.3f, 77, 5, nullptr, rng});
      expect_lane_keep_bits_match_the_mask<8>(P, 4, 0, 0);  // 64-column tiles: forward, dQ, dK/dV at Dh <= 64
      expect_lane_keep_bits_match_the_mask<8>(P, 5, 64, 64);
      expect_lane_keep_bits_match_the_mask<4>(P, 1, 32, 64);  // 32-query tiles: dK/dV at Dh > 64
      expect_lane_keep_bits_match_the_mask<4>(P, 1, 96, 0);
    }
  }
}

// The dropout's Philox blocks one launch of each kernel computes, as counted by ATTENTION_COUNT_PHILOX.
struct PhiloxCounts {
  int64_t forward = 0, dkdv = 0, dq = 0;
};

template <class T>
PhiloxCounts count_philox_blocks(const AttentionShape& s, const AttentionDropout& d) {
  const Params params = make_params(s, d);
  const Grid grid = grid_for(s);
  Tensor qkv = random_tensor({s.batch, s.seq, 3 * s.heads * s.head_dim}, 3, DType::F32);
  Tensor out = Tensor::empty({s.batch, s.seq, s.heads * s.head_dim}, DType::F32);
  Tensor dout = random_tensor(out.shape(), 4, DType::F32), dqkv = Tensor::empty(qkv.shape(), DType::F32);
  Tensor lse = Tensor::empty({s.batch, s.heads, s.seq}, DType::F32);
  std::vector<float> rowdot(static_cast<size_t>(s.batch * s.heads * s.seq), 0.0f);
  constexpr int DP = 32;
  PhiloxCounts c;
  philox_blocks_computed = 0;
  warp_emulator::launch(grid.x, grid.y, kThreads, forward_smem_bytes<T, DP>(), [&] {
    forward_kernel<T, DP>(qkv.data<T>(), nullptr, out.data<T>(), lse.data<float>(), params, false);
  });
  c.forward = std::exchange(philox_blocks_computed, 0);
  warp_emulator::launch(grid.x, grid.y, kThreads, dkdv_smem_bytes<T, DP>(), [&] {
    dkdv_kernel<T, DP, kDkdvQueryTile<DP>>(qkv.data<T>(), nullptr, lse.data<float>(), rowdot.data(), dout.data<T>(),
                                           dqkv.data<T>(), params, false, false);
  });
  c.dkdv = std::exchange(philox_blocks_computed, 0);
  warp_emulator::launch(grid.x, grid.y, kThreads, dq_smem_bytes<T, DP>(), [&] {
    dq_kernel<T, DP>(qkv.data<T>(), nullptr, lse.data<float>(), rowdot.data(), dout.data<T>(), dqkv.data<T>(), params,
                     false, false);
  });
  c.dq = std::exchange(philox_blocks_computed, 0);
  return c;
}

TEST(EmulatedAttentionDropout, EachPassSpendsOnePhiloxBlockPerEightDecisions) {
  // B * H * S^2 / 8 blocks per pass (before: S^2 / 2 in the forward and dQ, S^2 in dK/dV), and
  // for S not a multiple of 16, the whole squares that cover the matrix: ceil(S / 16)^2 * 32 per head.
  const std::pair<int64_t, int64_t> cases[] = {{128, 128 * 128 / 8}, {100, 7 * 7 * 32}};  // seq, blocks per head
  for (const auto& [seq, blocks] : cases) {
    const AttentionShape s{2, seq, 3, 32};
    const PhiloxCounts c = count_philox_blocks<float>(s, {0.1f, 1, 2});
    EXPECT_EQ(c.forward, 6 * blocks) << "seq " << seq;
    EXPECT_EQ(c.dkdv, 6 * blocks) << "seq " << seq;
    EXPECT_EQ(c.dq, 6 * blocks) << "seq " << seq;
  }
  const PhiloxCounts none = count_philox_blocks<float>({1, 64, 1, 32}, {0.0f, 1, 2});
  EXPECT_EQ(none.forward + none.dkdv + none.dq, 0);  // p = 0: no Philox at all
}

TEST(EmulatedAttentionDropout, UnderPhilox7x16EachPassSpendsOnePhiloxBlockPerSixteenDecisions) {
  // B * H * S^2 / 16 blocks per pass: lane and lane ^ 4 share each square's blocks, each computing half of
  // them; for S not a multiple of 16, the whole squares that cover the matrix: ceil(S / 16)^2 * 16 per
  // head, also where a tile's last square has no partner (S = 100: squares 4-6 of a row).
  const std::pair<int64_t, int64_t> cases[] = {{128, 128 * 128 / 16}, {100, 7 * 7 * 16}};  // seq, blocks per head
  for (const auto& [seq, blocks] : cases) {
    const AttentionShape s{2, seq, 3, 32};
    const PhiloxCounts c = count_philox_blocks<float>(s, {0.1f, 1, 2, nullptr, AttentionDropoutRng::Philox7x16});
    EXPECT_EQ(c.forward, 6 * blocks) << "seq " << seq;
    EXPECT_EQ(c.dkdv, 6 * blocks) << "seq " << seq;
    EXPECT_EQ(c.dq, 6 * blocks) << "seq " << seq;
  }
}

TEST(WarpEmulator, ReportsABarrierThatPartOfTheBlockSkips) {
  EXPECT_THROW(warp_emulator::launch(1, 1, 64, 0,
                                     [] {
                                       if (threadIdx.x < 32) __syncthreads();
                                     }),
               std::runtime_error);
}

TEST(WarpEmulator, ShufflesExchangeWithinAWarpOnly) {
  std::vector<float> got(64);
  warp_emulator::launch(1, 1, 64, 0, [&] {
    const float mine = static_cast<float>(threadIdx.x);
    got[threadIdx.x] = __shfl_xor_sync(0xffffffffu, mine, 1) + 100.0f * __shfl_sync(0xffffffffu, mine, 3);
  });
  for (unsigned i = 0; i < 64; ++i) EXPECT_EQ(got[i], float(i ^ 1u) + 100.0f * float((i & ~31u) + 3)) << i;
}

// A 16 x 4 block: thread (x, y) is linear thread x + 16 y, so a warp is two rows of x, as on hardware.
TEST(WarpEmulator, TwoDimensionalBlocksNumberThreadsXFirstAndFormWarpsOfConsecutiveThreads) {
  std::vector<float> got(64);
  std::vector<unsigned> shape(64);
  warp_emulator::launch(1, 1, warp_emulator::Dim3{16, 4, 1}, 0, [&] {
    const unsigned linear = threadIdx.x + threadIdx.y * blockDim.x;
    shape[linear] = blockDim.x * 100 + blockDim.y;
    got[linear] = __shfl_sync(0xffffffffu, static_cast<float>(threadIdx.y), 31);  // lane 31: the warp's last thread
  });
  for (unsigned i = 0; i < 64; ++i) {
    EXPECT_EQ(shape[i], 1604u) << i;
    EXPECT_EQ(got[i], i < 32 ? 1.0f : 3.0f) << i;
  }
  EXPECT_THROW(warp_emulator::launch(1, 1, warp_emulator::Dim3{16, 3, 1}, 0, [] {}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::kernels

