// Deterministic column sums of [rows, dim] data (bias and layer-norm parameter
// gradients), in two passes with no atomics.
//
// Pass 1 (in the op's own kernel): the rows are dealt to `slots` row slots
// (slot s takes rows s, s + slots, s + 2 slots, ...), and each slot's f32 sum
// of its rows is written to partial[s, :] (how a kernel's threads walk a slot:
// column_sum_walk.cuh). Pass 2 (column_sum_finish): 16 lanes
// per column sum the slots lane-strided, then lane sums are added in lane order.
// The slot count (kernels/column_sum_slots.h) depends only on the shape, so the
// order of additions for every column, and hence the result bits, depend only
// on the shape: not on the vector width, the GPU or the run. Extra traffic:
// 2 * slots * dim * 4 bytes.
#pragma once

#include <cstdint>

#include "core/cuda_check.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

template <class Out>
__global__ void column_sum_finish_kernel(const float* __restrict__ partial, int64_t slots, int64_t dim,
                                         Out* __restrict__ out) {
  __shared__ float lanes[16][33];
  const int64_t col = blockIdx.x * 32ll + threadIdx.x;
  float a = 0.0f;
  if (col < dim)
    for (int64_t s = threadIdx.y; s < slots; s += 16) a += partial[s * dim + col];
  lanes[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && col < dim) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; ++k) t += lanes[k][threadIdx.x];
    out[col] = from_f32<Out>(t);
  }
}

template <class Out>
void column_sum_finish(const float* partial, int64_t slots, int64_t dim, Out* out, cudaStream_t stream) {
  column_sum_finish_kernel<Out><<<blocks_for(dim, 32, INT32_MAX), dim3(32, 16), 0, stream>>>(partial, slots, dim, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

// Scratch for `count` partial-sum arrays of [slots, dim] f32; get(i) is the i-th (null when empty).
class PartialSums {
 public:
  PartialSums(int device, int64_t slots, int64_t dim, int count, cudaStream_t stream)
      : stride_(slots * dim), scratch_(device, static_cast<size_t>(slots * dim * count) * sizeof(float), stream) {}
  float* get(int index) const { return stride_ ? scratch_.as<float>() + index * stride_ : nullptr; }

 private:
  int64_t stride_;
  Scratch scratch_;
};

}  // namespace tandem::kernels
