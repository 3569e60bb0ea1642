// linear on the GPU: y = x w^T + b and its backward.
//
// GEMMs: cuBLAS (cublasGemmEx) with CUBLAS_COMPUTE_32F: f32 accumulation for
// every input type, no TF32 (f32 matches the CPU reference to rounding).
// Row-major tensors are column-major transposes, so
//   y^T[out,N]  = w[out,in]  . x^T[in,N]     -> gemm(T, N, out, N, in)
//   dx^T[in,N]  = w^T[in,out] . dy^T[out,N]  -> gemm(N, N, in, N, out)
//   dw^T[in,out] = x^T[in,N] . dy[N,out]     -> gemm(N, T, in, out, N)
// Bias forward: one pass adding b[j] to each y[r, j] (reads and writes N*out
// elements). Bias backward: db[j] = sum_r dy[r, j], a deterministic column
// reduction: 32 columns per block, 8 row-strided partial sums per column in f32,
// combined in a fixed order in shared memory (no atomics).
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/linear_cuda.h"

namespace tandem::kernels {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: TANDEM_FAIL("linear on CUDA: dtype {} is not supported (f32, f16, bf16)", dtype_name(t));
  }
}

// C[m,n] (column-major, ldc) = A op . B op, f32 compute.
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
          const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc, DType t) {
  const float alpha = 1.0f, beta = 0.0f;
  cudaDataType_t dt = cuda_type(t);
  TANDEM_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha,
                                   a, dt, static_cast<int>(lda), b, dt, static_cast<int>(ldb), &beta, c, dt,
                                   static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <class T>
__global__ void add_bias_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t rows, int64_t out) {
  const int64_t n = rows * out;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = store<T>(load(y[i]) + load(b[i % out]));
}

constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

template <class T>
__global__ void bias_grad_kernel(const T* __restrict__ dy, T* __restrict__ db, int64_t rows, int64_t out) {
  __shared__ float partial[kRowLanes][kColTile];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColTile) + threadIdx.x;
  float s = 0.0f;
  if (col < out)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) s += load(dy[r * out + col]);
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < out) {
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) total += partial[k][threadIdx.x];
    db[col] = store<T>(total);
  }
}

}  // namespace

void linear_forward_cuda(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in,
                         int64_t out, DType t, int device, void* stream) {
  if (rows == 0 || out == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  cublasHandle_t h = cublas_handle(device, s);
  if (in == 0) {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(rows * out) * dtype_size(t), s));
  } else {
    gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in, y, out, t);
  }
  if (b) {
    TANDEM_DISPATCH_FLOAT_NO_F64(t, "linear bias", [&] {
      int64_t n = rows * out;
      int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 8192));
      add_bias_kernel<<<blocks, 256, 0, s>>>(static_cast<scalar_t*>(y), static_cast<const scalar_t*>(b), rows, out);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  }
}

void linear_backward_cuda(const void* dy, const void* x, const void* w, void* dx, void* dw, void* db, int64_t rows,
                          int64_t in, int64_t out, DType t, int device, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cublasHandle_t h = cublas_handle(device, s);
  const size_t es = dtype_size(t);
  if (dx && rows * in > 0) {
    if (out == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dx, 0, static_cast<size_t>(rows * in) * es, s));
    else gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out, dx, in, t);
  }
  if (dw && out * in > 0) {
    if (rows == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(out * in) * es, s));
    else gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, dw, in, t);
  }
  if (db && out > 0) {
    TANDEM_DISPATCH_FLOAT_NO_F64(t, "linear bias grad", [&] {
      dim3 block(kColTile, kRowLanes);
      dim3 grid(static_cast<unsigned>((out + kColTile - 1) / kColTile));
      bias_grad_kernel<<<grid, block, 0, s>>>(static_cast<const scalar_t*>(dy), static_cast<scalar_t*>(db), rows,
                                               out);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  }
}

}  // namespace tandem::kernels
