// CPU reference for the elementwise kernels: plain loops over n elements,
// arithmetic in acc_t (f32 for 16-bit types, f64 for f64), one rounding per output.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

enum class BinaryOp { Add, Mul };

void binary_cpu(BinaryOp op, const void* a, const void* b, void* out, DType t, int64_t n);
void scale_cpu(const void* x, void* out, DType t, int64_t n, double alpha);
void relu_forward_cpu(const void* x, void* y, DType t, int64_t n);
// dx = dy where x > 0, else 0.
void relu_backward_cpu(const void* dy, const void* x, void* dx, DType t, int64_t n);

}  // namespace tandem::kernels
