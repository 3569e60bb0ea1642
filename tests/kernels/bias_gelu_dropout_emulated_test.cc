// TANDEM_GELU_DROPOUT=fused's device code (kernels/cuda/bias_gelu_kernels.cuh)
// run on the CPU under tests/testing/warp_emulator.h, against the separate
// kernels it replaces (bias + GELU, then dropout's: bias_dropout_add_kernels.cuh),
// launched with the grids and blocks the CUDA launchers use, bit for bit: the
// forward's output, and the backward's input gradient and bias-gradient partial
// sums under both column-sum walks, in f32, bf16 and f16, at widths with and
// without whole 16-byte vectors, with the step count read from memory as a
// captured step does. And the keep mask against the CPU op's: the fused
// forward's, and the dropout kernel's at 16-byte vectors of every dtype (8
// decisions per Philox block in 16 bits, half a block in f32) and at single
// elements. And saved keep bits (TANDEM_DROPOUT_KEEP=saved): the forward that
// saves them stores every block's byte as dropout_mask.h defines it, with the
// recomputing forward's output, and the backward that reads them gives the
// recomputing backward's bits without computing any block. And the backward
// without a bias gradient (TANDEM_BIAS_GRADIENT=gemm's rows walk): the column
// walk's input gradient, bit for bit, in each of those three forms.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <cstdint>

// Counts the Philox blocks the device code computes for dropout (dropout_factors.cuh's hook).
inline uint64_t philox_blocks = 0;
#define DROPOUT_COUNT_PHILOX() (++::philox_blocks)

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/bias_dropout_add_kernels.cuh"
#include "kernels/cuda/bias_gelu_kernels.cuh"
#include "kernels/gelu.h"
#include "tests/testing/element_values.h"

