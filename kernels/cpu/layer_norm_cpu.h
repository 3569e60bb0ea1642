// CPU reference for layer normalisation over the last dimension.
//
// x, y: [rows, dim] of float dtype t. weight, bias: [dim] of dtype wt, which
// is t or f32 (f32 master parameters with 16-bit activations). mean and rstd:
// [rows] of acc_dtype(t) (kernels/acc_dtype.h): f64 for f64 data, f32 otherwise; the
// statistics are always computed in that type (two passes: mean, then the
// biased variance of x - mean), whatever t is.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps). mean/rstd may be null.
void layer_norm_forward_cpu(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                            int64_t rows, int64_t dim, double eps, DType t, DType wt);

// With xhat = (x - mean) * rstd and g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum_rows dy * xhat,  dbias = sum_rows dy.
// Any of dx, dweight, dbias may be null. Column sums accumulate in the statistics type.
void layer_norm_backward_cpu(const void* dy, const void* x, const void* weight, const void* mean, const void* rstd,
                             void* dx, void* dweight, void* dbias, int64_t rows, int64_t dim, DType t, DType wt);

}  // namespace tandem::kernels
