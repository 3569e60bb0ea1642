// The element kernels Tensor and autograd need themselves: dtype conversion,
// fill, and gradient accumulation (dst += src). CPU versions here; CUDA
// versions (core/cuda/copy_kernels.cu) run on the given stream.
//
// Conversion goes through f32 for 16-bit floats (round to nearest even) and
// through f64 otherwise; accumulation is done in acc_t (f32, or f64 for f64).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem {

void convert_host(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);
void fill_host(void* dst, DType type, int64_t n, double value);
void accumulate_host(void* dst, const void* src, DType type, int64_t n);

#if TANDEM_WITH_CUDA
void convert_cuda(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, void* stream);
void fill_cuda(void* dst, DType type, int64_t n, double value, void* stream);
void accumulate_cuda(void* dst, const void* src, DType type, int64_t n, void* stream);
#endif

}  // namespace tandem
