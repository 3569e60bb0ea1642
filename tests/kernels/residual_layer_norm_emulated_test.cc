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
// dropout (its step count read from memory) and without. With the lanes
// backward (TANDEM_LAYER_NORM=lanes) the branch bias's partial sums follow the
// lanes kernel's group order instead, which no separate kernel shares but
// TANDEM_COLUMN_SUM=block's where a block has 8 groups: they are checked
// against that order written out on the host, and against the block walk there.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
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

// bias_dropout_add_backward_cuda's pass 1 with a bias gradient (TANDEM_COLUMN_SUM's thread walk, or
// with PerBlock its block walk).
template <class T, int V, bool PerBlock = false>
void bias_dropout_add_backward(const std::vector<T>& ds, Shape s, float p, T* dbranch, std::vector<float>& partial) {
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  const ColumnSumLaunch l = column_sum_launch(s.dim / V, s.rows, slots, PerBlock);
  const size_t shared = PerBlock ? kColumnSumSubRows * 8 * 32 * sizeof(float) : 0;
  warp_emulator::launch(l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1}, shared, [&] {
    bias_dropout_add_detail::backward_kernel<T, V, bias_dropout_add_detail::kRowBatch, PerBlock>(
        ds.data(), dbranch, partial.data(), s.rows, s.dim, slots, mask(p));
  });
}

// TANDEM_LAYER_NORM's kernels: the forward is one_row's for lanes.
enum class Walk { OneRow, MultiRow, Lanes };

const char* name(Walk w) { return w == Walk::OneRow ? "one_row" : w == Walk::MultiRow ? "multi_row" : "lanes"; }

// The separate kernels (Fused = false) or the fused ones, forward then backward, with layer_norm.cu's
// launch of the walk's kernels. With lanes, the separate bias_dropout_add backward takes the block walk.
template <class T, int V, bool Fused, Walk W>
Results run(const Inputs<T>& in, Shape s, float p) {
  constexpr bool MultiRow = W == Walk::MultiRow, Lanes = W == Walk::Lanes;
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
      const unsigned backward_blocks = static_cast<unsigned>(Lanes ? slots : (slots + l.ty - 1) / l.ty);
      const size_t shared = kGroupScratchFloats * sizeof(float);
      const size_t backward_shared = (Lanes ? kLanesSharedFloats : kGroupScratchFloats) * sizeof(float);
      if constexpr (Fused) {
        warp_emulator::launch(forward_blocks, 1, block, shared, [&] {
          residual_layer_norm_forward_kernel<T, V, C, R>(in.x.data(), in.w.data(), in.b.data(), true, y.data(),
                                                         mean.data(), rstd.data(), s.rows, s.dim, kEps,
                                                         ResidualIn<T>{in.residual.data(), in.bias.data(), sum.data(),
                                                                       mask(p)});
        });
        warp_emulator::launch(backward_blocks, 1, block, backward_shared, [&] {
          if constexpr (Lanes)
            residual_layer_norm_backward_lanes_kernel<T, V, C>(in.dy.data(), sum.data(), in.w.data(), true,
                                                               mean.data(), rstd.data(), ds.data(), pw.data(),
                                                               pb.data(), s.rows, s.dim, slots, mask(p), pdbranch,
                                                               pbb.data());
          else
            residual_layer_norm_backward_kernel<T, V, C, D>(in.dy.data(), sum.data(), in.w.data(), true, mean.data(),
                                                            rstd.data(), ds.data(), pw.data(), pb.data(), s.rows,
                                                            s.dim, slots, mask(p), pdbranch, pbb.data());
        });
      } else {
        bias_dropout_add_forward<T, V>(in, s, p, sum);
        warp_emulator::launch(forward_blocks, 1, block, shared, [&] {
          layer_norm_forward_kernel<T, V, C, R>(sum.data(), in.w.data(), in.b.data(), true, y.data(), mean.data(),
                                                rstd.data(), s.rows, s.dim, kEps);
        });
        warp_emulator::launch(backward_blocks, 1, block, backward_shared, [&] {
          if constexpr (Lanes)
            layer_norm_backward_lanes_kernel<T, V, C>(in.dy.data(), sum.data(), in.w.data(), true, mean.data(),
                                                      rstd.data(), ds.data(), pw.data(), pb.data(), s.rows, s.dim,
                                                      slots);
          else
            layer_norm_backward_kernel<T, V, C, D>(in.dy.data(), sum.data(), in.w.data(), true, mean.data(),
                                                   rstd.data(), ds.data(), pw.data(), pb.data(), s.rows, s.dim, slots);
        });
        bias_dropout_add_backward<T, V, Lanes>(ds, s, p, pdbranch, pbb);
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

constexpr size_t kBranchBiasPartials = 8;

template <class T, Walk W>
void expect_fused_gives_the_separate_bits() {
  for (Shape s : kShapes)
    for (float p : {0.2f, 0.0f}) {
      SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.dim) + ", p " + std::to_string(p) + ", " +
                   name(W));
      const Inputs<T> in(s);
      Results fused, separate;
      const auto both = [&]<int V>() {
        fused = run<T, V, true, W>(in, s, p);
        separate = run<T, V, false, W>(in, s, p);
      };
      if (width<T>(s.dim) == kWide<T>) both.template operator()<kWide<T>>();
      else both.template operator()<1>();
      ASSERT_EQ(fused.size(), separate.size());
      for (size_t i = 0; i < fused.size(); ++i)
        if (W != Walk::Lanes || i != kBranchBiasPartials) {
          EXPECT_EQ(fused[i], separate[i]) << kNames[i];
        }
    }
}

