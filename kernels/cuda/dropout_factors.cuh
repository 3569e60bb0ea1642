// Dropout's keep factors inside the memory-bound kernels that apply it
// (bias_dropout_add_kernels.cuh, bias_gelu_kernels.cuh): the decision for
// element i is kernels/dropout_mask.h's, so every kernel that drops element i
// of a stream drops the same elements as the CPU reference, and a fused kernel
// gives the bits of the separate ones.
//
// Cost: one 10-round Philox block per 4 elements (~15 integer ops per element),
// cheap next to the memory traffic of the passes that use it. Device code that
// also runs on the CPU under tests/testing/warp_emulator.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/row_vectors.cuh"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {

// One dropout call's stream, as the kernels receive it.
struct DropoutMask {
  float p, scale;  // p == 0: keep everything, unscaled
  uint64_t seed, subsequence;
  const int64_t* step;  // null, or the device step count: read by each thread (kernels/dropout_mask.h)
};

inline DropoutMask dropout_mask(float p, uint64_t seed, uint64_t subsequence, const int64_t* step) {
  return DropoutMask{p, dropout_scale(p), seed, subsequence, step};
}

// Keep factors (scale or 0) of the V elements starting at flat index i0. For V a multiple of 4, i0
// is too (rows are whole vectors), so each Philox block is computed once. m.subsequence must be the
// resolved one (dropout_subsequence, once per thread at the kernel's start).
template <int V>
__device__ __forceinline__ void keep_factors(const DropoutMask& m, uint64_t i0, float (&f)[V]) {
  if (m.p == 0.0f) {
    fill(f, 1.0f);
  } else if constexpr (V % 4 == 0) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const unsigned bits = dropout_keep4(m.seed, m.subsequence, i0 / 4 + q, m.p);
#pragma unroll
      for (int k = 0; k < 4; ++k) f[4 * q + k] = (bits >> k) & 1u ? m.scale : 0.0f;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = dropout_keep(m.seed, m.subsequence, i0 + k, m.p) ? m.scale : 0.0f;
  }
}

// dropout(v + bias) + residual for one element, with its keep factor f: the one expression every
// kernel applying dropout's forward uses (a fused kernel passes 0 for what it lacks), so that they
// agree to the bit, signed zeros included.
__device__ __forceinline__ float dropout_add(float v, float bias, float f, float residual) {
  return (v + bias) * f + residual;
}

}  // namespace tandem::kernels
