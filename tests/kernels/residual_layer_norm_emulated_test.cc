// TANDEM_ADD_LAYER_NORM=fused's device code (residual_layer_norm_*_kernel in
// kernels/cuda/layer_norm_kernels.cuh) run on the CPU under
// tests/testing/warp_emulator.h, against the separate kernels it replaces
// (bias_dropout_add's, then the layer norm's; backward, the layer norm's, then
// bias_dropout_add's), launched with the grids and blocks the CUDA launchers
// use, bit for bit: the sum s, the output, mean and rstd; the gradients of s
// (the residual's) and of the branch, and the partial sums of the layer norm's
// weight and bias and of the branch's bias (TANDEM_COLUMN_SUM=thread, whose
// order the fused kernels share), with one_row's and multi_row's kernels, in
// f32, bf16 and f16, at widths with and without whole 16-byte vectors, with
// dropout (its step count read from memory) and without.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/bias_dropout_add_kernels.cuh"
#include "kernels/cuda/layer_norm_kernels.cuh"
#include "tests/testing/element_values.h"

namespace tandem::kernels::layer_norm_detail {
namespace {

using testing::as_element;
using testing::bit_patterns;
using testing::spread_values;

struct Shape {
  int64_t rows, dim;
};

constexpr uint64_t kSeed = 21, kCall = 3;
constexpr int64_t kStep = 4;
constexpr float kEps = 1e-5f;

DropoutMask mask(float p) { return dropout_mask(p, kSeed, kCall, &kStep); }

template <class T>
struct Inputs {
  std::vector<T> x, bias, residual, dy;
  std::vector<float> w, b;
  explicit Inputs(Shape s)
      : x(spread_values<T>(s.rows * s.dim, 1)), bias(spread_values<T>(s.dim, 2)),
        residual(spread_values<T>(s.rows * s.dim, 3, 0.5f)), dy(spread_values<T>(s.rows * s.dim, 4)),
        w(spread_values<float>(s.dim, 5, 1.0f)), b(spread_values<float>(s.dim, 6)) {}
};

// Every result, as bit patterns: forward s, y, mean, rstd; backward ds, dbranch (empty when p = 0),
// and the partial sums of dweight, dbias and dbranch_bias.
using Results = std::vector<std::vector<uint32_t>>;

template <class T>
constexpr int kWide = 16 / static_cast<int>(sizeof(T));

// The vector width the launchers pick for rows of `dim` (the test's buffers are aligned).
template <class T>
int width(int64_t dim) {
  return dim % kWide<T> == 0 ? kWide<T> : 1;
}

template <class T>
std::vector<T> nans(size_t n) {
  return std::vector<T>(n, as_element<T>(std::nanf("")));
}

// bias_dropout_add_forward_cuda's launch with a bias and a residual.
template <class T, int V>
void bias_dropout_add_forward(const Inputs<T>& in, Shape s, float p, std::vector<T>& sum) {
  const dim3 block = column_block(s.dim / V, s.rows);
  const dim3 grid(blocks_for(s.dim / V, block.x, INT32_MAX),
                  blocks_for(s.rows, block.y * bias_dropout_add_detail::kRowBatch, 65535));
  warp_emulator::launch(grid.x, grid.y, warp_emulator::Dim3{block.x, block.y, 1}, 0, [&] {
    bias_dropout_add_detail::forward_kernel<T, V>(in.x.data(), in.bias.data(), in.residual.data(), sum.data(), s.rows,
                                                  s.dim, mask(p));
  });
}

// bias_dropout_add_backward_cuda's pass 1 with a bias gradient (thread walk).
template <class T, int V>
void bias_dropout_add_backward(const std::vector<T>& ds, Shape s, float p, T* dbranch, std::vector<float>& partial) {
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  const ColumnSumLaunch l = column_sum_launch(s.dim / V, s.rows, slots, false);
  warp_emulator::launch(l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1}, 0, [&] {
    bias_dropout_add_detail::backward_kernel<T, V, bias_dropout_add_detail::kRowBatch, false>(
        ds.data(), dbranch, partial.data(), s.rows, s.dim, slots, mask(p));
  });
}

// The separate kernels (Fused = false) or the fused ones, forward then backward, with layer_norm.cu's
// launch of the one_row (MultiRow = false) or multi_row kernels.
template <class T, int V, bool Fused, bool MultiRow>
Results run(const Inputs<T>& in, Shape s, float p) {
  const size_t n = in.x.size();
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  std::vector<T> sum = nans<T>(n), y = nans<T>(n), ds = nans<T>(n), dbranch = nans<T>(p > 0 ? n : 0);
  std::vector<float> mean(static_cast<size_t>(s.rows), std::nanf("")), rstd = mean;
  std::vector<float> pw(static_cast<size_t>(slots * s.dim), std::nanf("")), pb = pw, pbb = pw;
  T* pdbranch = p > 0 ? dbranch.data() : nullptr;
  const Layout l = layout_for(s.dim, V);
  const warp_emulator::Dim3 block{static_cast<unsigned>(l.tx), static_cast<unsigned>(l.ty), 1};
  with_layout<T>(l, [&]<int VV, int C>() {
    if constexpr (VV == V) {
      constexpr int R = MultiRow ? multi_row_rows(V * C) : 1, D = MultiRow ? multi_row_buffers(V * C) : 2;
      const unsigned forward_blocks = static_cast<unsigned>((s.rows + l.ty * R - 1) / (l.ty * R));
      const unsigned backward_blocks = static_cast<unsigned>((slots + l.ty - 1) / l.ty);
      const size_t shared = kGroupScratchFloats * sizeof(float);
      if constexpr (Fused) {
        warp_emulator::launch(forward_blocks, 1, block, shared, [&] {
          residual_layer_norm_forward_kernel<T, V, C, R>(in.x.data(), in.w.data(), in.b.data(), true, y.data(),
                                                         mean.data(), rstd.data(), s.rows, s.dim, kEps,
                                                         ResidualIn<T>{in.residual.data(), in.bias.data(), sum.data(),
                                                                       mask(p)});
        });
        warp_emulator::launch(backward_blocks, 1, block, shared, [&] {
          residual_layer_norm_backward_kernel<T, V, C, D>(in.dy.data(), sum.data(), in.w.data(), true, mean.data(),
                                                          rstd.data(), ds.data(), pw.data(), pb.data(), s.rows, s.dim,
                                                          slots, mask(p), pdbranch, pbb.data());
        });
      } else {
        bias_dropout_add_forward<T, V>(in, s, p, sum);
        warp_emulator::launch(forward_blocks, 1, block, shared, [&] {
          layer_norm_forward_kernel<T, V, C, R>(sum.data(), in.w.data(), in.b.data(), true, y.data(), mean.data(),
                                                rstd.data(), s.rows, s.dim, kEps);
        });
        warp_emulator::launch(backward_blocks, 1, block, shared, [&] {
          layer_norm_backward_kernel<T, V, C, D>(in.dy.data(), sum.data(), in.w.data(), true, mean.data(),
                                                 rstd.data(), ds.data(), pw.data(), pb.data(), s.rows, s.dim, slots);
        });
        bias_dropout_add_backward<T, V>(ds, s, p, pdbranch, pbb);
      }
    }
  });
  return {bit_patterns(sum), bit_patterns(y),  bit_patterns(mean), bit_patterns(rstd), bit_patterns(ds),
          bit_patterns(dbranch), bit_patterns(pw), bit_patterns(pb),   bit_patterns(pbb)};
}

// 100 x 256: whole vectors, several rows per block and a partial slot; 12 x 1024: a block row per
// row; 33 x 17 and 5 x 3: the scalar kernels, fewer rows than a slot.
const Shape kShapes[] = {{100, 256}, {12, 1024}, {33, 17}, {5, 3}};

const char* const kNames[] = {"sum", "output", "mean", "rstd", "sum gradient", "branch gradient",
                              "weight partials", "bias partials", "branch bias partials"};

template <class T, bool MultiRow>
void expect_fused_gives_the_separate_bits() {
  for (Shape s : kShapes)
    for (float p : {0.2f, 0.0f}) {
      SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.dim) + ", p " + std::to_string(p) +
                   (MultiRow ? ", multi_row" : ", one_row"));
      const Inputs<T> in(s);
      Results fused, separate;
      const auto both = [&]<int V>() {
        fused = run<T, V, true, MultiRow>(in, s, p);
        separate = run<T, V, false, MultiRow>(in, s, p);
      };
      if (width<T>(s.dim) == kWide<T>) both.template operator()<kWide<T>>();
      else both.template operator()<1>();
      ASSERT_EQ(fused.size(), separate.size());
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], separate[i]) << kNames[i];
    }
}

