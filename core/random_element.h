// The per-element formulas behind core/random.h, shared by the CPU loop and the CUDA kernel.
#pragma once

#include <cmath>

#include "core/philox.h"

namespace tandem {

TANDEM_HD inline float uniform_element(uint64_t seed, uint64_t subsequence, uint64_t i, float low, float high) {
  return low + (high - low) * philox_uniform(seed, subsequence, i);
}

// Box-Muller on uniforms (2k, 2k+1): element 2k takes the cosine branch, 2k+1 the sine branch.
TANDEM_HD inline float normal_element(uint64_t seed, uint64_t subsequence, uint64_t i, float mean, float stddev) {
  uint64_t pair = i / 2;
  float u1 = philox_uniform(seed, subsequence, 2 * pair);
  float u2 = philox_uniform(seed, subsequence, 2 * pair + 1);
  float radius = sqrtf(-2.0f * logf(1.0f - u1));  // 1 - u1 is in (0, 1]: log is finite
  float angle = 6.283185307179586f * u2;
  float z = (i % 2 == 0) ? radius * cosf(angle) : radius * sinf(angle);
  return mean + stddev * z;
}

}  // namespace tandem
