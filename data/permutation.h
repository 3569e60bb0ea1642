// Seeded random permutations that are the same on every platform.
//
// std::shuffle and std::uniform_int_distribution are implementation-defined,
// so a split or an epoch order built on them could differ between a CI
// machine and a cluster. These use Philox4x32-10 (core/philox.h) as the bit
// source and unbiased rejection sampling, so (n, seed, stream) fixes the
// result everywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::data {

// 64-bit words of the Philox stream (seed, stream), in order.
class PhiloxWords {
 public:
  PhiloxWords(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  uint64_t next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t below(uint64_t bound);

 private:
  uint64_t seed_, stream_;
  uint64_t counter_ = 0;  // index of the next 64-bit word
};

// A uniformly random permutation of 0..n-1 (Fisher-Yates) determined by (seed, stream).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace tandem::data
