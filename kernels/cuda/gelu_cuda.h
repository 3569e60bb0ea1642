// CUDA GELU and bias + GELU (with or without the dropout after it); same contracts as
// kernels/cpu/gelu_cpu.h, queued on `stream`.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/gelu_formula.h"

namespace tandem::kernels {

void gelu_forward_cuda(const void* x, void* y, DType t, int64_t n, GeluApproximation approx, void* stream);
void gelu_backward_cuda(const void* dy, const void* x, void* dx, DType t, int64_t n, GeluApproximation approx,
                        void* stream);
void bias_gelu_forward_cuda(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                            GeluApproximation approx, void* stream);
// dbias null under TANDEM_BIAS_GRADIENT=gemm (kernels/bias_gradient.h), here and with dropout below:
// no column sums, the rows walk of bias_gelu_kernels.cuh (the same dx bits).
void bias_gelu_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                             int64_t rows, int64_t dim, GeluApproximation approx, int device, void* stream);

// TANDEM_GELU_DROPOUT=fused: dropout(bias_gelu(x, bias)) in one pass, and its backward (dy: the
// gradient of dropout's output) in one pass: the bits of bias_gelu_forward_cuda then
// bias_dropout_add_forward_cuda without bias or residual (and of their backwards in reverse), the
// same keep mask (kernels/dropout_mask.h). step: null, or a device i64 step count (as for dropout).
// keep_out (TANDEM_DROPOUT_KEEP=saved): null, or dropout_keep_bytes(rows * dim) bytes the forward
// fills with the keep decisions (kernels/cuda/dropout_factors.cuh); keep_in: null (the backward
// computes the decisions again), or those bytes, which the backward reads instead, for the same bits.
void bias_gelu_dropout_forward_cuda(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                                    GeluApproximation approx, float p, uint64_t seed, uint64_t subsequence,
                                    const int64_t* step, void* stream, uint8_t* keep_out = nullptr);
void bias_gelu_dropout_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                                     int64_t rows, int64_t dim, GeluApproximation approx, float p, uint64_t seed,
                                     uint64_t subsequence, const int64_t* step, int device, void* stream,
                                     const uint8_t* keep_in = nullptr);

}  // namespace tandem::kernels
