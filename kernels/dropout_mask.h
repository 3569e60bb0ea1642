// Which elements dropout keeps: one definition for the CPU reference and the
// CUDA kernels, so the mask is bit-identical on both for the same stream, and
// one quantisation of p shared with attention's dropout (attention_params.h).
//
// Element i of a tensor (flat, row-major index) is decided by slot i % 8 of
// Philox block i / 8 of the stream (seed, subsequence) (core/philox.h): slot k
// is the 16-bit uniform u in half k % 2 (0: the low 16 bits) of word k / 2.
// The element is kept when u >= t, t = round(p * 2^16) (at most 2^16 - 1 for
// p < 1; 2^16 for p = 1, which keeps nothing), and a kept element is scaled by
// 2^16 / (2^16 - t) (0 for p = 1: no inf * 0). So p is quantised to a multiple
// of 2^-16 (off by at most 2^-17; a p below 2^-17 drops nothing, with scale
// exactly 1) and the scale is the inverse of the quantised keep rate: the
// expectation is kept exactly.
//
// Why 16 bits: one Philox block (10 rounds of two 32 x 32 -> 64-bit products)
// then decides 8 elements instead of 4, half the integer work. By instruction
// count that work is what held the 16-bit dropout kernels below the copy rate
// (the H200's second run: bf16 dropout at 46 % of copy against f32's 70 % for
// as many decisions; not yet timed with this rule), and on the CPU halving it
// made dropout 1.7-2.2x faster (docs/results/dropout_16bit_cpu.md).
// FlashAttention-2 decides 16 per block with 8-bit uniforms (p quantised to
// 1/256); PyTorch's dropout uses 4 floats.
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

// t = round(p * 2^16): a 16-bit uniform below it drops its element. p * 2^16 is exact in float, so
// adding 0.5 rounds it the same way with or without FMA contraction. !(p > 0) (0, or NaN) drops nothing.
TANDEM_HD inline uint32_t dropout_threshold(float p) {
  if (!(p > 0.0f)) return 0;
  if (p >= 1.0f) return 65536u;
  const uint32_t t = static_cast<uint32_t>(p * 65536.0f + 0.5f);
  return t < 65535u ? t : 65535u;
}

// What multiplies a kept element: 1 / (the quantised keep rate), exactly 1 for t = 0, 0 for t = 2^16.
template <class A = float>
TANDEM_HD inline A dropout_keep_scale(uint32_t threshold) {
  return threshold < 65536u ? A(65536) / A(65536u - threshold) : A(0);
}

// One dropout call as an op keeps it for its backward: the probability (0: no dropout, as in eval
// mode) and the Philox stream, with the step count in the tensors' memory space or null.
struct DropoutStream {
  float p;
  uint64_t seed, subsequence;
  const int64_t* step;
  // The whole subsequence, for CPU tensors (whose step count is in host memory).
  uint64_t host_subsequence() const { return dropout_subsequence(subsequence, step); }
};

// Bytes of a tensor's saved keep bits (kernels/cuda/dropout_factors.cuh): one per Philox block of its
// n elements.
TANDEM_HD inline int64_t dropout_keep_bytes(int64_t n) { return (n + 7) / 8; }

// The decision in slot k of a block.
TANDEM_HD inline bool dropout_keep_slot(const Philox4& block, int slot, uint32_t threshold) {
  return ((block.v[slot / 2] >> (16 * (slot % 2))) & 0xffffu) >= threshold;
}

// All 8 decisions of a block: bit k for slot k.
TANDEM_HD inline uint32_t dropout_keep8(const Philox4& block, uint32_t threshold) {
  uint32_t bits = 0;
  for (int k = 0; k < 8; ++k) bits |= static_cast<uint32_t>(dropout_keep_slot(block, k, threshold)) << k;
  return bits;
}

// Keep bits of elements 8 * block .. 8 * block + 7 of a tensor (bit k for element 8 * block + k).
TANDEM_HD inline uint32_t dropout_keep8(uint64_t seed, uint64_t subsequence, uint64_t block, uint32_t threshold) {
  return dropout_keep8(philox_block(seed, subsequence, block), threshold);
}

// The decision for element i alone: a whole Philox block for one bit (tests and scalar tails).
TANDEM_HD inline bool dropout_keep(uint64_t seed, uint64_t subsequence, uint64_t i, uint32_t threshold) {
  return dropout_keep_slot(philox_block(seed, subsequence, i / 8), static_cast<int>(i % 8), threshold);
}

}  // namespace tandem::kernels
