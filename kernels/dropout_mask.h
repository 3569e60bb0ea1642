// Which elements dropout keeps: one definition for the CPU reference and the
// CUDA kernels, so the mask is bit-identical on both for the same stream.
//
// Element i of a tensor (flat, row-major index) is kept iff the i-th uniform
// of the Philox stream (seed, subsequence) is >= p, where the uniform is word
// i % 4 of Philox block i / 4 with 24 random bits (core/philox.h) and p is
// compared as a float. Kept elements are multiplied by 1 / (1 - p), computed
// in float; p = 1 keeps nothing and scales by 0 (no inf * 0).
#pragma once

#include <cstdint>

#include "core/philox.h"

namespace tandem::kernels {

// The Philox subsequence of a dropout call. Eager steps pass the whole
// subsequence, (step << 16) | call (nn::ForwardContext). A capturable step
// (train/graph_step.h) keeps the step count in device memory instead, so that a
// replayed CUDA graph draws fresh masks: `step` points at it (an i64 in the
// kernel's memory space) and the call carries only the low 16 bits. Both give
// the same subsequence for the same step and call.
TANDEM_HD inline uint64_t dropout_subsequence(uint64_t subsequence, const int64_t* step) {
  return step ? (static_cast<uint64_t>(*step) << 16) | subsequence : subsequence;
}

TANDEM_HD inline float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

// One dropout call as an op keeps it for its backward: the probability (0: no dropout, as in eval
// mode) and the Philox stream, with the step count in the tensors' memory space or null.
struct DropoutStream {
  float p;
  uint64_t seed, subsequence;
  const int64_t* step;
  // The whole subsequence, for CPU tensors (whose step count is in host memory).
  uint64_t host_subsequence() const { return dropout_subsequence(subsequence, step); }
};

// Keep bits of elements 4*block .. 4*block + 3 (bit k for element 4*block + k).
TANDEM_HD inline unsigned dropout_keep4(uint64_t seed, uint64_t subsequence, uint64_t block, float p) {
  Philox4 r = philox_block(seed, subsequence, block);
  unsigned bits = 0;
  for (int k = 0; k < 4; ++k) bits |= (uint_to_unit_float(r.v[k]) >= p ? 1u : 0u) << k;
  return bits;
}

// The same decision for one element (a quarter of a Philox block; tests and scalar tails).
TANDEM_HD inline bool dropout_keep(uint64_t seed, uint64_t subsequence, uint64_t i, float p) {
  return philox_uniform(seed, subsequence, i) >= p;
}

}  // namespace tandem::kernels
