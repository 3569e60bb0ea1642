// The CUDA layer-norm kernels' device code (kernels/cuda/layer_norm_kernels.cuh)
// run on the CPU under tests/testing/warp_emulator.h, with the grids and blocks
// kernels/cuda/layer_norm.cu launches: the forward, and the backward's one_row,
// multi_row and lanes kernels, against a double-precision reference of the
// formulas, at both vector widths (the 16-byte path and the scalar one).
//
// The backward's kernels write per-slot partial sums of dweight and dbias; here
// they are added on the host in slot order (column_sum.cuh's finish pass is not
// emulated). Tolerances: f32 data agrees with the reference to summation order
// (relative 1e-5 of the largest value of a result); bf16 data is rounded once
// per output, so dx agrees to a bf16 ulp (2^-8 relative) plus that, and the f32
// column sums of bf16 inputs to the same 1e-5.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/layer_norm_kernels.cuh"
#include "tests/testing/element_values.h"

namespace tandem::kernels::layer_norm_detail {
namespace {

using testing::as_double;
using testing::as_element;
using testing::spread_values;

enum class Backward { OneRow, MultiRow, Lanes };

const char* name(Backward b) { return b == Backward::OneRow ? "one_row" : b == Backward::MultiRow ? "multi_row" : "lanes"; }

// x has a non-zero mean per row (offset 0.5), so centring matters.
struct Problem {
  int64_t rows, dim;
};

template <class T>
struct Inputs {
  std::vector<T> x, dy;
  std::vector<float> w, b;
  Inputs(Problem p)
      : x(spread_values<T>(p.rows * p.dim, 1, 0.5f)), dy(spread_values<T>(p.rows * p.dim, 2, 0.0f)),
        w(spread_values<float>(p.dim, 3, 1.0f)), b(spread_values<float>(p.dim, 4, 0.0f)) {}
};

struct Reference {
  std::vector<double> y, dx, dw, db;
};

template <class T>
Reference reference(const Inputs<T>& in, Problem p, double eps) {
  Reference r{std::vector<double>(in.x.size()), std::vector<double>(in.x.size()),
              std::vector<double>(static_cast<size_t>(p.dim)), std::vector<double>(static_cast<size_t>(p.dim))};
  for (int64_t i = 0; i < p.rows; ++i) {
    const auto at = [&](int64_t j) { return static_cast<size_t>(i * p.dim + j); };
    double mean = 0, var = 0;
    for (int64_t j = 0; j < p.dim; ++j) mean += as_double(in.x[at(j)]);
    mean /= static_cast<double>(p.dim);
    for (int64_t j = 0; j < p.dim; ++j) var += std::pow(as_double(in.x[at(j)]) - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(p.dim) + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < p.dim; ++j) {
      const double xhat = (as_double(in.x[at(j)]) - mean) * rstd, g = as_double(in.dy[at(j)]);
      r.y[at(j)] = xhat * in.w[static_cast<size_t>(j)] + in.b[static_cast<size_t>(j)];
      mg += g * in.w[static_cast<size_t>(j)];
      mgx += g * in.w[static_cast<size_t>(j)] * xhat;
      r.dw[static_cast<size_t>(j)] += g * xhat;
      r.db[static_cast<size_t>(j)] += g;
    }
    mg /= static_cast<double>(p.dim);
    mgx /= static_cast<double>(p.dim);
    for (int64_t j = 0; j < p.dim; ++j) {
      const double xhat = (as_double(in.x[at(j)]) - mean) * rstd;
      r.dx[at(j)] = rstd * (as_double(in.dy[at(j)]) * in.w[static_cast<size_t>(j)] - mg - xhat * mgx);
    }
  }
  return r;
}

// What the emulated kernels wrote: the forward's y, the backward's dx and its slots' partial sums
// (partial_w[slot * dim + col]), and those summed over the slots in slot order.
struct Emulated {
  std::vector<double> y, dx;
  std::vector<float> partial_w, partial_b;
  std::vector<double> dw, db;
};

// layer_norm.cu's launches, with the vector width V chosen here rather than by alignment; the
// parameters are f32 (w_f32). Shared memory starts as NaN, so every value a kernel reads must be written.
template <class T, int V>
Emulated emulate(const Inputs<T>& in, Problem p, Backward kernel, double eps,
                 warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
  const Layout l = layout_for(p.dim, V);
  const warp_emulator::Dim3 block{static_cast<unsigned>(l.tx), static_cast<unsigned>(l.ty), 1};
  const size_t n = in.x.size();
  std::vector<T> y(n, as_element<T>(std::nanf(""))), dx(n, as_element<T>(std::nanf("")));
  std::vector<float> mean(static_cast<size_t>(p.rows), std::nanf("")), rstd = mean;
  Emulated e;
  with_layout<T>(l, [&]<int VV, int C>() {
    if constexpr (VV == V) {
      warp_emulator::launch(
          static_cast<unsigned>((p.rows + l.ty - 1) / l.ty), 1, block, kGroupScratchFloats * sizeof(float),
          [&] {
            layer_norm_forward_kernel<T, V, C, 1>(in.x.data(), in.w.data(), in.b.data(), true, y.data(), mean.data(),
                                                  rstd.data(), p.rows, p.dim, static_cast<float>(eps));
          },
          schedule);
      const int64_t slots = column_sum_slots(p.rows, p.dim);
      e.partial_w.assign(static_cast<size_t>(slots * p.dim), std::nanf(""));
      e.partial_b = e.partial_w;
      const auto args = [&] { return std::tuple{in.dy.data(), in.x.data(), in.w.data(), true, mean.data(), rstd.data(), dx.data(), e.partial_w.data(), e.partial_b.data(), p.rows, p.dim, slots}; };
      if (kernel == Backward::Lanes) {
        warp_emulator::launch(
            static_cast<unsigned>(slots), 1, block, kLanesSharedFloats * sizeof(float),
            [&] { std::apply(layer_norm_backward_lanes_kernel<T, V, C>, args()); }, schedule);
      } else {
        auto launch = [&]<int D>() {
          warp_emulator::launch(
              static_cast<unsigned>((slots + l.ty - 1) / l.ty), 1, block, kGroupScratchFloats * sizeof(float),
              [&] { std::apply(layer_norm_backward_kernel<T, V, C, D>, args()); }, schedule);
        };
        if (kernel == Backward::MultiRow) launch.template operator()<multi_row_buffers(V * C)>();
        else launch.template operator()<2>();
      }
      e.dw.assign(static_cast<size_t>(p.dim), 0.0);
      e.db = e.dw;
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t j = 0; j < p.dim; ++j) {
          e.dw[static_cast<size_t>(j)] += e.partial_w[static_cast<size_t>(s * p.dim + j)];
          e.db[static_cast<size_t>(j)] += e.partial_b[static_cast<size_t>(s * p.dim + j)];
        }
    } else {
      FAIL() << "layout_for chose another vector width";
    }
  });
  for (const T& v : y) e.y.push_back(as_double(v));
  for (const T& v : dx) e.dx.push_back(as_double(v));
  return e;
}

// got agrees with want to `rel` of want's largest magnitude plus `ulp` of each value.
::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want, double rel,
                                 double ulp) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " values against " << want.size();
  double largest = 0;
  for (double v : want) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rel * largest + ulp * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " against " << want[i];
  return ::testing::AssertionSuccess();
}

