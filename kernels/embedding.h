// Token + learned position embedding, the input layer of the encoder.
//
// embedding(ids [B, S] i32/i64, tok_table [V, D], pos_table [P, D]) ->
// [B, S, D] with out[b, s] = tok_table[ids[b, s]] + pos_table[s]; needs S <= P.
// The tables share one float dtype and device (mixed precision casts them
// first, see cast()); the ids live on the same device. The output is in the
// tables' dtype, the sum computed in f32 (f64 for f64) and rounded once.
//
// Backward gives dense gradients for both tables (rows of unused ids and of
// positions >= S are zero). They are deterministic: each table row is summed
// over its occurrences in a fixed order, with no floating-point atomics (on the
// GPU: ids radix-sorted with their positions, then one thread block per
// distinct id sums its rows).
//
// An id outside [0, V) is an Error naming it and its position: immediately on
// the CPU, through kernels/index_errors.h on the GPU.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor embedding(const Tensor& ids, const Tensor& tok_table, const Tensor& pos_table);

}  // namespace tandem::kernels