namespace tandem::kernels {
namespace {

using testing::as_double;
using testing::bit_patterns;
using testing::spread_values;

struct Shape {
  int64_t rows, dim;
};

constexpr float kP = 0.3f;
constexpr uint64_t kSeed = 99, kCall = 5;
constexpr int64_t kStep = 7;  // the subsequence is (kStep << 16) | kCall, kStep read from memory

DropoutMask mask() { return dropout_mask(kP, kSeed, kCall, &kStep); }

template <class T>
constexpr int kWide = 16 / static_cast<int>(sizeof(T));

// The launchers' choice of vector width: 16 bytes when rows of `dim` elements allow it (the test's
// vectors are aligned).
template <class T>
bool wide(int64_t dim) {
  return dim % kWide<T> == 0;
}

// Calls f.template operator()<V>() with the width the launchers would pick for rows of `dim`.
template <class T, class F>
void at_width(int64_t dim, F&& f) {
  if (wide<T>(dim)) f.template operator()<kWide<T>>();
  else f.template operator()<1>();
}

// bias_gelu_forward_cuda's launch (Dropout: bias_gelu_dropout_forward_cuda's).
template <class T, bool Dropout>
std::vector<T> bias_gelu_forward(const std::vector<T>& x, const std::vector<T>& b, Shape s, GeluApproximation a) {
  std::vector<T> y(x.size(), testing::as_element<T>(std::nanf("")));
  at_width<T>(s.dim, [&]<int V>() {
    const dim3 block = column_block(s.dim / V, s.rows);
    const dim3 grid(blocks_for(s.dim / V, block.x, INT32_MAX),
                    blocks_for(s.rows, block.y * bias_gelu_detail::kRowBatch, 65535));
    warp_emulator::launch(grid.x, grid.y, warp_emulator::Dim3{block.x, block.y, 1}, 0, [&] {
      if constexpr (Dropout)
        bias_gelu_detail::bias_gelu_dropout_forward_kernel<T, V>(x.data(), b.data(), y.data(), s.rows, s.dim, a, mask());
      else
        bias_gelu_detail::bias_gelu_forward_kernel<T, V>(x.data(), b.data(), y.data(), s.rows, s.dim, a);
    });
  });
  return y;
}

// bias_gelu_dropout_forward_cuda's launch with keep_out: the output, and the keep bytes (starting as
// `fill`, so that a byte no thread stores keeps it).
template <class T>
std::vector<T> bias_gelu_forward_saving_keep(const std::vector<T>& x, const std::vector<T>& b, Shape s,
                                             GeluApproximation a, std::vector<uint8_t>& keep, uint8_t fill) {
  std::vector<T> y(x.size(), testing::as_element<T>(std::nanf("")));
  keep.assign(static_cast<size_t>(dropout_keep_bytes(s.rows * s.dim)), fill);
  at_width<T>(s.dim, [&]<int V>() {
    const dim3 block = column_block(s.dim / V, s.rows);
    const dim3 grid(blocks_for(s.dim / V, block.x, INT32_MAX),
                    blocks_for(s.rows, block.y * bias_gelu_detail::kRowBatch, 65535));
    warp_emulator::launch(grid.x, grid.y, warp_emulator::Dim3{block.x, block.y, 1}, 0, [&] {
      bias_gelu_detail::bias_gelu_dropout_forward_saving_keep_kernel<T, V>(x.data(), b.data(), y.data(), s.rows, s.dim,
                                                                         a, mask(), keep.data());
    });
  });
  return y;
}

// bias_dropout_add_forward_cuda's launch for plain dropout: no bias or residual, one long row.
template <class T>
std::vector<T> dropout_forward(const std::vector<T>& h) {
  const int64_t n = static_cast<int64_t>(h.size());
  std::vector<T> y(h.size(), testing::as_element<T>(std::nanf("")));
  at_width<T>(n, [&]<int V>() {
    const dim3 block = column_block(n / V, 1);
    const dim3 grid(blocks_for(n / V, block.x, INT32_MAX), blocks_for(1, block.y * bias_dropout_add_detail::kRowBatch, 65535));
    warp_emulator::launch(grid.x, grid.y, warp_emulator::Dim3{block.x, block.y, 1}, 0, [&] {
      bias_dropout_add_detail::forward_kernel<T, V>(h.data(), nullptr, nullptr, y.data(), 1, n, mask());
    });
  });
  return y;
}

// bias_dropout_add_backward_cuda's launch for plain dropout (no bias gradient: one long row, the
// default batched kernel).
template <class T>
std::vector<T> dropout_backward(const std::vector<T>& dy) {
  const int64_t n = static_cast<int64_t>(dy.size()), slots = column_sum_slots(1, n);
  std::vector<T> dx(dy.size(), testing::as_element<T>(std::nanf("")));
  at_width<T>(n, [&]<int V>() {
    const ColumnSumLaunch l = column_sum_launch(n / V, 1, slots, false);
    warp_emulator::launch(l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1}, 0, [&] {
      bias_dropout_add_detail::backward_kernel<T, V, bias_dropout_add_detail::kRowBatch, false>(
          dy.data(), dx.data(), nullptr, 1, n, slots, mask());
    });
  });
  return dx;
}

struct Backward {
  std::vector<uint32_t> dx, partial;  // bit patterns
};

// bias_gelu_backward_cuda's pass 1 (Dropout: bias_gelu_dropout_backward_cuda's; with keep, reading
// those bytes) under `walk`: the input gradient (none when !with_dx) and the bias gradient's partial sums.
template <class T, bool PerBlock, bool Dropout>
Backward bias_gelu_backward(const std::vector<T>& dy, const std::vector<T>& x, const std::vector<T>& b, Shape s,
                            GeluApproximation a, bool with_dx, const std::vector<uint8_t>* keep = nullptr) {
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  std::vector<T> dx(with_dx ? x.size() : 0, testing::as_element<T>(std::nanf("")));
  std::vector<float> partial(static_cast<size_t>(slots * s.dim), std::nanf(""));
  T* pdx = with_dx ? dx.data() : nullptr;
  at_width<T>(s.dim, [&]<int V>() {
    const ColumnSumLaunch l = column_sum_launch(s.dim / V, s.rows, slots, PerBlock);
    warp_emulator::launch(l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1},
                          kColumnSumSubRows * 8 * 32 * sizeof(float), [&] {
                            if constexpr (Dropout) {
                              if (keep)
                                bias_gelu_detail::bias_gelu_dropout_backward_saved_keep_kernel<T, V, PerBlock>(
                                    dy.data(), x.data(), b.data(), pdx, partial.data(), s.rows, s.dim, slots, a,
                                    mask(), keep->data());
                              else
                                bias_gelu_detail::bias_gelu_dropout_backward_kernel<T, V, PerBlock>(
                                    dy.data(), x.data(), b.data(), pdx, partial.data(), s.rows, s.dim, slots, a,
                                    mask());
                            }
                            else
                              bias_gelu_detail::bias_gelu_backward_kernel<T, V, PerBlock>(
                                  dy.data(), x.data(), b.data(), pdx, partial.data(), s.rows, s.dim, slots, a);
                          });
  });
  return {bit_patterns(dx), bit_patterns(partial)};
}