template <class T>
constexpr double kUlp = std::is_same_v<T, BFloat16> ? 0x1p-8 : 0.0;

// Rows of one warp with 8 groups per block (256 at 16-byte bf16 vectors); of 2 and 4 warps; a
// partial last slot; one row; 16 values per thread (4096); a width that takes only the scalar
// kernels (33); and 1.
const Problem kProblems[] = {{100, 256}, {70, 768}, {67, 128}, {1, 64}, {9, 4096}, {45, 33}, {3, 1}};

template <class T, int V>
void expect_matches_reference(Backward kernel) {
  for (Problem p : kProblems) {
    if (V > 1 && (p.dim * static_cast<int64_t>(sizeof(T))) % 16 != 0) continue;  // no 16-byte path for this width
    SCOPED_TRACE(std::string(name(kernel)) + ", V = " + std::to_string(V) + ", " + std::to_string(p.rows) + " x " +
                 std::to_string(p.dim));
    const Inputs<T> in(p);
    const Reference r = reference(in, p, 1e-5);
    const Emulated e = emulate<T, V>(in, p, kernel, 1e-5);
    EXPECT_TRUE(close(e.y, r.y, 1e-5, kUlp<T>)) << "output";
    EXPECT_TRUE(close(e.dx, r.dx, 1e-5, kUlp<T>)) << "input gradient";
    EXPECT_TRUE(close(e.dw, r.dw, 1e-5, 0)) << "weight gradient";
    EXPECT_TRUE(close(e.db, r.db, 1e-5, 0)) << "bias gradient";
  }
}

TEST(EmulatedLayerNorm, OneRowMatchesTheReferenceAtBothWidths) {
  expect_matches_reference<float, 4>(Backward::OneRow);
  expect_matches_reference<float, 1>(Backward::OneRow);
  expect_matches_reference<BFloat16, 8>(Backward::OneRow);
  expect_matches_reference<BFloat16, 1>(Backward::OneRow);
}

TEST(EmulatedLayerNorm, MultiRowBackwardMatchesTheReferenceAtBothWidths) {
  expect_matches_reference<float, 4>(Backward::MultiRow);
  expect_matches_reference<BFloat16, 8>(Backward::MultiRow);
  expect_matches_reference<BFloat16, 1>(Backward::MultiRow);
}

TEST(EmulatedLayerNorm, LanesBackwardMatchesTheReferenceAtBothWidths) {
  expect_matches_reference<float, 4>(Backward::Lanes);
  expect_matches_reference<float, 1>(Backward::Lanes);
  expect_matches_reference<BFloat16, 8>(Backward::Lanes);
  expect_matches_reference<BFloat16, 1>(Backward::Lanes);
}

// Warps skewed as far apart as the barriers allow, either way round: a lane sum read from shared
// memory before its group wrote it, or group_sum2's scratch reused too early, would change the bits.
TEST(EmulatedLayerNorm, LanesGiveTheSameBitsWhicheverWarpRunsAhead) {
  for (Problem p : {Problem{100, 256}, Problem{70, 768}}) {
    const Inputs<BFloat16> in(p);
    const Emulated round_robin = emulate<BFloat16, 8>(in, p, Backward::Lanes, 1e-5);
    for (auto schedule : {warp_emulator::Schedule::WarpByWarp, warp_emulator::Schedule::WarpByWarpReversed}) {
      const Emulated skewed = emulate<BFloat16, 8>(in, p, Backward::Lanes, 1e-5, schedule);
      EXPECT_EQ(skewed.partial_w, round_robin.partial_w);
      EXPECT_EQ(skewed.partial_b, round_robin.partial_b);
      EXPECT_EQ(skewed.dx, round_robin.dx);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::layer_norm_detail
