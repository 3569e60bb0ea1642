// The pipelined split backward (kernels/cuda/attention_backward_pipelined.cuh,
// TANDEM_ATTENTION_BACKWARD=split_pipelined: dkdv_pipelined_kernel and
// dq_pipelined_kernel), its own device code run on the CPU under
// tests/testing/warp_emulator.h with attention.cu's launch geometry: against
// the CPU reference and bit for bit against the split backward with the plain
// kernels, for f16 and bf16, every padded head width DP 32/64/128 (16-byte
// copies with zero-filled columns, and plain loads where Dh is not a multiple
// of 8), S from 1 to 300 (one partial tile, several, so both buffers are
// reused), padding with an all-padding row, and dropout; and the kernels
// TANDEM_ATTENTION_OCCUPANCY=high runs at DP = 32 (three blocks per SM, 32-query
// dK/dV tiles) bit for bit against the default ones.
//
// The emulator defers every cp.async until its group is waited for and fills
// the destination with NaN bytes meanwhile, so a tile read before its wait
// fails these comparisons, and so does, once warps are skewed (the emulator's
// WarpByWarp schedules), a prefetch issued over a buffer other warps still
// read: moving either kernel's prefetch above its barrier fails them.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <tuple>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::all_close;
using testing::same_bits;
using Case = testing::AttentionCase;

class EmulatedSplitPipelined : public ::testing::TestWithParam<std::tuple<DType, Case>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  const testing::AttentionProblem& problem() {
    if (!problem_) problem_ = testing::make_problem(std::get<1>(GetParam()), dtype());
    return *problem_;
  }
  // The split backward's dqkv (every element written: it starts as NaN) from the CPU reference's forward.
  Tensor backward(bool pipelined, warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
    const testing::AttentionProblem& p = problem();
    Tensor dqkv = Tensor::empty(p.qkv.shape(), dtype());
    dqkv.fill_(std::nan(""));
    TANDEM_DISPATCH_FLOAT_NO_F64(dtype(), "emulated split backward", [&] {
      emulated_split_backward<scalar_t>(p.qkv, p.mask, p.out, p.lse, p.dout, dqkv, p.s, p.d, pipelined, schedule);
    });
    return dqkv;
  }

 private:
  std::optional<testing::AttentionProblem> problem_;
};

TEST_P(EmulatedSplitPipelined, MatchesTheCpuReference) {
  const Tensor got = backward(true), want = testing::cpu_backward(problem());
  const testing::Tolerance tol = testing::attention_gradient_tolerance(dtype());
  EXPECT_TRUE(all_close(got, want, tol.atol, tol.rtol));
}

TEST_P(EmulatedSplitPipelined, MatchesTheSplitBackwardBitForBit) {
  EXPECT_TRUE(same_bits(backward(true), backward(false)));
}

// With one warp run as far ahead of the others as the barriers allow (either way round), a query-tile
// prefetch issued before every warp is done with the buffer it overwrites poisons their reads.
TEST_P(EmulatedSplitPipelined, GivesTheSameBitsWithWarpsSkewedEitherWay) {
  const Tensor together = backward(true);
  for (auto schedule : {warp_emulator::Schedule::WarpByWarp, warp_emulator::Schedule::WarpByWarpReversed})
    EXPECT_TRUE(same_bits(backward(true, schedule), together)) << "schedule " << static_cast<int>(schedule);
}

// TANDEM_ATTENTION_OCCUPANCY=high: at DP = 32 both passes are compiled for three blocks per SM and the
// dK/dV pass walks 32-query tiles (kDkdvPipelinedQueryTile); elsewhere the default kernels run. dK and
// dV add the queries' terms in the same order whatever the tile, so the bits are the default's, also
// with the warps skewed (a 32-query prefetch over a buffer still being read would show).
TEST_P(EmulatedSplitPipelined, HighOccupancyGivesTheDefaultKernelsBitsUnderEverySchedule) {
  static_assert(kDkdvPipelinedQueryTile<32, true> == 32 && kDkdvPipelinedQueryTile<32, false> == 64);
  const Tensor by_default = backward(true);
  const testing::ForcedSwitch high(set_attention_occupancy_for_testing, AttentionOccupancy::High);
  for (auto schedule : {warp_emulator::Schedule::RoundRobin, warp_emulator::Schedule::WarpByWarp,
                        warp_emulator::Schedule::WarpByWarpReversed})
    EXPECT_TRUE(same_bits(backward(true, schedule), by_default)) << "schedule " << static_cast<int>(schedule);
}

const Case kCases[] = {
    {1, 1, 1, 8, {}, 0.0},            // one token: one partial tile; 16-byte copies, DP = 32
    {2, 7, 2, 24, {7, 0}, 0.2},       // an all-padding row, dropout; columns 24-31 zero-filled
    {3, 7, 2, 33, {7, 0, 5}, 0.2},    // Dh = 33: plain loads into the buffers, DP = 64
    {1, 70, 2, 64, {70}, 0.1},        // two tiles, the second partial, dropout
    {2, 65, 1, 96, {65, 13}, 0.0},    // DP = 128: 32-query tiles, three of them
    {1, 129, 1, 128, {100}, 0.3},     // five 32-query and three key tiles (buffers reused), the largest head dim
    {2, 100, 2, 20, {100, 61}, 0.5},  // Dh = 20: plain loads, DP = 32, several heads
    {2, 130, 2, 32, {130, 97}, 0.1},  // DP = 32 unpadded: five 32-query tiles (high occupancy), the last partial
    {1, 300, 1, 64, {300}, 0.1},      // five 64-row tiles each way, the last partial
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedSplitPipelined,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases)),
                         testing::dtype_and_case_name);

TEST(EmulatedSplitPipelined, UsesPlainLoadsForAnUnalignedBaseAndStillMatches) {
  // Dh = 64 allows 16-byte copies, but qkv starting 2 bytes into its buffer does not.
  testing::AttentionProblem p = testing::make_problem({1, 70, 1, 64, {}, 0.0}, DType::BF16);
  const int64_t n = p.qkv.numel();
  Tensor buffer = Tensor::empty({n + 1}, DType::BF16);
  Tensor qkv = buffer.narrow(1, n).reshape(p.qkv.shape());
  qkv.copy_(p.qkv);
  ASSERT_FALSE(vector_loads<BFloat16>(qkv.data_ptr(), p.s.head_dim));
  Tensor split = Tensor::empty(qkv.shape(), DType::BF16), pipelined = Tensor::empty(qkv.shape(), DType::BF16);
  emulated_split_backward<BFloat16>(qkv, p.mask, p.out, p.lse, p.dout, split, p.s, p.d, false);
  emulated_split_backward<BFloat16>(qkv, p.mask, p.out, p.lse, p.dout, pipelined, p.s, p.d, true);
  EXPECT_TRUE(same_bits(pipelined, split));
  p.qkv = qkv;
  const testing::Tolerance tol = testing::attention_gradient_tolerance(DType::BF16);
  EXPECT_TRUE(all_close(pipelined, testing::cpu_backward(p), tol.atol, tol.rtol));
}

}  // namespace
}  // namespace tandem::kernels