// bias_gelu_backward_cuda without a bias gradient under TANDEM_BIAS_GRADIENT=gemm (Dropout: with
// dropout; with keep, reading those bytes): the rows walk, launched as the forward is. Its dx bits.
template <class T, bool Dropout>
std::vector<uint32_t> bias_gelu_backward_rows(const std::vector<T>& dy, const std::vector<T>& x,
                                              const std::vector<T>& b, Shape s, GeluApproximation a,
                                              const std::vector<uint8_t>* keep = nullptr) {
  std::vector<T> dx(x.size(), testing::as_element<T>(std::nanf("")));
  at_width<T>(s.dim, [&]<int V>() {
    const dim3 block = column_block(s.dim / V, s.rows);
    const dim3 grid(blocks_for(s.dim / V, block.x, INT32_MAX),
                    blocks_for(s.rows, block.y * bias_gelu_detail::kRowBatch, 65535));
    warp_emulator::launch(grid.x, grid.y, warp_emulator::Dim3{block.x, block.y, 1}, 0, [&] {
      if constexpr (Dropout) {
        if (keep)
          bias_gelu_detail::bias_gelu_dropout_backward_rows_saved_keep_kernel<T, V>(
              dy.data(), x.data(), b.data(), dx.data(), s.rows, s.dim, a, mask(), keep->data());
        else
          bias_gelu_detail::bias_gelu_dropout_backward_rows_kernel<T, V>(dy.data(), x.data(), b.data(), dx.data(),
                                                                         s.rows, s.dim, a, mask());
      } else
        bias_gelu_detail::bias_gelu_backward_rows_kernel<T, V>(dy.data(), x.data(), b.data(), dx.data(), s.rows,
                                                               s.dim, a);
    });
  });
  return bit_patterns(dx);
}

// 100 x 256: whole vectors, several slots; 64 x 1024: 128 vectors of a row, the FFN's width; 33 x 17:
// the scalar kernels (and a long row of 561 for the separate dropout); 5 x 3: fewer rows than a slot.
const Shape kShapes[] = {{100, 256}, {64, 1024}, {33, 17}, {5, 3}};

std::string describe(Shape s, GeluApproximation a) {
  return std::to_string(s.rows) + " x " + std::to_string(s.dim) + (a == GeluApproximation::Tanh ? ", tanh" : ", erf");
}

template <class T>
void expect_fused_forward_gives_the_separate_bits() {
  for (Shape s : kShapes)
    for (auto a : {GeluApproximation::None, GeluApproximation::Tanh}) {
      SCOPED_TRACE(describe(s, a));
      const std::vector<T> x = spread_values<T>(s.rows * s.dim, 1, 0.5f), b = spread_values<T>(s.dim, 2);
      const std::vector<T> separate = dropout_forward(bias_gelu_forward<T, false>(x, b, s, a));
      const std::vector<T> fused = bias_gelu_forward<T, true>(x, b, s, a);
      EXPECT_EQ(bit_patterns(fused), bit_patterns(separate));
    }
}

