// How the fused attention backward's gradient is compared with the split
// path's (kernels/cuda/attention_backward_fused.cuh, "Numerics"), for the
// emulator and the GPU tests alike.
//
// dK and dV must be the same bits. dQ has the same terms, summed with one f32
// accumulator across key tiles on the split path and as a sum of per-tile
// sums on the fused path, then rounded once to the stored type. So the two
// may differ by f32 reassociation, at most a few f32 ulps of the largest
// partial sum per key tile (bounded here by 4 * key_tiles ulps of the largest
// |dQ|: the terms are of that size), plus one unit in the last place of the
// stored type where that difference straddles a rounding boundary.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace tandem::testing {

// Part 0 (q), 1 (k) or 2 (v) of a flattened [B, S, 3 * width] gradient.
inline std::vector<double> dqkv_part(const std::vector<double>& all, int64_t width, int which) {
  const auto w = static_cast<size_t>(width);
  std::vector<double> r;
  for (size_t row = 0; row < all.size() / (3 * w); ++row)
    r.insert(r.end(), all.begin() + static_cast<std::ptrdiff_t>(row * 3 * w + which * w),
             all.begin() + static_cast<std::ptrdiff_t>(row * 3 * w + (which + 1) * w));
  return r;
}

// The spacing of dtype t's values at |x| (its smallest subnormal at 0).
inline double ulp_of(double x, DType t) {
  const int mantissa = t == DType::BF16 ? 7 : t == DType::F16 ? 10 : 23;
  const int min_exponent = t == DType::BF16 ? -133 : t == DType::F16 ? -24 : -149;
  int e = 0;
  std::frexp(x, &e);  // |x| = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1 - mantissa, min_exponent));
}

inline ::testing::AssertionResult dq_agrees_to_f32_rounding(const std::vector<double>& fused,
                                                            const std::vector<double>& split, int64_t key_tiles,
                                                            DType t) {
  if (fused.size() != split.size()) return ::testing::AssertionFailure() << "sizes differ";
  double largest = 0;
  for (double v : split) largest = std::max(largest, std::fabs(v));
  if (!(largest > 0)) return ::testing::AssertionFailure() << "dQ is all zero";
  const double f32_bound = 4.0 * static_cast<double>(key_tiles) * std::ldexp(largest, -24);
  for (size_t k = 0; k < fused.size(); ++k) {
    const double a = fused[k], b = split[k];
    if (!(std::fabs(a - b) <= f32_bound + ulp_of(std::max(std::fabs(a), std::fabs(b)), t)))
      return ::testing::AssertionFailure() << "dQ element " << k << ": fused " << a << ", split " << b
                                           << " (largest |dQ| " << largest << ", " << key_tiles << " key tiles)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
