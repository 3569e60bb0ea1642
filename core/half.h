// IEEE binary16 (f16) and bfloat16 (bf16) conversions, usable on host and device.
//
// Both types are stored as raw uint16_t bit patterns so that host code never
// depends on compiler support for _Float16. float -> 16-bit conversion rounds
// to nearest, ties to even, exactly like __float2half_rn / __float2bfloat16_rn:
//   - f16: overflow goes to +-inf, values below the smallest subnormal round to
//     +-0, subnormals are produced where the exponent requires;
//   - bf16: keeps float's exponent, so only the mantissa is rounded;
//   - NaN stays NaN (quiet, sign kept) in both.
// 16-bit -> float conversion is exact.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif

namespace tandem {

TANDEM_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

TANDEM_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

TANDEM_HD inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even on the 16 dropped bits
  return static_cast<uint16_t>(u >> 16);
}

TANDEM_HD inline float bf16_bits_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

TANDEM_HD inline uint16_t float_to_f16_bits(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x1ffu));  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  int32_t exp = static_cast<int32_t>(abs >> 23) - 127;
  if (exp >= -14) {
    // Normal f16: rebias the exponent, round the 13 dropped mantissa bits.
    uint32_t v = abs - ((127u - 15u) << 23);
    uint32_t lsb = (v >> 13) & 1u;
    v += 0xfffu + lsb;
    return static_cast<uint16_t>(sign | (v >> 13));
  }
  if (exp < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // Subnormal f16: shift the full 24-bit significand into place with RNE.
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  int shift = -exp - 14 + 13;  // 14..24
  uint32_t half_ulp = 1u << (shift - 1);
  uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t q = mant >> shift;
  if (rest > half_ulp || (rest == half_ulp && (q & 1u))) q += 1;
  return static_cast<uint16_t>(sign | q);
}

TANDEM_HD inline float f16_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: value = mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
}

}  // namespace tandem

namespace tandem {

// 16-bit float element types as stored in tensors (Tensor::data<Half>()).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

}  // namespace tandem