TEST(EmulatedBiasGeluDropout, TheFusedForwardGivesTheSeparateKernelsBits) {
  expect_fused_forward_gives_the_separate_bits<float>();
  expect_fused_forward_gives_the_separate_bits<BFloat16>();
  expect_fused_forward_gives_the_separate_bits<Half>();
}

template <class T, bool PerBlock>
void expect_fused_backward_gives_the_separate_bits() {
  for (Shape s : kShapes)
    for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
      for (bool with_dx : {true, false}) {
        SCOPED_TRACE(describe(s, a) + (PerBlock ? ", block walk" : ", thread walk") + (with_dx ? "" : ", no dx"));
        const std::vector<T> x = spread_values<T>(s.rows * s.dim, 3, 0.5f), b = spread_values<T>(s.dim, 4);
        const std::vector<T> dy = spread_values<T>(s.rows * s.dim, 5);
        const Backward separate = bias_gelu_backward<T, PerBlock, false>(dropout_backward(dy), x, b, s, a, with_dx);
        const Backward fused = bias_gelu_backward<T, PerBlock, true>(dy, x, b, s, a, with_dx);
        EXPECT_EQ(fused.dx, separate.dx);
        EXPECT_EQ(fused.partial, separate.partial);
      }
}

TEST(EmulatedBiasGeluDropout, TheFusedBackwardGivesTheSeparateKernelsBitsInTheThreadWalk) {
  expect_fused_backward_gives_the_separate_bits<float, false>();
  expect_fused_backward_gives_the_separate_bits<BFloat16, false>();
  expect_fused_backward_gives_the_separate_bits<Half, false>();
}

TEST(EmulatedBiasGeluDropout, TheFusedBackwardGivesTheSeparateKernelsBitsInTheBlockWalk) {
  expect_fused_backward_gives_the_separate_bits<float, true>();
  expect_fused_backward_gives_the_separate_bits<BFloat16, true>();
  expect_fused_backward_gives_the_separate_bits<Half, true>();
}

// The kernels drop the elements the CPU op drops (kernels/dropout_mask.h on the same stream) and
// scale the others alike; the GELU's own values agree to f32 roundings (the CPU's f32 path is its
// vectorised kernel, not gelu_formula.h's erff).
TEST(EmulatedBiasGeluDropout, TheFusedForwardDropsWhatTheCpuOpDrops) {
  const Shape s{64, 256};
  const std::vector<float> x = spread_values<float>(s.rows * s.dim, 6, 0.5f), b = spread_values<float>(s.dim, 7);
  const std::vector<float> fused = bias_gelu_forward<float, true>(x, b, s, GeluApproximation::None);
  const Tensor cpu = bias_gelu_dropout(Tensor::from_vector(x, {s.rows, s.dim}), Tensor::from_vector(b, {s.dim}),
                                       GeluApproximation::None, kP, true, kSeed, (uint64_t{kStep} << 16) | kCall);
  const std::vector<double> want = cpu.to_double_vector();
  int dropped = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(fused[i] == 0.0f, want[i] == 0.0) << i;
    if (want[i] == 0.0) ++dropped;
    else EXPECT_NEAR(fused[i], want[i], 1e-6 * std::fabs(want[i])) << i;
  }
  EXPECT_GT(dropped, 0);
}

// The dropout kernel gives the CPU op's values bit for bit (one multiply by the same keep factor).
template <class T>
void expect_dropout_kernel_gives_the_cpu_ops_values(DType t, int64_t n) {
  SCOPED_TRACE(std::to_string(n) + " elements, " + std::string(dtype_name(t)));
  const std::vector<T> h = spread_values<T>(n, 8, 0.5f);
  const std::vector<T> y = dropout_forward(h);
  std::vector<double> hd(h.size());
  for (size_t i = 0; i < h.size(); ++i) hd[i] = as_double(h[i]);
  const Tensor cpu = dropout(Tensor::from_vector(hd, {n}, t), kP, true, kSeed, (uint64_t{kStep} << 16) | kCall);
  const std::vector<double> want = cpu.to_double_vector();
  int dropped = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(as_double(y[i]), want[i]) << "element " << i;
    dropped += want[i] == 0.0 && as_double(h[i]) != 0.0;
  }
  EXPECT_GT(dropped, n / 5);
}

