// The epilogue of a transformer sublayer, y = dropout(x + bias) + residual,
// and its parts: dropout alone and the bias add over the last dimension.
//
// Dropout keeps element i (flat, row-major index of x) iff the i-th 16-bit
// uniform of the Philox stream (seed, subsequence) is >= p rounded to a
// multiple of 2^-16, and scales kept values by the inverse of that rounded keep
// rate (kernels/dropout_mask.h): the mask is bit-identical on the CPU and the
// GPU. Backward recomputes the mask from (seed, subsequence) instead of storing
// it: that saves a byte per element of memory and a write + read of it, and
// costs one Philox block (10 rounds) per 8 elements. Callers pick a fresh
// (seed, subsequence) per call (e.g. seed = run seed, subsequence = a counter
// of dropout calls per step).
// p = 0 or training = false is the identity: dropout() then returns x itself.
//
// x, bias [D] and residual (x's shape) share dtype and device; arithmetic is
// f32 (f64 for f64) with one rounding per output. The bias gradient is a
// deterministic f32 column sum.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {

// The stream an op with dropout keeps for its backward: p when training, 0 (no dropout) otherwise.
// Throws Error naming `op` unless p is in [0, 1].
DropoutStream dropout_stream(const char* op, double p, bool training, uint64_t seed, uint64_t subsequence,
                             const int64_t* step);

// step: null, or the step count in x's memory space (a capturable step): the Philox
// subsequence is then dropout_subsequence(subsequence, step) (kernels/dropout_mask.h),
// read when the kernels run, forward and backward.
Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed, uint64_t subsequence,
               const int64_t* step = nullptr);

// x [..., D] + bias [D].
Tensor add_bias(const Tensor& x, const Tensor& bias);

// dropout(x + bias) + residual; bias and residual may be undefined (left out).
Tensor bias_dropout_add(const Tensor& x, const Tensor& bias, const Tensor& residual, double p, bool training,
                        uint64_t seed, uint64_t subsequence, const int64_t* step = nullptr);

}  // namespace tandem::kernels
