// CUDA full reductions; same contracts as kernels/cpu/reduce_cpu.h, queued on `stream`.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void sum_cuda(const void* x, void* out, DType t, int64_t n, double scale, int device, void* stream);
void broadcast_scalar_cuda(const void* dy, void* dx, DType t, int64_t n, double scale, void* stream);

}  // namespace tandem::kernels
