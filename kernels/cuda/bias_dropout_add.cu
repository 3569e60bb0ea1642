// y = dropout(x + bias) + residual on the GPU (each part optional), and its backward: the
// launches (the kernels, their traffic and numerics: kernels/cuda/bias_dropout_add_kernels.cuh).
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/bias_dropout_add_cuda.h"
#include "kernels/cuda/bias_dropout_add_kernels.cuh"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

using namespace bias_dropout_add_detail;

void bias_dropout_add_forward_cuda(const void* x, const void* bias, const void* residual, void* y, DType t,
                                   int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence,
                                   const int64_t* step, void* stream) {
  if (!bias) {  // purely elementwise: one long row
    dim *= rows;
    rows = 1;
  }
  if (rows == 0 || dim == 0) return;
  const DropoutMask m = dropout_mask(p, seed, subsequence, step);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_dropout_add_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, bias, residual, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, rows);
      const dim3 grid(blocks_for(dim / V, block.x, INT32_MAX), blocks_for(rows, block.y * kRowBatch, 65535));
      forward_kernel<scalar_t, V><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(x), static_cast<const scalar_t*>(bias), static_cast<const scalar_t*>(residual),
          static_cast<scalar_t*>(y), rows, dim, m);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void bias_dropout_add_backward_cuda(const void* dy, void* dx, void* dbias, DType t, int64_t rows, int64_t dim, float p,
                                    uint64_t seed, uint64_t subsequence, const int64_t* step, int device,
                                    void* stream) {
  if (!dbias) {  // no column sums: view as one long row
    dim *= rows;
    rows = 1;
  }
  if (dim == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const DropoutMask m = dropout_mask(p, seed, subsequence, step);
  const int64_t slots = column_sum_slots(rows, dim);
  PartialSums partial(device, dbias && rows > 0 ? slots : 0, dim, 1, s);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_dropout_add_backward_cuda", [&] {
    if (rows > 0) {
      const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, dx});
      const bool per_block = dbias && column_sum_kernel() == ColumnSumKernel::Block;
      with_width<scalar_t>(vec, [&]<int V>() {
        const ColumnSumLaunch l = column_sum_launch(dim / V, rows, slots, per_block);
        auto launch = [&]<int RowBatch, bool PerBlock>() {
          backward_kernel<scalar_t, V, RowBatch, PerBlock><<<l.grid, l.block, 0, s>>>(
              static_cast<const scalar_t*>(dy), static_cast<scalar_t*>(dx), partial.get(0), rows, dim, slots, m);
          TANDEM_CUDA_CHECK_LAUNCH();
        };
        if (per_block) launch.template operator()<kRowBatch, true>();
        else if (!dbias && dropout_backward_kernel() == DropoutBackwardKernel::Flat) launch.template operator()<1, false>();
        else launch.template operator()<kRowBatch, false>();
      });
    }
    if (dbias) {
      if (rows == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dbias, 0, static_cast<size_t>(dim) * sizeof(scalar_t), s));
      else column_sum_finish(partial.get(0), slots, dim, static_cast<scalar_t*>(dbias), s);
    }
  });
}

}  // namespace tandem::kernels
