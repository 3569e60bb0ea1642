// Dropout's keep factors inside the memory-bound kernels that apply it
// (bias_dropout_add_kernels.cuh, bias_gelu_kernels.cuh): the decision for
// element i is kernels/dropout_mask.h's, so every kernel that drops element i
// of a stream drops the same elements as the CPU reference, and a fused kernel
// gives the bits of the separate ones.
//
// Cost: one 10-round Philox block per 8 elements at 16-byte vectors of 16-bit
// types: about 60 integer instructions per block on sm_90 (two 32 x 32 ->
// 64-bit products and two three-way XORs per round), then a mask or shift and
// a compare per 16-bit uniform, about 11 per element in all. f32's 4-element
// vectors use half a block each, so two threads compute every block (as many
// blocks per element as the old 4-per-block rule). Device code that also runs
// on the CPU under tests/testing/warp_emulator.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/row_vectors.cuh"
#include "kernels/dropout_mask.h"

// A test's hook counting the Philox blocks computed (tests/kernels/bias_gelu_dropout_emulated_test.cc);
// nothing otherwise.
#ifndef DROPOUT_COUNT_PHILOX
#define DROPOUT_COUNT_PHILOX() ((void)0)
#endif

namespace tandem::kernels {

// One dropout call's stream, as the kernels receive it.
struct DropoutMask {
  uint32_t threshold;  // dropout_threshold(p); 0: keep everything, unscaled
  float scale;         // dropout_keep_scale(threshold)
  uint64_t seed, subsequence;
  const int64_t* step;  // null, or the device step count: read by each thread (kernels/dropout_mask.h)
};

inline DropoutMask dropout_mask(float p, uint64_t seed, uint64_t subsequence, const int64_t* step) {
  const uint32_t t = dropout_threshold(p);
  return DropoutMask{t, dropout_keep_scale(t), seed, subsequence, step};
}

// Keep factors (scale or 0) of the V elements starting at flat index i0. Vectors are whole (i0 is a
// multiple of V), so a vector of 8 or more covers whole Philox blocks and one of 4 is half of one.
// m.subsequence must be the resolved one (dropout_subsequence, once per thread at the kernel's start).
template <int V>
__device__ __forceinline__ void keep_factors(const DropoutMask& m, uint64_t i0, float (&f)[V]) {
  if (m.threshold == 0) {
    fill(f, 1.0f);
  } else if constexpr (V % 8 == 0 || V == 4) {
#pragma unroll
    for (int q = 0; q < (V + 7) / 8; ++q) {
      DROPOUT_COUNT_PHILOX();
      const uint32_t bits = dropout_keep8(m.seed, m.subsequence, i0 / 8 + q, m.threshold) >> (i0 % 8);
#pragma unroll
      for (int k = 0; k < (V < 8 ? V : 8); ++k) f[8 * q + k] = (bits >> k) & 1u ? m.scale : 0.0f;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      DROPOUT_COUNT_PHILOX();
      f[k] = dropout_keep(m.seed, m.subsequence, i0 + k, m.threshold) ? m.scale : 0.0f;
    }
  }
}

// Saved keep bits (TANDEM_DROPOUT_KEEP=saved, kernels/cuda/row_kernel_switches.h): a forward that
// computes the blocks anyway stores each block's 8 decisions as byte `block` of a buffer of
// dropout_keep_bytes(n) bytes (bit k: element 8 * block + k, dropout_keep8's bits), so that its
// backward reads a byte per 8 elements (1/16 of a 16-bit tensor's traffic) instead of computing the
// Philox block again. A block's byte is stored by the thread whose vector starts it (every thread at
// 16-bit vectors, one of two at f32's, one of eight at single elements), each byte exactly once.

// keep_factors, also storing the byte of each block this vector starts.
template <int V>
__device__ __forceinline__ void keep_factors_saving(const DropoutMask& m, uint64_t i0, float (&f)[V],
                                                    uint8_t* __restrict__ keep) {
#pragma unroll
  for (int q = 0; q < (V + 7) / 8; ++q) {
    const uint64_t block = i0 / 8 + q;
    if (m.threshold != 0) DROPOUT_COUNT_PHILOX();
    // A threshold of 0 keeps everything with scale 1 and computes no block, as keep_factors.
    const uint32_t bits = m.threshold == 0 ? 0xffu : dropout_keep8(m.seed, m.subsequence, block, m.threshold);
    if (i0 % 8 == 0) keep[block] = static_cast<uint8_t>(bits);
    const uint32_t mine = bits >> (i0 % 8);
#pragma unroll
    for (int k = 0; k < (V < 8 ? V : 8); ++k) f[8 * q + k] = (mine >> k) & 1u ? m.scale : 0.0f;
  }
}

// The bytes holding the decisions of the V elements at i0, as saved: loaded apart from their use so
// that a kernel can request them with the rest of a row's loads.
template <int V>
struct KeepBytes {
  uint32_t b[(V + 7) / 8];
};

template <int V>
__device__ __forceinline__ KeepBytes<V> load_keep_bytes(const uint8_t* __restrict__ keep, uint64_t i0) {
  KeepBytes<V> k;
#pragma unroll
  for (int q = 0; q < (V + 7) / 8; ++q) k.b[q] = keep[i0 / 8 + q];
  return k;
}

// The keep factors of the V elements at i0 from their saved bytes: keep_factors' values.
template <int V>
__device__ __forceinline__ void saved_keep_factors(const DropoutMask& m, uint64_t i0, const KeepBytes<V>& k,
                                                   float (&f)[V]) {
#pragma unroll
  for (int q = 0; q < (V + 7) / 8; ++q) {
    const uint32_t mine = k.b[q] >> (i0 % 8);
#pragma unroll
    for (int j = 0; j < (V < 8 ? V : 8); ++j) f[8 * q + j] = (mine >> j) & 1u ? m.scale : 0.0f;
  }
}

// dropout(v + bias) + residual for one element, with its keep factor f: the one expression every
// kernel applying dropout's forward uses (a fused kernel passes 0 for what it lacks), so that they
// agree to the bit, signed zeros included.
__device__ __forceinline__ float dropout_add(float v, float bias, float f, float residual) {
  return (v + bias) * f + residual;
}

}  // namespace tandem::kernels
