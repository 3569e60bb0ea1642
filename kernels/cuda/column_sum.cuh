// Deterministic column sums of [rows, dim] data (bias and layer-norm parameter
// gradients), in two passes with no atomics.
//
// Pass 1 (in the op's own kernel): the rows are dealt to `slots` row slots
// (slot s takes rows s, s + slots, s + 2 slots, ...), and each slot's f32 sum
// of its rows is written to partial[s, :] (how a kernel's threads walk a slot:
// column_sum_kernels.cuh). Pass 2 (column_sum_finish, its kernel in
// column_sum_kernels.cuh): 16 lanes per column sum the slots lane-strided,
// then lane sums are added in lane order.
// The slot count (kernels/column_sum_slots.h) depends only on the shape, so the
// order of additions for every column, and hence the result bits, depend only
// on the shape and TANDEM_COLUMN_SUM's walk: not on the GPU or the run, nor on
// the vector width (except in layer norm's lanes kernel, whose groups follow
// the layout). Extra traffic: 2 * slots * dim * 4 bytes.
#pragma once

#include <cstdint>

#include "core/cuda_check.h"
#include "kernels/column_sum_slots.h"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

template <class Out>
void column_sum_finish(const float* partial, int64_t slots, int64_t dim, Out* out, cudaStream_t stream) {
  column_sum_finish_kernel<Out>
      <<<dim3(blocks_for(dim, 32, INT32_MAX), 1), dim3(32, 16), 0, stream>>>(partial, out, nullptr, nullptr, slots, dim);
  TANDEM_CUDA_CHECK_LAUNCH();
}

// Two column sums of the same shape in one launch (layer norm's dweight and dbias).
template <class Out>
void column_sum_finish(const float* partial0, Out* out0, const float* partial1, Out* out1, int64_t slots, int64_t dim,
                       cudaStream_t stream) {
  column_sum_finish_kernel<Out>
      <<<dim3(blocks_for(dim, 32, INT32_MAX), 2), dim3(32, 16), 0, stream>>>(partial0, out0, partial1, out1, slots, dim);
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
