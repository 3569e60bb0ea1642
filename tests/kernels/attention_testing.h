// Shared by the attention tests: padding masks from sequence lengths, and the
// comparisons of a forward's results (tolerances as in attention_parity_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/tensor.h"

namespace tandem::testing {

// [B, S] u8 key-padding mask: row b has lengths[b] real tokens (1) followed by padding (0).
inline Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t seq, Device device = Device::cpu()) {
  std::vector<int64_t> values;
  for (int64_t len : lengths)
    for (int64_t j = 0; j < seq; ++j) values.push_back(j < len ? 1 : 0);
  return Tensor::from_vector(values, {static_cast<int64_t>(lengths.size()), seq}, DType::U8, device);
}

// A kernel's forward output against the CPU reference: the reference computes in f32 from the same
// inputs and rounds once; the kernels round P to the 16-bit type before P V (about one ulp more).
struct Tolerance {
  double atol, rtol;
};
inline Tolerance attention_output_tolerance(DType t) {
  switch (t) {
    case DType::BF16: return {2e-2, 2e-2};
    case DType::F16: return {3e-3, 3e-3};
    default: return {1e-5, 1e-4};
  }
}

// The softmax normalisers agree to f32 rounding, and are +inf exactly for the rows with no real key.
inline ::testing::AssertionResult same_lse(const Tensor& got, const Tensor& expected) {
  const std::vector<double> a = got.to_double_vector(), e = expected.to_double_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isinf(e[i]) ? a[i] == e[i] : std::fabs(a[i] - e[i]) <= 1e-5 * (1 + std::fabs(e[i]));
    if (!ok) return ::testing::AssertionFailure() << "lse[" << i << "] = " << a[i] << ", expected " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// Two CPU tensors hold the same bits (same dtype and shape).
inline ::testing::AssertionResult same_bits(const Tensor& got, const Tensor& expected) {
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape())
    return ::testing::AssertionFailure() << got.str() << " vs " << expected.str();
  const auto* a = static_cast<const unsigned char*>(got.data_ptr());
  const auto* e = static_cast<const unsigned char*>(expected.data_ptr());
  const size_t width = dtype_size(got.dtype());
  for (size_t i = 0; i < got.nbytes(); i += width)
    if (std::memcmp(a + i, e + i, width) != 0)
      return ::testing::AssertionFailure() << "element " << i / width << " differs: "
                                           << got.to_double_vector()[i / width] << " vs "
                                           << expected.to_double_vector()[i / width];
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
