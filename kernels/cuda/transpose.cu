// Transpose of a [rows, cols] matrix into [cols, rows], any element size.
//
// The classic shared-memory tile: a 32 x 8 block moves a 32 x 32 tile, reading
// rows of the source and writing rows of the destination, both coalesced; the
// tile has one padding column so the column reads from shared memory hit 32
// different banks. Traffic: each element read once and written once. No
// arithmetic: bit-exact. Grid: x over column tiles, y over row tiles (at most
// 65535 row tiles: 2M rows, far beyond what DDP's compression hooks need).
#include "core/check.h"
#include "core/cuda_check.h"
#include "kernels/cuda/transpose_cuda.h"

namespace tandem::kernels {

namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

template <class E>
__global__ void transpose_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t rows, int64_t cols) {
  __shared__ E tile[kTile][kTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * static_cast<int64_t>(kTile);
  for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const int64_t r = r0 + k;
    if (r < rows && c < cols) tile[k][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  // Write: destination row = source column (blockIdx.x's tile), destination column = source row.
  const int64_t out_col = r0 + threadIdx.x;
  for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const int64_t out_row = blockIdx.x * static_cast<int64_t>(kTile) + k;
    if (out_row < cols && out_col < rows) dst[out_row * rows + out_col] = tile[threadIdx.x][k];
  }
}

template <class E>
void launch(const void* src, void* dst, int64_t rows, int64_t cols, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  TANDEM_CHECK(grid.y <= 65535, "transpose_cuda: {} rows is more than the grid allows", rows);
  transpose_kernel<E><<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(static_cast<const E*>(src), static_cast<E*>(dst),
                                                                      rows, cols);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void transpose_cuda(const void* src, void* dst, int64_t rows, int64_t cols, size_t element_size, void* stream) {
  if (rows == 0 || cols == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (element_size) {
    case 1: launch<uint8_t>(src, dst, rows, cols, s); break;
    case 2: launch<uint16_t>(src, dst, rows, cols, s); break;
    case 4: launch<uint32_t>(src, dst, rows, cols, s); break;
    case 8: launch<uint64_t>(src, dst, rows, cols, s); break;
    default: TANDEM_FAIL("transpose_cuda: unsupported element size {}", element_size);
  }
}

}  // namespace tandem::kernels
