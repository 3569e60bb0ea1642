#include "kernels/cpu/transpose_cpu.h"

#include <algorithm>

#include "core/check.h"

namespace tandem::kernels {

namespace {

template <class E>
void transpose_blocks(const E* src, E* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
    }
}

}  // namespace

void transpose_cpu(const void* src, void* dst, int64_t rows, int64_t cols, size_t element_size) {
  switch (element_size) {
    case 1: transpose_blocks(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols); break;
    case 2: transpose_blocks(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), rows, cols); break;
    case 4: transpose_blocks(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), rows, cols); break;
    case 8: transpose_blocks(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), rows, cols); break;
    default: TANDEM_FAIL("transpose_cpu: unsupported element size {}", element_size);
  }
}

}  // namespace tandem::kernels