TEST(EmulatedResidualLayerNorm, TheFusedKernelsGiveTheSeparateKernelsBitsWithOneRowsKernels) {
  expect_fused_gives_the_separate_bits<float, false>();
  expect_fused_gives_the_separate_bits<BFloat16, false>();
  expect_fused_gives_the_separate_bits<Half, false>();
}

TEST(EmulatedResidualLayerNorm, TheFusedKernelsGiveTheSeparateKernelsBitsWithMultiRowsKernels) {
  expect_fused_gives_the_separate_bits<float, true>();
  expect_fused_gives_the_separate_bits<BFloat16, true>();
}

// Dropout takes effect: about p of the sums are the residual alone (the branch dropped), and the
// others differ from the sums without dropout (the branch scaled by the inverse keep rate).
TEST(EmulatedResidualLayerNorm, DropoutDropsAboutPOfTheBranchAndScalesTheRest) {
  const Shape s{100, 256};
  const Inputs<float> in(s);
  const Results with = run<float, 4, true, false>(in, s, 0.2f), without = run<float, 4, true, false>(in, s, 0.0f);
  const std::vector<uint32_t> residual = bit_patterns(in.residual);
  size_t dropped = 0, scaled = 0;
  for (size_t i = 0; i < with[0].size(); ++i) {
    if (with[0][i] == residual[i]) ++dropped;
    else scaled += with[0][i] != without[0][i];
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(residual.size()), 0.2, 0.02);
  EXPECT_GT(scaled, residual.size() * 3 / 4);
}

}  // namespace
}  // namespace tandem::kernels::layer_norm_detail
