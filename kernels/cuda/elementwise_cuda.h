// CUDA elementwise kernels; same contracts as kernels/cpu/elementwise_cpu.h,
// queued on `stream` (a cudaStream_t).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/elementwise_cpu.h"  // BinaryOp

namespace tandem::kernels {

void binary_cuda(BinaryOp op, const void* a, const void* b, void* out, DType t, int64_t n, void* stream);
void scale_cuda(const void* x, void* out, DType t, int64_t n, double alpha, void* stream);
void relu_forward_cuda(const void* x, void* y, DType t, int64_t n, void* stream);
void relu_backward_cuda(const void* dy, const void* x, void* dx, DType t, int64_t n, void* stream);

}  // namespace tandem::kernels
