// The deterministic column sums' device code (kernels/cuda/column_sum_kernels.cuh)
// run on the CPU under tests/testing/warp_emulator.h, with the grids and blocks
// the CUDA launchers use. Pass 1: both of TANDEM_COLUMN_SUM's walks (a thread
// per slot, a block per slot) at both vector widths, against double-precision
// column sums, and the property the walks promise: the partial sums' bits
// depend on the shape and the walk, not on the vector width or on which warp
// runs ahead. Pass 2: the documented order, bit for bit, one sum or two.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "tests/testing/element_values.h"

namespace tandem::kernels {
namespace {

using testing::as_double;
using testing::as_element;
using testing::spread_values;

struct Shape {
  int64_t rows, dim;
};

// The partial sums [slots, dim] that pass 1 writes for dy, launched as the CUDA launchers launch it
// (column_sum_launch) with vector width V. They start as NaN, so every one must be written.
template <class T, int V, bool PerBlock>
std::vector<float> partial_sums(const std::vector<T>& dy, Shape s,
                                warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  std::vector<float> partial(static_cast<size_t>(slots * s.dim), std::nanf(""));
  const ColumnSumLaunch l = column_sum_launch(s.dim / V, s.rows, slots, PerBlock);
  warp_emulator::launch(
      l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1}, kColumnSumSubRows * 8 * 32 * sizeof(float),
      [&] { column_sum_partial_kernel<T, V, PerBlock>(dy.data(), partial.data(), s.rows, s.dim, slots); }, schedule);
  return partial;
}

std::vector<double> summed_over_slots(const std::vector<float>& partial, int64_t dim) {
  std::vector<double> sum(static_cast<size_t>(dim), 0.0);
  for (size_t i = 0; i < partial.size(); ++i) sum[i % static_cast<size_t>(dim)] += partial[i];
  return sum;
}

template <class T>
std::vector<double> column_sums(const std::vector<T>& dy, Shape s) {
  std::vector<double> sum(static_cast<size_t>(s.dim), 0.0);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.dim; ++j) sum[static_cast<size_t>(j)] += as_double(dy[static_cast<size_t>(r * s.dim + j)]);
  return sum;
}

::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want) {
  double largest = 0;
  for (double v : want) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 * std::max(largest, 1.0)))
      return ::testing::AssertionFailure() << "column " << i << ": " << got[i] << " against " << want[i];
  return ::testing::AssertionSuccess();
}

// 1000 x 256 and 3000 x 64: many slots, a partial last one; 100 x 768: columns past one block of
// 128 vectors in the thread walk; 7 x 40: fewer rows than one slot's 8 thread rows; 33 x 17: no
// 16-byte path (the scalar kernel only).
const Shape kShapes[] = {{1000, 256}, {3000, 64}, {100, 768}, {7, 40}, {33, 17}};

template <class T, bool PerBlock>
void expect_sums_and_the_same_bits_at_both_widths() {
  constexpr int VV = 16 / sizeof(T);
  for (Shape s : kShapes) {
    SCOPED_TRACE(std::string(PerBlock ? "block" : "thread") + " walk, " + std::to_string(s.rows) + " x " +
                 std::to_string(s.dim));
    const std::vector<T> dy = spread_values<T>(s.rows * s.dim, static_cast<uint32_t>(s.dim));
    const std::vector<float> scalar = partial_sums<T, 1, PerBlock>(dy, s);
    EXPECT_TRUE(close(summed_over_slots(scalar, s.dim), column_sums(dy, s)));
    if (s.dim % VV == 0) {
      EXPECT_EQ((partial_sums<T, VV, PerBlock>(dy, s)), scalar);
    }
  }
}

TEST(EmulatedColumnSum, TheThreadWalkSumsEveryColumnWithTheSameBitsAtBothWidths) {
  expect_sums_and_the_same_bits_at_both_widths<float, false>();
  expect_sums_and_the_same_bits_at_both_widths<BFloat16, false>();
}

TEST(EmulatedColumnSum, TheBlockWalkSumsEveryColumnWithTheSameBitsAtBothWidths) {
  expect_sums_and_the_same_bits_at_both_widths<float, true>();
  expect_sums_and_the_same_bits_at_both_widths<BFloat16, true>();
}

