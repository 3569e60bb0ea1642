// CUDA layer norm; same contracts as kernels/cpu/layer_norm_cpu.h (f32, f16,
// bf16 data; parameters of the data's dtype or f32; f32 statistics), queued on
// `stream`. dim <= 4096.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void layer_norm_forward_cuda(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                             int64_t rows, int64_t dim, double eps, DType t, DType wt, void* stream);
void layer_norm_backward_cuda(const void* dy, const void* x, const void* weight, const void* mean, const void* rstd,
                              void* dx, void* dweight, void* dbias, int64_t rows, int64_t dim, DType t, DType wt,
                              int device, void* stream);

}  // namespace tandem::kernels
