// CUDA transpose; same contract as kernels/cpu/transpose_cpu.h, queued on `stream`.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels {

void transpose_cuda(const void* src, void* dst, int64_t rows, int64_t cols, size_t element_size, void* stream);

}  // namespace tandem::kernels