// The block walk's slot partial is its 8 thread rows' sums added in order: the first slot of a
// 64-row, 16-column problem, by hand (rows 0, 2, 4, ... of 2 slots; thread row y takes the slot's
// rows y and y + 8).
TEST(EmulatedColumnSum, TheBlockWalkAddsItsThreadRowsSumsInOrder) {
  const Shape s{64, 16};
  ASSERT_EQ(column_sum_slots(s.rows, s.dim), 2);
  const std::vector<float> dy = spread_values<float>(s.rows * s.dim, 7);
  const std::vector<float> partial = partial_sums<float, 4, true>(dy, s);
  for (int64_t j = 0; j < s.dim; ++j) {
    float t = 0.0f;
    for (int64_t y = 0; y < 8; ++y) {
      float row_sum = 0.0f;
      for (int64_t i = y; i < 32; i += 8) row_sum += dy[static_cast<size_t>((i * 2) * s.dim + j)];  // slot 0: rows 2i
      t += row_sum;
    }
    EXPECT_EQ(partial[static_cast<size_t>(j)], t) << j;
  }
}

// Warps skewed as far apart as the barrier allows, either way round: a sum read from shared memory
// before its thread row wrote it would change the bits (shared memory starts as NaN).
TEST(EmulatedColumnSum, TheBlockWalkGivesTheSameBitsWhicheverWarpRunsAhead) {
  const Shape s{1000, 256};
  const std::vector<BFloat16> dy = spread_values<BFloat16>(s.rows * s.dim, 3);
  const std::vector<float> round_robin = partial_sums<BFloat16, 8, true>(dy, s);
  for (auto schedule : {warp_emulator::Schedule::WarpByWarp, warp_emulator::Schedule::WarpByWarpReversed})
    EXPECT_EQ((partial_sums<BFloat16, 8, true>(dy, s, schedule)), round_robin);
}

// Pass 2 as column_sum.cuh launches it, on `count` (1 or 2) partial arrays [slots, dim].
template <class Out>
std::vector<std::vector<Out>> finished(const std::vector<std::vector<float>>& partials, int64_t slots, int64_t dim) {
  std::vector<std::vector<Out>> out(partials.size(), std::vector<Out>(static_cast<size_t>(dim), as_element<Out>(std::nanf(""))));
  const bool two = partials.size() == 2;
  warp_emulator::launch(static_cast<unsigned>((dim + 31) / 32), two ? 2 : 1, warp_emulator::Dim3{32, 16, 1},
                        16 * 33 * sizeof(float), [&] {
                          column_sum_finish_kernel<Out>(partials[0].data(), out[0].data(),
                                                        two ? partials[1].data() : nullptr,
                                                        two ? out[1].data() : nullptr, slots, dim);
                        });
  return out;
}

// 70 slots (lanes of 5 and 4 slots: the unrolled loop's remainder) of 40 columns (a partial block).
TEST(EmulatedColumnSum, TheFinishAddsSixteenLanesOfSlotsInOrder) {
  const int64_t slots = 70, dim = 40;
  const std::vector<float> partial = spread_values<float>(slots * dim, 11);
  std::vector<float> want(static_cast<size_t>(dim));
  for (int64_t c = 0; c < dim; ++c) {
    float t = 0.0f;
    for (int64_t lane = 0; lane < 16; ++lane) {
      float a = 0.0f;
      for (int64_t s = lane; s < slots; s += 16) a += partial[static_cast<size_t>(s * dim + c)];
      t += a;
    }
    want[static_cast<size_t>(c)] = t;
  }
  EXPECT_EQ(finished<float>({partial}, slots, dim)[0], want);
  const std::vector<BFloat16> rounded = finished<BFloat16>({partial}, slots, dim)[0];
  for (int64_t c = 0; c < dim; ++c)
    EXPECT_EQ(rounded[static_cast<size_t>(c)].bits, float_to_bf16_bits(want[static_cast<size_t>(c)])) << c;
}

TEST(EmulatedColumnSum, TheFinishOfTwoSumsInOneLaunchGivesEachItsOwnBits) {
  const int64_t slots = 1024, dim = 256;
  const std::vector<float> w = spread_values<float>(slots * dim, 12), b = spread_values<float>(slots * dim, 13);
  const auto both = finished<float>({w, b}, slots, dim);
  EXPECT_EQ(both[0], finished<float>({w}, slots, dim)[0]);
  EXPECT_EQ(both[1], finished<float>({b}, slots, dim)[0]);
  EXPECT_NE(both[0], both[1]);
}

}  // namespace
}  // namespace tandem::kernels
