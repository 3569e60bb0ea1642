// CPU linear. Rows = N, x [N, in], w [out, in], y [N, out].
// f32 runs the selected ISA's threaded GEMM on the buffers in place
// (kernels/cpu/isa/); f64 and 16-bit inputs take the reference path: Eigen on
// acc_t matrices (16-bit inputs widened to f32), rounded once.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// b may be null.
void linear_forward_cpu(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in,
                        int64_t out, DType t);
// Any of dx, dw, db may be null (not needed). dx = dy w; dw = dy^T x; db = sum over rows of dy.
// dw is of dw_dtype and db of db_dtype: t, or for a master parameter f32 or f64 (the same sum, rounded
// once to that dtype).
void linear_backward_cpu(const void* dy, const void* x, const void* w, void* dx, void* dw, void* db, int64_t rows,
                         int64_t in, int64_t out, DType t, DType dw_dtype, DType db_dtype);

}  // namespace tandem::kernels