TEST(EmulatedBiasGeluDropout, TheDropoutKernelGivesTheCpuOpsValuesAtEveryWidth) {
  for (int64_t n : {int64_t{4096}, int64_t{561}}) {  // 16-byte vectors; single elements
    expect_dropout_kernel_gives_the_cpu_ops_values<float>(DType::F32, n);
    expect_dropout_kernel_gives_the_cpu_ops_values<BFloat16>(DType::BF16, n);
    expect_dropout_kernel_gives_the_cpu_ops_values<Half>(DType::F16, n);
  }
}

// Saved keep bits. Every byte as dropout_mask.h defines it (bit k: element 8 * byte + k, the
// stream's decision), whichever 0x00 or 0xff the buffer held (so each byte was stored), and the output
// of the forward that does not save them.
template <class T>
void expect_saving_forward_stores_every_keep_byte() {
  const uint32_t threshold = dropout_threshold(kP);
  const uint64_t subsequence = dropout_subsequence(kCall, &kStep);
  for (Shape s : kShapes) {
    SCOPED_TRACE(describe(s, GeluApproximation::Tanh));
    const std::vector<T> x = spread_values<T>(s.rows * s.dim, 1, 0.5f), b = spread_values<T>(s.dim, 2);
    const std::vector<T> plain = bias_gelu_forward<T, true>(x, b, s, GeluApproximation::Tanh);
    std::vector<uint8_t> want(static_cast<size_t>(dropout_keep_bytes(s.rows * s.dim)));
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(dropout_keep8(kSeed, subsequence, i, threshold));
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}}) {
      std::vector<uint8_t> keep;
      const std::vector<T> y = bias_gelu_forward_saving_keep(x, b, s, GeluApproximation::Tanh, keep, fill);
      EXPECT_EQ(bit_patterns(y), bit_patterns(plain));
      EXPECT_EQ(keep, want) << "buffer filled with " << int{fill};
    }
  }
}

TEST(EmulatedBiasGeluDropoutSavedKeep, TheSavingForwardStoresEveryBlocksByteAndTheSameOutput) {
  expect_saving_forward_stores_every_keep_byte<float>();     // half a block a thread at 16-byte vectors
  expect_saving_forward_stores_every_keep_byte<BFloat16>();  // a block a thread
  expect_saving_forward_stores_every_keep_byte<Half>();
}

// The backward reading the forward's bytes gives the recomputing backward's bits, in both walks, and
// computes no Philox block (the emulator counts them).
template <class T, bool PerBlock>
void expect_reading_backward_gives_the_recomputed_bits() {
  for (Shape s : kShapes)
    for (bool with_dx : {true, false}) {
      SCOPED_TRACE(describe(s, GeluApproximation::None) + (PerBlock ? ", block walk" : ", thread walk") +
                   (with_dx ? "" : ", no dx"));
      const std::vector<T> x = spread_values<T>(s.rows * s.dim, 3, 0.5f), b = spread_values<T>(s.dim, 4);
      const std::vector<T> dy = spread_values<T>(s.rows * s.dim, 5);
      std::vector<uint8_t> keep;
      bias_gelu_forward_saving_keep(x, b, s, GeluApproximation::None, keep, 0x00);
      const uint64_t before_recomputing = philox_blocks;
      const Backward recomputed = bias_gelu_backward<T, PerBlock, true>(dy, x, b, s, GeluApproximation::None, with_dx);
      EXPECT_GT(philox_blocks, before_recomputing) << "the hook counts the recomputing backward's blocks";
      const uint64_t before_reading = philox_blocks;
      const Backward read = bias_gelu_backward<T, PerBlock, true>(dy, x, b, s, GeluApproximation::None, with_dx, &keep);
      EXPECT_EQ(philox_blocks, before_reading) << "the reading backward computes no block";
      EXPECT_EQ(read.dx, recomputed.dx);
      EXPECT_EQ(read.partial, recomputed.partial);
    }
}

