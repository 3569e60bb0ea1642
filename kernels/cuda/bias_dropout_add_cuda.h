// CUDA y = dropout(x + bias) + residual and its backward; same contracts as
// kernels/cpu/bias_dropout_add_cpu.h (the same keep mask, bit for bit), queued on `stream`.
// step: null, or a device i64 step count; the kernels then use dropout_subsequence(subsequence, step).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void bias_dropout_add_forward_cuda(const void* x, const void* bias, const void* residual, void* y, DType t,
                                   int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence,
                                   const int64_t* step, void* stream);
void bias_dropout_add_backward_cuda(const void* dy, void* dx, void* dbias, DType t, int64_t rows, int64_t dim, float p,
                                    uint64_t seed, uint64_t subsequence, const int64_t* step, int device,
                                    void* stream);

}  // namespace tandem::kernels
