// What the CPU reference and the CUDA kernels of attention agree on: the
// problem's shape and the attention-dropout rule.
//
// Dropout on the attention probabilities of head bh = b * H + h decides each
// element (query i, key j) from the Philox stream (seed, subsequence = offset)
// by one of two rules (kernels/attention_dropout_rng.h), in groups of eight.
// The S x S matrix is cut into 16 x 16 squares, and with r = i % 16, c = j % 16,
// element (i, j) belongs to group
//   G = ((bh * N + i / 16) * N + j / 16) * 32 + 4 * (r % 8) + (c % 8) / 2,   N = ceil(S / 16),
// in slot 4 * (c / 8) + 2 * (r / 8) + c % 2.
//   philox10x8 (the default): group G is Philox4x32-10 block G, and the slot's
//     16-bit uniform u is half slot % 2 (0: the low 16 bits) of word slot / 2.
//     The element is kept when u >= round(p * 2^16), and a kept probability is
//     scaled by 2^16 / (2^16 - that threshold): kernels/dropout_mask.h's
//     quantisation of p, shared with the elementwise dropout (dropout_threshold,
//     dropout_keep_scale, dropout_keep8).
//   philox7x16: groups G and G ^ 4 (rows r and r ^ 1 of the same columns) share
//     Philox4x32-7 block (G / 32) * 16 + 4 * ((G / 8) % 4) + G % 4, 16 bytes of
//     which G takes bytes 8 * ((G / 4) % 2) + slot (byte k: bits 8 (k % 4) up of
//     word k / 4). The element is kept when that byte is >= round(p * 256), and
//     scaled by 256 / (256 - that threshold).
// Either way p is quantised and the scale is the inverse of the quantised keep
// rate, so the dropped-out probabilities are unbiased.
//
// Why this shape: a group's 8 elements, queries {i, i + 8} x keys
// {j, j + 1, j + 8, j + 9}, are exactly what one lane holds of a 16 x 16 tile
// in the accumulator layout of mma.m16n8k16 (rows g, g + 8; columns 2t, 2t + 1
// of two 8-column blocks), so the forward and dQ passes use every decision of
// every block they compute; in the dK/dV pass, which holds the transposed tile,
// two neighbouring lanes (lane ^ 4) need complementary halves of the same two
// groups. Under philox10x8 those lanes compute one block each and swap keep
// bits; under philox7x16 lane and lane ^ 4 need the same block of a square in
// every pass (the two groups of rows r, r ^ 1 along keys; the 8 keys x 4 queries
// of both groups in the transposed tile), so each computes the block of one square
// of a pair and they swap. So a pass spends one Philox4x32-10 block per 8
// decisions, or one Philox4x32-7 block per 16 (FlashAttention-2's cost).
//
// The decision is a pure function of (seed, offset, b, h, i, j), the rule and
// the shape, identical on host and device, and by default the backward
// recomputes it instead of storing an S x S mask. With
// TANDEM_ATTENTION_DROPOUT_KEEP=saved (CUDA, opt-in) the forward also writes
// each group's 8 keep bits to byte G of a buffer of attention_keep_bytes(shape)
// bytes, and the backward reads them back: 1 bit per element of memory instead
// of the Philox work in each backward pass, under either rule. A square's 32
// groups are 32 consecutive bytes, one per lane of the warp that holds the
// square in any pass. p = 0 keeps everything with scale exactly 1. Callers draw
// a fresh offset for every call that must be independent (every layer, every
// step).
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "kernels/attention_dropout_rng.h"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {

struct AttentionShape {
  int64_t batch = 0;     // B
  int64_t seq = 0;       // S, queries = keys
  int64_t heads = 0;     // H
  int64_t head_dim = 0;  // Dh; the model width is H * Dh
};

struct AttentionDropout {
  float p = 0.0f;  // probability of dropping, in [0, 1)
  uint64_t seed = 0;
  uint64_t offset = 0;
  const int64_t* step = nullptr;  // set: the Philox subsequence is dropout_subsequence(offset, step)
  AttentionDropoutRng rng = AttentionDropoutRng::Philox10x8;

  TANDEM_HD bool active() const { return p > 0.0f; }
  TANDEM_HD uint64_t subsequence() const { return dropout_subsequence(offset, step); }
};

// The group holding the decision for (i, j) of head bh: under philox10x8 also its Philox block, and
// under either rule the byte of its saved keep bits.
TANDEM_HD inline uint64_t attention_dropout_group(int64_t bh, int64_t i, int64_t j, int64_t seq) {
  const uint64_t n = (static_cast<uint64_t>(seq) + 15) / 16;
  const uint64_t square =
      (static_cast<uint64_t>(bh) * n + static_cast<uint64_t>(i) / 16) * n + static_cast<uint64_t>(j) / 16;
  return square * 32 + static_cast<uint64_t>(4 * (i % 8) + (j % 8) / 2);
}

// Bytes of the saved keep bits of a shape: one per group, 32 per 16 x 16 square, ceil(S / 16)^2
// squares per head: S^2 / 8 per head when 16 divides S.
TANDEM_HD inline int64_t attention_keep_bytes(const AttentionShape& s) {
  const int64_t n = (s.seq + 15) / 16;
  return s.batch * s.heads * n * n * 32;
}

// Which of its group's 8 decisions is that of (i, j).
TANDEM_HD inline int attention_dropout_slot(int64_t i, int64_t j) {
  return static_cast<int>(4 * (j % 16 / 8) + 2 * (i % 16 / 8) + j % 2);
}

// philox7x16: the Philox4x32-7 block of group G, and which 8 of its 16 bytes are G's (0: bytes 0-7).
TANDEM_HD inline uint64_t attention_dropout_block16(uint64_t group) {
  return (group >> 5) * 16 + ((group >> 3) & 3) * 4 + (group & 3);
}
TANDEM_HD inline int attention_dropout_half(uint64_t group) { return static_cast<int>((group >> 2) & 1); }

// t = round(p * 256): an 8-bit uniform below it drops its element (philox7x16). p * 256 is exact in
// float, so adding 0.5 rounds it the same way with or without FMA contraction; at most 255 for p < 1.
TANDEM_HD inline uint32_t dropout_threshold8(float p) {
  if (!(p > 0.0f)) return 0;
  if (p >= 1.0f) return 256u;
  const uint32_t t = static_cast<uint32_t>(p * 256.0f + 0.5f);
  return t < 255u ? t : 255u;
}

// The threshold the rule compares its uniforms with, and what multiplies a kept probability: 1 / (the
// quantised keep rate), exactly 1 for p = 0.
TANDEM_HD inline uint32_t attention_dropout_threshold(const AttentionDropout& d) {
  return d.rng == AttentionDropoutRng::Philox7x16 ? dropout_threshold8(d.p) : dropout_threshold(d.p);
}
template <class A = float>
TANDEM_HD inline A attention_dropout_scale(const AttentionDropout& d) {
  const uint32_t t = attention_dropout_threshold(d);
  if (d.rng != AttentionDropoutRng::Philox7x16) return dropout_keep_scale<A>(t);
  return t < 256u ? A(256) / A(256u - t) : A(0);
}

// philox7x16: the 16 decisions of a Philox4x32-7 block, bit k for byte k.
TANDEM_HD inline uint32_t dropout_keep16(const Philox4& block, uint32_t threshold8) {
  uint32_t bits = 0;
  for (int k = 0; k < 16; ++k)
    bits |= static_cast<uint32_t>(((block.v[k / 4] >> (8 * (k % 4))) & 0xffu) >= threshold8) << k;
  return bits;
}
TANDEM_HD inline uint32_t attention_keep16(const AttentionDropout& d, uint64_t block16, uint32_t threshold8) {
  return dropout_keep16(philox_block<7>(d.seed, d.subsequence(), block16), threshold8);
}

// The 8 keep bits of group G (bit k for slot k), by the op's rule, with its threshold.
TANDEM_HD inline uint32_t attention_keep8(const AttentionDropout& d, uint64_t group, uint32_t threshold) {
  if (d.rng == AttentionDropoutRng::Philox7x16)
    return (attention_keep16(d, attention_dropout_block16(group), threshold) >> (8 * attention_dropout_half(group))) &
           0xffu;
  return dropout_keep8(philox_block(d.seed, d.subsequence(), group), threshold);
}

// The decision for (i, j) of head bh alone: a whole Philox block for one bit (tests, the definition).
TANDEM_HD inline bool attention_dropout_keep(const AttentionDropout& d, int64_t bh, int64_t i, int64_t j,
                                             int64_t seq) {
  const uint64_t group = attention_dropout_group(bh, i, j, seq);
  return (attention_keep8(d, group, attention_dropout_threshold(d)) >> attention_dropout_slot(i, j)) & 1u;
}

}  // namespace tandem::kernels