TEST(EmulatedBiasGeluDropoutSavedKeep, TheReadingBackwardGivesTheRecomputedBitsInTheThreadWalk) {
  expect_reading_backward_gives_the_recomputed_bits<float, false>();
  expect_reading_backward_gives_the_recomputed_bits<BFloat16, false>();
  expect_reading_backward_gives_the_recomputed_bits<Half, false>();
}

TEST(EmulatedBiasGeluDropoutSavedKeep, TheReadingBackwardGivesTheRecomputedBitsInTheBlockWalk) {
  expect_reading_backward_gives_the_recomputed_bits<float, true>();
  expect_reading_backward_gives_the_recomputed_bits<BFloat16, true>();
}

// The backward takes its decisions from the bytes: inverted bytes give other gradients, zero where the
// stream keeps an element.
TEST(EmulatedBiasGeluDropoutSavedKeep, TheReadingBackwardUsesTheBytes) {
  const Shape s{64, 1024};
  const std::vector<BFloat16> x = spread_values<BFloat16>(s.rows * s.dim, 3, 0.5f), b = spread_values<BFloat16>(s.dim, 4);
  const std::vector<BFloat16> dy = spread_values<BFloat16>(s.rows * s.dim, 5);
  std::vector<uint8_t> keep;
  bias_gelu_forward_saving_keep(x, b, s, GeluApproximation::None, keep, 0x00);
  const Backward right = bias_gelu_backward<BFloat16, false, true>(dy, x, b, s, GeluApproximation::None, true, &keep);
  for (uint8_t& k : keep) k = static_cast<uint8_t>(~k);
  const Backward inverted = bias_gelu_backward<BFloat16, false, true>(dy, x, b, s, GeluApproximation::None, true, &keep);
  const auto zero = [](uint32_t bf16) { return (bf16 & 0x7fffu) == 0; };  // +0 or -0
  size_t swapped = 0;
  for (size_t i = 0; i < right.dx.size(); ++i) swapped += zero(right.dx[i]) != zero(inverted.dx[i]);
  EXPECT_GT(swapped, right.dx.size() * 9 / 10);
}

// The rows walk (no bias gradient) writes every element of dx with the column walk's bits: without
// dropout, with dropout recomputed, and reading saved keep bytes, where it computes no Philox block.
template <class T>
void expect_rows_walk_gives_the_column_walks_dx() {
  for (Shape s : kShapes)
    for (auto a : {GeluApproximation::None, GeluApproximation::Tanh}) {
      SCOPED_TRACE(describe(s, a));
      const std::vector<T> x = spread_values<T>(s.rows * s.dim, 3, 0.5f), b = spread_values<T>(s.dim, 4);
      const std::vector<T> dy = spread_values<T>(s.rows * s.dim, 5);
      EXPECT_EQ((bias_gelu_backward_rows<T, false>(dy, x, b, s, a)),
                (bias_gelu_backward<T, false, false>(dy, x, b, s, a, true).dx))
          << "without dropout";
      EXPECT_EQ((bias_gelu_backward_rows<T, true>(dy, x, b, s, a)),
                (bias_gelu_backward<T, false, true>(dy, x, b, s, a, true).dx))
          << "with dropout";
      std::vector<uint8_t> keep;
      bias_gelu_forward_saving_keep(x, b, s, a, keep, 0x00);
      const uint64_t before = philox_blocks;
      const std::vector<uint32_t> read = bias_gelu_backward_rows<T, true>(dy, x, b, s, a, &keep);
      EXPECT_EQ(philox_blocks, before) << "the reading rows walk computes no block";
      EXPECT_EQ(read, (bias_gelu_backward<T, false, true>(dy, x, b, s, a, true).dx)) << "reading saved keep bytes";
    }
}

TEST(EmulatedBiasGeluBackwardRows, GivesTheColumnWalksInputGradientBits) {
  expect_rows_walk_gives_the_column_walks_dx<float>();
  expect_rows_walk_gives_the_column_walks_dx<BFloat16>();
  expect_rows_walk_gives_the_column_walks_dx<Half>();
}

}  // namespace
}  // namespace tandem::kernels
