// CUDA GELU and bias + GELU; same contracts as kernels/cpu/gelu_cpu.h, queued on `stream`.
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
void bias_gelu_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                             int64_t rows, int64_t dim, GeluApproximation approx, int device, void* stream);

}  // namespace tandem::kernels
