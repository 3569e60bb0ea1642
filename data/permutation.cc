#include "data/permutation.h"

#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/philox.h"

namespace tandem::data {

uint64_t PhiloxWords::next() {
  // Each Philox block gives four 32-bit words: two 64-bit words.
  Philox4 r = philox_block(seed_, stream_, counter_ / 2);
  const int half = static_cast<int>(counter_ % 2);
  ++counter_;
  return static_cast<uint64_t>(r.v[2 * half]) | (static_cast<uint64_t>(r.v[2 * half + 1]) << 32);
}

uint64_t PhiloxWords::below(uint64_t bound) {
  TANDEM_CHECK(bound > 0, "PhiloxWords::below: bound must be positive");
  // Reject the lowest (2^64 mod bound) values so that every residue is equally likely.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t r = next();
    if (r >= threshold) return r % bound;
  }
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  TANDEM_CHECK(n >= 0, "seeded_permutation: n must be non-negative, got {}", n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  PhiloxWords words(seed, stream);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(words.below(static_cast<uint64_t>(i) + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

}  // namespace tandem::data