TEST(EmulatedResidualLayerNorm, TheFusedKernelsGiveTheSeparateKernelsBitsWithOneRowsKernels) {
  expect_fused_gives_the_separate_bits<float, Walk::OneRow>();
  expect_fused_gives_the_separate_bits<BFloat16, Walk::OneRow>();
  expect_fused_gives_the_separate_bits<Half, Walk::OneRow>();
}

TEST(EmulatedResidualLayerNorm, TheFusedKernelsGiveTheSeparateKernelsBitsWithMultiRowsKernels) {
  expect_fused_gives_the_separate_bits<float, Walk::MultiRow>();
  expect_fused_gives_the_separate_bits<BFloat16, Walk::MultiRow>();
}

// Everything but the branch bias's partial sums (the next tests): s, y, the statistics, the gradients
// of s and of the branch, and the layer norm's parameter partials are the separate lanes kernel's.
TEST(EmulatedResidualLayerNorm, TheFusedLanesKernelGivesTheSeparateLanesKernelsBits) {
  expect_fused_gives_the_separate_bits<float, Walk::Lanes>();
  expect_fused_gives_the_separate_bits<BFloat16, Walk::Lanes>();
  expect_fused_gives_the_separate_bits<Half, Walk::Lanes>();
}

// The value a T with these bits holds (a result of bit_patterns).
template <class T>
float value_of(uint32_t bits) {
  if constexpr (std::is_same_v<T, BFloat16>) return bf16_bits_to_float(static_cast<uint16_t>(bits));
  else if constexpr (std::is_same_v<T, Half>) return f16_bits_to_float(static_cast<uint16_t>(bits));
  else return bits_float(bits);
}

// The branch's gradient as bias_dropout_add's backward adds it: ds (bit patterns of T) as stored, times
// the keep factor in f32 (dropout_mask.h's decisions), not rounded to T.
template <class T>
std::vector<float> branch_gradient(const std::vector<uint32_t>& ds, float p) {
  const uint32_t threshold = dropout_threshold(p);
  const uint64_t subsequence = dropout_subsequence(kCall, &kStep);
  std::vector<float> g(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) {
    const bool keep = dropout_keep(kSeed, subsequence, i, threshold);
    g[i] = value_of<T>(ds[i]) * (keep ? dropout_keep_scale(threshold) : 0.0f);
  }
  return g;
}

// The lanes order of a slot's column sums of g (layer_norm_kernels.cuh): the slot's rows
// slot + i * slots are dealt to the block's `groups` groups, row i to group i % groups, which adds its
// rows in order of i from 0; the slot's sum is 0 + group 0 + group 1 + ..., all in f32.
std::vector<float> lanes_order_sums(const std::vector<float>& g, Shape s, int64_t groups) {
  const int64_t slots = column_sum_slots(s.rows, s.dim);
  std::vector<float> out(static_cast<size_t>(slots * s.dim));
  for (int64_t slot = 0; slot < slots; ++slot)
    for (int64_t col = 0; col < s.dim; ++col) {
      float total = 0.0f;
      for (int64_t group = 0; group < groups; ++group) {
        float part = 0.0f;
        for (int64_t row = slot + group * slots; row < s.rows; row += groups * slots)
          part += g[static_cast<size_t>(row * s.dim + col)];
        total += part;
      }
      out[static_cast<size_t>(slot * s.dim + col)] = total;
    }
  return out;
}

template <class T>
void expect_lanes_branch_bias_in_lanes_order(bool* saw_eight_groups) {
  for (Shape s : kShapes)
    for (float p : {0.2f, 0.0f}) {
      SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.dim) + ", p " + std::to_string(p));
      const Inputs<T> in(s);
      const int v = width<T>(s.dim);
      const Layout l = layout_for(s.dim, v);
      Results fused, separate;
      const auto both = [&]<int V>() {
        fused = run<T, V, true, Walk::Lanes>(in, s, p);
        separate = run<T, V, false, Walk::Lanes>(in, s, p);
      };
      if (v == kWide<T>) both.template operator()<kWide<T>>();
      else both.template operator()<1>();
      const std::vector<float> sums = lanes_order_sums(branch_gradient<T>(separate[4], p), s, l.ty);
      EXPECT_EQ(fused[kBranchBiasPartials], bit_patterns(sums));
      if (l.ty == kColumnSumSubRows) {
        *saw_eight_groups = true;
        EXPECT_EQ(fused[kBranchBiasPartials], separate[kBranchBiasPartials]) << "the block walk's order";
      }
    }
}

TEST(EmulatedResidualLayerNorm, TheFusedLanesKernelAddsTheBranchBiasInTheLanesOrder) {
  bool saw_eight_groups = false;
  expect_lanes_branch_bias_in_lanes_order<float>(&saw_eight_groups);
  expect_lanes_branch_bias_in_lanes_order<BFloat16>(&saw_eight_groups);
  EXPECT_TRUE(saw_eight_groups) << "no shape compared against TANDEM_COLUMN_SUM=block";
}

// Dropout takes effect: about p of the sums are the residual alone (the branch dropped), and the
// others differ from the sums without dropout (the branch scaled by the inverse keep rate).
TEST(EmulatedResidualLayerNorm, DropoutDropsAboutPOfTheBranchAndScalesTheRest) {
  const Shape s{100, 256};
  const Inputs<float> in(s);
  const Results with = run<float, 4, true, Walk::OneRow>(in, s, 0.2f),
                without = run<float, 4, true, Walk::OneRow>(in, s, 0.0f);
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
