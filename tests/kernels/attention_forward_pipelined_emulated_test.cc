// The pipelined attention forward (kernels/cuda/attention_forward_pipelined.cuh),
// with one row tile per warp (TANDEM_ATTENTION_FORWARD=pipelined) and two
// (pipelined_wide, one at DP = 128), its own device code run on the CPU under
// tests/testing/warp_emulator.h with attention.cu's launch geometry: against
// the CPU reference (output, lse), and bit for bit against the tiled
// forward_kernel, for f16 and bf16, every padded
// head width DP 32/64/128 (16-byte copies with zero-filled columns, and plain
// loads where Dh is not a multiple of 8), S from 1 to 200 (one partial tile,
// several tiles, so both buffers are reused), padding with an all-padding row,
// and dropout.
//
// The emulator defers every cp.async until its group is waited for and fills
// the destination with NaN bytes meanwhile, so a tile read before its wait
// fails these comparisons, and so does, once warps are skewed (the emulator's
// WarpByWarp schedules), a prefetch issued over a buffer other warps still
// read. The emulator's cp.async and ldmatrix are themselves tested in
// tests/testing/warp_emulator_memory_test.cc against the PTX ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/kernels/attention_emulated_launches.h"  // first: the emulator before the device code

#include "kernels/cpu/attention_cpu.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using namespace attention_detail;
using testing::all_close;
using testing::attention_output_tolerance;
using testing::mask_ptr;
using testing::padding_mask;
using testing::random_tensor;
using testing::same_bits;
using testing::same_lse;
using Case = testing::AttentionCase;

struct Results {
  Tensor out, lse;
  int64_t philox_blocks = 0;
};

class EmulatedPipelinedForward : public ::testing::TestWithParam<std::tuple<DType, Case, AttentionForwardKernel>> {
 protected:
  AttentionForwardKernel kernel() const { return std::get<2>(GetParam()); }
  AttentionShape shape() const {
    const Case& c = std::get<1>(GetParam());
    return {c.batch, c.seq, c.heads, c.head_dim};
  }
  AttentionDropout dropout() const { return {static_cast<float>(std::get<1>(GetParam()).dropout), 31, 4}; }
  DType dtype() const { return std::get<0>(GetParam()); }
  Tensor qkv() const {
    const AttentionShape s = shape();
    return random_tensor({s.batch, s.seq, 3 * s.heads * s.head_dim}, 1, dtype());
  }
  Tensor mask() const {
    const Case& c = std::get<1>(GetParam());
    return c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq);
  }
  Results run(AttentionForwardKernel which, const Tensor& qkv, const Tensor& mask,
              warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) const {
    const AttentionShape s = shape();
    Results r{Tensor::empty({s.batch, s.seq, s.heads * s.head_dim}, dtype()),
              Tensor::empty({s.batch, s.heads, s.seq}, DType::F32)};
    philox_blocks_computed = 0;
    TANDEM_DISPATCH_FLOAT_NO_F64(dtype(), "emulated attention forward", [&] {
      emulated_forward<scalar_t>(qkv, mask, r.out, r.lse, s, dropout(), which, schedule);
    });
    r.philox_blocks = std::exchange(philox_blocks_computed, 0);
    return r;
  }
};

TEST_P(EmulatedPipelinedForward, MatchesTheCpuReference) {
  const AttentionShape s = shape();
  const Tensor qkv = this->qkv(), mask = this->mask();
  Tensor out_ref = Tensor::empty({s.batch, s.seq, s.heads * s.head_dim}, dtype());
  Tensor lse_ref = Tensor::empty({s.batch, s.heads, s.seq}, DType::F32);
  attention_forward_cpu(qkv.data_ptr(), mask_ptr(mask), out_ref.data_ptr(), lse_ref.data_ptr(), s, dropout(), dtype());

  const Results got = run(kernel(), qkv, mask);
  const testing::Tolerance tol = attention_output_tolerance(dtype());
  EXPECT_TRUE(all_close(got.out, out_ref, tol.atol, tol.rtol));
  EXPECT_TRUE(same_lse(got.lse, lse_ref));
}

TEST_P(EmulatedPipelinedForward, MatchesTheTiledForwardBitForBit) {
  const Tensor qkv = this->qkv(), mask = this->mask();
  const Results tiled = run(AttentionForwardKernel::Tiled, qkv, mask);
  const Results pipelined = run(kernel(), qkv, mask);
  EXPECT_TRUE(same_bits(pipelined.out, tiled.out)) << "output";
  EXPECT_TRUE(same_bits(pipelined.lse, tiled.lse)) << "lse";
  EXPECT_EQ(pipelined.philox_blocks, tiled.philox_blocks);  // dropout recomputed once per decision, as before
}

