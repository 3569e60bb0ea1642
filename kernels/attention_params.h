// What the CPU reference and the CUDA kernels of attention agree on: the
// problem's shape and the attention-dropout rule.
//
// Dropout on the attention probabilities keeps element (b, h, i, j) (query i,
// key j of head h in batch row b) when u >= p, where u is a 24-bit uniform from
// the Philox stream (seed, subsequence = offset): word j % 4 of block
//   ((b * H + h) * S + i) * ceil(S / 4) + j / 4.
// So the decision is a pure function of (seed, offset, b, h, i, j) and the
// shape, identical on host and device, and the backward recomputes it instead
// of storing an S x S mask. Kept probabilities are scaled by 1 / (1 - p); p = 0
// keeps everything with scale exactly 1. Callers draw a fresh offset for every
// call that must be independent (every layer, every step).
#pragma once

#include <cstdint>

#include "core/philox.h"

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

  TANDEM_HD bool active() const { return p > 0.0f; }
};

// The Philox block holding the decisions for keys j..j+3 (j a multiple of 4) of row (bh = b * H + h, i).
TANDEM_HD inline uint64_t attention_dropout_block(int64_t bh, int64_t i, int64_t j, int64_t seq) {
  return (static_cast<uint64_t>(bh) * static_cast<uint64_t>(seq) + static_cast<uint64_t>(i)) *
             ((static_cast<uint64_t>(seq) + 3) / 4) +
         static_cast<uint64_t>(j) / 4;
}

// The decision for key j, given the block that holds it.
TANDEM_HD inline bool attention_dropout_keep(const Philox4& block, int64_t j, float p) {
  return uint_to_unit_float(block.v[j & 3]) >= p;
}

TANDEM_HD inline bool attention_dropout_keep(const AttentionDropout& d, int64_t bh, int64_t i, int64_t j,
                                             int64_t seq) {
  return attention_dropout_keep(philox_block(d.seed, d.offset, attention_dropout_block(bh, i, j, seq)), j, d.p);
}

}  // namespace tandem::kernels
