// Philox4x32-10: the counter-based random number generator of Salmon et al.,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11), also used by cuRAND
// and PyTorch's CUDA generator; and Philox4x32-7, the same with seven rounds.
//
// A (128-bit counter, 64-bit key) pair maps to four independent 32-bit words
// with no state in between, so any element of any stream can be computed
// directly, in any order, on any device: the CPU reference and the CUDA
// kernels produce identical bits. Tandem uses key = seed and
// counter = (offset_lo, offset_hi, subsequence_lo, subsequence_hi).
//
// Both verified against the Random123 known-answer vectors (tests/core/philox_test.cc).
#pragma once

#include <cstdint>

#include "core/half.h"  // TANDEM_HD

namespace tandem {

struct Philox4 {
  uint32_t v[4];
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

TANDEM_HD inline void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}
}  // namespace philox_detail

// R rounds of the Philox4x32 bijection. Ten is Random123's default and cuRAND's; seven is the fewest
// the paper found to pass TestU01's BigCrush (Salmon et al., table 2), and what FlashAttention-2's
// dropout uses (kernels/attention_params.h: AttentionDropoutRng).
template <int Rounds>
TANDEM_HD inline Philox4 philox4x32(Philox4 ctr, uint32_t key0, uint32_t key1) {
  using namespace philox_detail;
  for (int round = 0; round < Rounds; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, ctr.v[0], &hi0, &lo0);
    mulhilo(kM1, ctr.v[2], &hi1, &lo1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

TANDEM_HD inline Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  return philox4x32<10>(ctr, key0, key1);
}

// The four words for block `block` of stream (seed, subsequence), by Philox4x32-R (10 unless told).
template <int Rounds = 10>
TANDEM_HD inline Philox4 philox_block(uint64_t seed, uint64_t subsequence, uint64_t block) {
  Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(subsequence),
               static_cast<uint32_t>(subsequence >> 32)}};
  return philox4x32<Rounds>(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform in [0, 1) with 24 random bits: exactly representable, identical on host and device.
TANDEM_HD inline float uint_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

// Element i of the uniform [0,1) stream (seed, subsequence): word i%4 of block i/4.
TANDEM_HD inline float philox_uniform(uint64_t seed, uint64_t subsequence, uint64_t i) {
  Philox4 r = philox_block(seed, subsequence, i / 4);
  return uint_to_unit_float(r.v[i % 4]);
}

}  // namespace tandem
