// Host-side values of the kernels' element types (f32, bf16, f16) for tests that
// run device code on plain std::vectors (the emulated kernel tests): conversions
// with the device's rounding (core/half.h), and a deterministic spread of values.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/half.h"

namespace tandem::testing {

// f rounded to T (16 bits: to nearest, ties to even, as __float2bfloat16_rn and __float2half_rn).
template <class T>
T as_element(float f) {
  if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16_bits(f)};
  else if constexpr (std::is_same_v<T, Half>) return Half{float_to_f16_bits(f)};
  else return f;
}

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) return bf16_bits_to_float(v.bits);
  else if constexpr (std::is_same_v<T, Half>) return f16_bits_to_float(v.bits);
  else return v;
}

// The bits of each value (f32's 32, a 16-bit type's 16): to compare results bit for bit, signed zeros
// and NaN payloads included.
template <class T>
std::vector<uint32_t> bit_patterns(const std::vector<T>& v) {
  std::vector<uint32_t> out;
  out.reserve(v.size());
  for (const T& e : v) {
    if constexpr (std::is_same_v<T, float>) out.push_back(float_bits(e));
    else out.push_back(e.bits);
  }
  return out;
}

// n values in [offset - 1, offset + 1), the same for the same seed (a linear congruential sequence).
template <class T>
std::vector<T> spread_values(int64_t n, uint32_t seed, float offset = 0.0f) {
  std::vector<T> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    e = as_element<T>(offset + static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
  }
  return v;
}

}  // namespace tandem::testing
