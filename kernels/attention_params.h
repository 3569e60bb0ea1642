// What the CPU reference and the CUDA kernels of attention agree on: the
// problem's shape and the attention-dropout rule.
//
// Dropout on the attention probabilities of head bh = b * H + h decides each
// element (query i, key j) from the Philox stream (seed, subsequence = offset),
// eight decisions per Philox block. The S x S matrix is cut into 16 x 16
// squares, and with r = i % 16, c = j % 16, element (i, j) belongs to block
//   ((bh * N + i / 16) * N + j / 16) * 32 + 4 * (r % 8) + (c % 8) / 2,   N = ceil(S / 16),
// in slot 4 * (c / 8) + 2 * (r / 8) + c % 2, whose 16-bit uniform u is half
// slot % 2 (0: the low 16 bits) of word slot / 2. The element is kept when
// u >= round(p * 2^16), and a kept probability is scaled by 2^16 / (2^16 -
// that threshold): kernels/dropout_mask.h's quantisation of p, shared with the
// elementwise dropout (dropout_threshold, dropout_keep_scale, dropout_keep8),
// so the dropped-out probabilities are unbiased.
//
// Why this shape: a block's 8 elements, queries {i, i + 8} x keys
// {j, j + 1, j + 8, j + 9}, are exactly what one lane holds of a 16 x 16 tile
// in the accumulator layout of mma.m16n8k16 (rows g, g + 8; columns 2t, 2t + 1
// of two 8-column blocks), so the forward and dQ passes use every decision of
// every block they compute; in the dK/dV pass, which holds the transposed tile,
// two neighbouring lanes need complementary halves of the same two blocks,
// compute one each and swap keep bits (kernels/cuda/attention_kernels.cuh).
// So each pass spends one Philox block per 8 decisions (FlashAttention-2 gets
// 16 with 8-bit uniforms, p quantised to 1/256).
//
// The decision is a pure function of (seed, offset, b, h, i, j) and the shape,
// identical on host and device, and by default the backward recomputes it
// instead of storing an S x S mask. With TANDEM_ATTENTION_DROPOUT_KEEP=saved
// (CUDA, opt-in) the forward also writes each block's 8 keep bits to byte
// `block` of a buffer of attention_keep_bytes(shape) bytes, and the backward
// reads them back: 1 bit per element of memory instead of a Philox block per 8
// decisions in each backward pass. A square's 32 blocks are 32 consecutive
// bytes, one per lane of the warp that holds the square in any pass. p = 0
// keeps everything with scale exactly 1. Callers draw a fresh offset for every
// call that must be independent (every layer, every step).
#pragma once

#include <cstdint>

#include "core/philox.h"
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

  TANDEM_HD bool active() const { return p > 0.0f; }
  TANDEM_HD uint64_t subsequence() const { return dropout_subsequence(offset, step); }
};

// The Philox block holding the decision for (i, j) of head bh.
TANDEM_HD inline uint64_t attention_dropout_block(int64_t bh, int64_t i, int64_t j, int64_t seq) {
  const uint64_t n = (static_cast<uint64_t>(seq) + 15) / 16;
  const uint64_t square =
      (static_cast<uint64_t>(bh) * n + static_cast<uint64_t>(i) / 16) * n + static_cast<uint64_t>(j) / 16;
  return square * 32 + static_cast<uint64_t>(4 * (i % 8) + (j % 8) / 2);
}

// Bytes of the saved keep bits of a shape: one per Philox block, 32 per 16 x 16 square, ceil(S / 16)^2
// squares per head: S^2 / 8 per head when 16 divides S.
TANDEM_HD inline int64_t attention_keep_bytes(const AttentionShape& s) {
  const int64_t n = (s.seq + 15) / 16;
  return s.batch * s.heads * n * n * 32;
}

// Which of its block's 8 decisions is that of (i, j).
TANDEM_HD inline int attention_dropout_slot(int64_t i, int64_t j) {
  return static_cast<int>(4 * (j % 16 / 8) + 2 * (i % 16 / 8) + j % 2);
}

// The decision for (i, j) of head bh alone: a whole Philox block for one bit (tests, the definition).
TANDEM_HD inline bool attention_dropout_keep(const AttentionDropout& d, int64_t bh, int64_t i, int64_t j,
                                             int64_t seq) {
  const Philox4 block = philox_block(d.seed, d.subsequence(), attention_dropout_block(bh, i, j, seq));
  return dropout_keep_slot(block, attention_dropout_slot(i, j), dropout_threshold(d.p));
}

}  // namespace tandem::kernels