// With one warp run as far ahead of the others as the barriers allow (either way round), a K/V
// prefetch issued before every warp is done with the buffer it overwrites poisons their reads.
TEST_P(EmulatedPipelinedForward, GivesTheSameBitsWithWarpsSkewedEitherWay) {
  const Tensor qkv = this->qkv(), mask = this->mask();
  const Results together = run(kernel(), qkv, mask);
  for (auto schedule : {warp_emulator::Schedule::WarpByWarp, warp_emulator::Schedule::WarpByWarpReversed}) {
    const Results skewed = run(kernel(), qkv, mask, schedule);
    EXPECT_TRUE(same_bits(skewed.out, together.out)) << "output, schedule " << static_cast<int>(schedule);
    EXPECT_TRUE(same_bits(skewed.lse, together.lse)) << "lse, schedule " << static_cast<int>(schedule);
  }
}

// TANDEM_ATTENTION_OCCUPANCY=high runs the one-tile kernel compiled for five blocks per SM at DP = 32
// (the default kernel elsewhere): its launch bounds differ, not its code, so the same bits.
TEST_P(EmulatedPipelinedForward, HighOccupancyGivesTheDefaultKernelsBits) {
  static_assert(kPipelinedBlocksPerSm<32, 1, true> == 5 && kPipelinedBlocksPerSm<32, 1, false> == 4);
  const Tensor q = qkv(), m = mask();
  const Results by_default = run(kernel(), q, m);
  const testing::ForcedSwitch high(set_attention_occupancy_for_testing, AttentionOccupancy::High);
  const Results r = run(kernel(), q, m);
  EXPECT_TRUE(same_bits(r.out, by_default.out));
  EXPECT_TRUE(same_bits(r.lse, by_default.lse));
}

const Case kCases[] = {
    {1, 1, 1, 8, {}, 0.0},               // one token; 16-byte copies, DP = 32
    {2, 7, 2, 24, {7, 0}, 0.2},          // one partial tile, an all-padding row, dropout; columns 24-31 zero-filled
    {3, 7, 2, 33, {7, 0, 5}, 0.2},       // Dh = 33: plain loads into the buffers, DP = 64
    {1, 70, 2, 64, {70}, 0.1},           // two tiles, the second partial, dropout
    {2, 65, 1, 96, {65, 13}, 0.0},       // DP = 128, two tiles, padding
    {1, 200, 1, 40, {150}, 0.3},         // four tiles (each buffer used twice); columns 40-63 zero-filled
    {1, 129, 1, 128, {100}, 0.3},        // three tiles, the largest head dim, dropout
    {2, 100, 2, 20, {100, 61}, 0.5},     // Dh = 20: plain loads, DP = 32, several heads, dropout
    {1, 300, 2, 64, {300}, 0.1},         // three 128-query blocks of the wide kernel, the last partial
};

INSTANTIATE_TEST_SUITE_P(Cases, EmulatedPipelinedForward,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::ValuesIn(kCases),
                                            ::testing::Values(AttentionForwardKernel::Pipelined,
                                                              AttentionForwardKernel::PipelinedWide)),
                         testing::pipelined_dtype_and_case_name);

TEST(EmulatedPipelinedForward, UsesPlainLoadsForAnUnalignedBaseAndStillMatches) {
  // Dh = 64 allows 16-byte copies, but qkv starting 2 bytes into its buffer does not.
  const AttentionShape s{1, 70, 1, 64};
  const AttentionDropout d{0.0f, 1, 2};
  const int64_t n = s.seq * 3 * s.heads * s.head_dim;
  Tensor buffer = random_tensor({n + 1}, 7, DType::BF16);
  Tensor qkv = buffer.narrow(1, n).reshape({s.batch, s.seq, 3 * s.heads * s.head_dim});
  ASSERT_FALSE(vector_loads<BFloat16>(qkv.data_ptr(), s.head_dim));
  Tensor out_ref = Tensor::empty({s.batch, s.seq, s.heads * s.head_dim}, DType::BF16);
  Tensor lse_ref = Tensor::empty({s.batch, s.heads, s.seq}, DType::F32);
  attention_forward_cpu(qkv.data_ptr(), nullptr, out_ref.data_ptr(), lse_ref.data_ptr(), s, d, DType::BF16);
  Tensor out = Tensor::empty(out_ref.shape(), DType::BF16), lse = Tensor::empty(lse_ref.shape(), DType::F32);
  emulated_forward<BFloat16>(qkv, Tensor(), out, lse, s, d, AttentionForwardKernel::Pipelined);
  const testing::Tolerance tol = attention_output_tolerance(DType::BF16);
  EXPECT_TRUE(all_close(out, out_ref, tol.atol, tol.rtol));
  EXPECT_TRUE(same_lse(lse, lse_ref));
}

}  // namespace
}  // namespace tandem::kernels
