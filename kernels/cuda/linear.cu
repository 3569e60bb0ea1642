// linear on the GPU: y = x w^T + b and its backward.
//
// GEMMs: cuBLAS (cublasGemmEx) with CUBLAS_COMPUTE_32F: f32 accumulation for
// every input type, no TF32 (f32 matches the CPU reference to rounding).
// Row-major tensors are column-major transposes, so
//   y^T[out,N]  = w[out,in]  . x^T[in,N]     -> gemm(T, N, out, N, in)
//   dx^T[in,N]  = w^T[in,out] . dy^T[out,N]  -> gemm(N, N, in, N, out)
//   dw^T[in,out] = x^T[in,N] . dy[N,out]     -> gemm(N, T, in, out, N)
// dw of a master weight (kernels::LinearParameter) is f32 from 16-bit operands: cuBLAS stores its f32
// sum in an f32 C (CUDA_R_32F), with no rounding to the operands' type between; db of a master bias
// is the column sum's f32 result as it is (column_sum_finish's f32 output, layer norm's).
// Bias forward: one pass adding b to each row of y (reads and writes N*out
// elements), a thread per 16-byte vector of columns with its bias vector in
// registers and rows strided (no index arithmetic per element). Bias backward:
// db[j] = sum_r dy[r, j], the deterministic two-pass column sum of
// kernels/cuda/column_sum.cuh (the layout gelu and layer_norm use): pass 1
// (column_sum_kernels.cuh's kernel, either walk of TANDEM_COLUMN_SUM) reads dy
// once with 16-byte loads into per-slot f32 partial sums, pass 2 adds the
// slots in a fixed order, so the bits depend only on the shape and the walk.
// TANDEM_CUBLASLT_EPILOGUES (gemm_epilogue.h): by default the bias rides in the
// forward GEMM's epilogue, removing the separate bias pass; set to 1, db also
// rides in dw's GEMM (BGRADB); set to 0, neither. A bias the next op added
// (TANDEM_BIAS_GRADIENT=gemm: linear_deferred_bias) has its db in dw's GEMM
// unless the switch is 0.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/gemm_epilogue.h"
#include "kernels/cuda/linear_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

namespace {

// C[m,n] (column-major, ldc) = A op . B op, f32 compute; A and B of t, C of ct.
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
          const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc, DType t, DType ct) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t dt = cublas_data_type(t, "linear on CUDA"), dct = cublas_data_type(ct, "linear on CUDA");
  TANDEM_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha,
                                   a, dt, static_cast<int>(lda), b, dt, static_cast<int>(ldb), &beta, c, dct,
                                   static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// y[r, :] += b for the rows this thread's row lane visits; c is a vector column.
template <class T, int V>
__global__ void add_bias_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t rows, int64_t out) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= out) return;
  float bv[V];
  load_vec<V>(b + c * V, bv);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    load_vec<V>(y + r * out + c * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] += bv[k];
    store_vec<V>(y + r * out + c * V, v);
  }
}

}  // namespace

void linear_forward_cuda(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in,
                         int64_t out, DType t, int device, void* stream) {
  if (rows == 0 || out == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (b && in > 0 && cublaslt_epilogues() != CublasLtEpilogues::Off &&
      gemm_bias_lt(x, w, b, y, rows, in, out, t, device, s)) return;
  cublasHandle_t h = cublas_handle(device, s);
  if (in == 0) {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(rows * out) * dtype_size(t), s));
  } else {
    gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in, y, out, t, t);
  }
  if (b) {
    TANDEM_DISPATCH_FLOAT_NO_F64(t, "linear bias", [&] {
      with_width<scalar_t>(rows_vectorizable(out, sizeof(scalar_t), {y, b}), [&]<int V>() {
        const dim3 block = column_block(out / V, rows);
        const dim3 grid(blocks_for(out / V, block.x, INT32_MAX), blocks_for(rows, block.y * 4, 65535));
        add_bias_kernel<scalar_t, V>
            <<<grid, block, 0, s>>>(static_cast<scalar_t*>(y), static_cast<const scalar_t*>(b), rows, out);
        TANDEM_CUDA_CHECK_LAUNCH();
      });
    });
  }
}

void linear_backward_cuda(const void* dy, const void* x, const void* w, void* dx, void* dw, void* db, int64_t rows,
                          int64_t in, int64_t out, DType t, DType dw_dtype, DType db_dtype, int device, void* stream,
                          bool db_in_gemm) {
  TANDEM_CHECK((dw_dtype == t || dw_dtype == DType::F32) && (db_dtype == t || db_dtype == DType::F32),
               "linear backward on CUDA: {} weight and {} bias gradients of {} inputs", dtype_name(dw_dtype),
               dtype_name(db_dtype), dtype_name(t));
  auto s = static_cast<cudaStream_t>(stream);
  cublasHandle_t h = cublas_handle(device, s);
  const size_t es = dtype_size(t);
  if (dx && rows * in > 0) {
    if (out == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dx, 0, static_cast<size_t>(rows * in) * es, s));
    else gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out, dx, in, t, t);
  }
  const CublasLtEpilogues lt = cublaslt_epilogues();
  const bool bgradb = lt == CublasLtEpilogues::All || (db_in_gemm && lt != CublasLtEpilogues::Off);
  if (dw && db && rows > 0 && in > 0 && out > 0 && bgradb &&
      gemm_weight_bias_grad_lt(dy, x, dw, db, rows, in, out, t, dw_dtype, db_dtype, device, s))
    return;
  if (dw && out * in > 0) {
    if (rows == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(out * in) * dtype_size(dw_dtype), s));
    else gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, dw, in, t, dw_dtype);
  }
  if (db && out > 0) {
    TANDEM_DISPATCH_FLOAT_NO_F64(t, "linear bias grad", [&] {
      if (rows == 0) {
        TANDEM_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(out) * dtype_size(db_dtype), s));
        return;
      }
      const int64_t slots = column_sum_slots(rows, out);
      PartialSums partial(device, slots, out, 1, s);
      const bool per_block = column_sum_kernel() == ColumnSumKernel::Block;
      with_width<scalar_t>(rows_vectorizable(out, sizeof(scalar_t), {dy}), [&]<int V>() {
        const ColumnSumLaunch l = column_sum_launch(out / V, rows, slots, per_block);
        with_column_sum_walk(per_block, [&]<bool PerBlock>() {
          column_sum_partial_kernel<scalar_t, V, PerBlock>
              <<<l.grid, l.block, 0, s>>>(static_cast<const scalar_t*>(dy), partial.get(0), rows, out, slots);
          TANDEM_CUDA_CHECK_LAUNCH();
        });
      });
      if (db_dtype == DType::F32) column_sum_finish(partial.get(0), slots, out, static_cast<float*>(db), s);
      else column_sum_finish(partial.get(0), slots, out, static_cast<scalar_t*>(db), s);
    });
  }
}

}  // namespace tandem::kernels
