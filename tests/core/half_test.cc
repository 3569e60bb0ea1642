// f16/bf16 conversions against known bit patterns and, for f16, against the
// compiler's own _Float16 conversion (an independent round-to-nearest-even).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/half.h"
#include "core/philox.h"

namespace tandem {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(F16, KnownBitPatterns) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_f16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7BFF);          // largest finite
  EXPECT_EQ(float_to_f16_bits(0.1f), 0x2E66);
  EXPECT_EQ(float_to_f16_bits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xFC00);
}

TEST(F16, RoundsToNearestEvenAtTies) {
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, 0x3C00 is even
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, rounds up to even
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);             // half the smallest subnormal: to even 0
  EXPECT_EQ(float_to_f16_bits(3 * std::ldexp(1.0f, -26)), 0x0001);         // 0.75 ulp rounds up
  EXPECT_EQ(float_to_f16_bits(3 * std::ldexp(1.0f, -25)), 0x0002);         // 1.5 ulp tie -> even 2
}

TEST(F16, OverflowsToInfinityAtTheRoundingBoundary) {
  EXPECT_EQ(float_to_f16_bits(65519.996f), 0x7BFF);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7C00);  // the tie above 65504 rounds to inf
  EXPECT_EQ(float_to_f16_bits(1e10f), 0x7C00);
}

TEST(F16, NaNStaysNaN) {
  uint16_t h = float_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(f16_bits_to_float(h)));
}

TEST(F16, EveryNonNaNPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = f16_bits_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16_bits(f), h) << "pattern " << std::hex << b;
  }
}

TEST(F16, AgreesWithTheCompilersFloat16OnRandomFloats) {
  // GCC's _Float16 conversion on x86-64 is an independent round-to-nearest-even.
  for (uint64_t i = 0; i < 200000; ++i) {
    Philox4 r = philox_block(7, 0, i);
    // Exponents concentrated around the f16 range, random mantissas and signs.
    uint32_t exp = 127 - 30 + (r.v[1] % 50);
    uint32_t u = (r.v[0] & 0x807FFFFFu) | (exp << 23);
    float f = from_bits(u);
    _Float16 ref = static_cast<_Float16>(f);
    ASSERT_EQ(float_to_f16_bits(f), std::bit_cast<uint16_t>(ref)) << "float bits " << std::hex << u;
  }
}

TEST(BF16, KnownBitPatterns) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(0.1f), 0x3DCD);  // 0x3DCCCCCD rounds up
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3F808000u)), 0x3F80);  // tie to even (down)
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3F818000u)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7F7FFFFFu)), 0x7F80);  // float max rounds to inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00000001u)), 0x0000);  // tiny subnormal rounds to 0
}

TEST(BF16, NaNStaysNaNEvenWhenTruncationWouldMakeInfinity) {
  // 0x7F800001 is a NaN whose upper 16 bits alone would read as infinity.
  uint16_t h = float_to_bf16_bits(from_bits(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(h)));
}

TEST(BF16, EveryNonNaNPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = bf16_bits_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16_bits(f), h) << "pattern " << std::hex << b;
  }
}

TEST(BF16, IsTheNearestRepresentable) {
  // Independent check: the chosen bf16 is at least as close as both neighbours.
  for (uint64_t i = 0; i < 100000; ++i) {
    float f = from_bits(philox_block(9, 0, i).v[0] & 0xBFFFFFFFu);  // finite magnitudes
    if (!std::isfinite(f)) continue;
    uint16_t h = float_to_bf16_bits(f);
    double v = bf16_bits_to_float(h);
    for (int d : {-1, 1}) {
      double n = bf16_bits_to_float(static_cast<uint16_t>(h + d));
      if (std::isfinite(n) && std::isfinite(v)) {
        ASSERT_LE(std::fabs(v - f), std::fabs(n - f)) << f;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
