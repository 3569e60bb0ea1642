// CPU reference for GELU and the fused bias + GELU (kernels/gelu_formula.h).
// Arithmetic in acc_t (f32 for 16-bit types, f64 for f64), one rounding per output.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/gelu_formula.h"

namespace tandem::kernels {

void gelu_forward_cpu(const void* x, void* y, DType t, int64_t n, GeluApproximation approx);
// dx = dy * gelu'(x)
void gelu_backward_cpu(const void* dy, const void* x, void* dx, DType t, int64_t n, GeluApproximation approx);

// x, y: [rows, dim]; bias: [dim]. y = gelu(x + bias), with x + bias kept in acc_t (not rounded).
void bias_gelu_forward_cpu(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                           GeluApproximation approx);
// du = dy * gelu'(x + bias); dx = du (rounded to t), dbias = column sums of du in acc_t (rounded once).
// dx or dbias may be null.
void bias_gelu_backward_cpu(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                            int64_t rows, int64_t dim, GeluApproximation approx);

}  // namespace tandem::kernels
