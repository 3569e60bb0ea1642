// CPU transpose: dst[c * rows + r] = src[r * cols + c] for elements of
// `element_size` bytes (1, 2, 4 or 8), in 32 x 32 blocks so that both the
// reads and the writes stay in cache.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels {

void transpose_cpu(const void* src, void* dst, int64_t rows, int64_t cols, size_t element_size);

}  // namespace tandem::kernels
