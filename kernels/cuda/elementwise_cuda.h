// CUDA elementwise kernels; same contracts as kernels/cpu/elementwise_cpu.h,
// queued on `stream` (a cudaStream_t).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/elementwise_cpu.h"  // BinaryOp
#include "kernels/cuda/cast_many_plan.h"

namespace tandem::kernels {

void binary_cuda(BinaryOp op, const void* a, const void* b, void* out, DType t, int64_t n, void* stream);
void scale_cuda(const void* x, void* out, DType t, int64_t n, double alpha, void* stream);
void relu_forward_cuda(const void* x, void* y, DType t, int64_t n, void* stream);
void relu_backward_cuda(const void* dy, const void* x, void* dx, DType t, int64_t n, void* stream);

// Converts every entry (an f32 tensor) to dst_type (bf16 or f16) in as few launches as the
// kernel's parameter block allows (96 tensors a launch: kernels/cuda/cast_many_plan.h).
void cast_many_cuda(const std::vector<cast_many_plan::Entry>& entries, DType dst_type, void* stream);

}  // namespace tandem::kernels
