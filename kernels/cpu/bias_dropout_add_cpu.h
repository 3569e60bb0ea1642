// CPU reference for the sublayer epilogue y = dropout(x + bias) + residual
// over [rows, dim] (kernels/bias_dropout_add.h), with the keep mask of
// kernels/dropout_mask.h on the flat element index. Arithmetic in acc_t, one
// rounding per output.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// bias [dim] and residual [rows, dim] may be null. p in [0, 1]; p == 0 draws no random numbers.
void bias_dropout_add_forward_cpu(const void* x, const void* bias, const void* residual, void* y, DType t,
                                  int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence);
// du = dy * keep * scale (dy when p == 0): written to dx if non-null, column-summed into dbias
// (acc_t, rounded once) if non-null. The residual's gradient is dy itself.
void bias_dropout_add_backward_cpu(const void* dy, void* dx, void* dbias, DType t, int64_t rows, int64_t dim, float p,
                                   uint64_t seed, uint64_t subsequence);

}  // namespace tandem::kernels
