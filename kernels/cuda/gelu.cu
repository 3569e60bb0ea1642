// GELU (exact erf or tanh approximation) and the fused bias + GELU on the GPU.
//
// gelu forward/backward: one pass over n elements, 16-byte vectors where the
// pointers allow (traffic: 2 or 3 * n * sizeof(T)). bias_gelu: [rows, dim]
// with one thread per vector column (its bias kept in registers) walking the
// rows; forward reads x and writes y. Backward reads dy and x, writes dx and
// folds du = dy * gelu'(x + b) into per-column f32 sums for the bias gradient
// (kernels/cuda/column_sum.cuh: deterministic; the rows a thread walks are
// TANDEM_COLUMN_SUM's, column_sum_kernels.cuh); rows are processed four at a
// time so four loads per tensor are in flight per thread. All memory bound:
// erff/tanhf/expf cost ~20-40 FLOPs per element, below the ~20 FLOP/byte
// balance point of an H100 for 4-byte elements and close to it for 2-byte ones.
// Numerics: f32 math (x + b not rounded before the GELU), one rounding per output.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/gelu_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kRowBatch = 4;

template <class T, int V>
__global__ void gelu_forward_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t nvec, GeluApproximation a) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[V];
    load_vec<V>(x + i * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = gelu_value(v[k], a);
    store_vec<V>(y + i * V, v);
  }
}

template <class T, int V>
__global__ void gelu_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                                     int64_t nvec, GeluApproximation a) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float g[V], v[V];
    load_vec<V>(dy + i * V, g);
    load_vec<V>(x + i * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = g[k] * gelu_derivative(v[k], a);
    store_vec<V>(dx + i * V, v);
  }
}

template <class T, int V>
__global__ void bias_gelu_forward_kernel(const T* __restrict__ x, const T* __restrict__ b, T* __restrict__ y,
                                         int64_t rows, int64_t dim, GeluApproximation a) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  float bv[V];
  load_vec<V>(b + c * V, bv);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    load_vec<V>(x + r * dim + c * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = gelu_value(v[k] + bv[k], a);
    store_vec<V>(y + r * dim + c * V, v);
  }
}

// A thread walks its slot's rows (column_sum_kernels.cuh: TANDEM_COLUMN_SUM's thread or block walk)
// four at a time.
template <class T, int V, bool PerBlock>
__global__ void bias_gelu_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ b,
                                          T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t dim,
                                          int64_t slots, GeluApproximation a) {
  const auto [c, w, active] = column_sum_thread<PerBlock, V>(dim, slots);
  if (!PerBlock && !active) return;
  float bv[V], acc[V];
  fill(acc, 0.0f);
  if (active) {
    load_vec<V>(b + c * V, bv);
    for (int64_t r0 = w.first; r0 < rows; r0 += kRowBatch * w.stride) {
      float g[kRowBatch][V], v[kRowBatch][V];
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const int64_t r = r0 + u * w.stride;
        if (r < rows) {
          load_vec<V>(dy + r * dim + c * V, g[u]);
          load_vec<V>(x + r * dim + c * V, v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const int64_t r = r0 + u * w.stride;
        if (r >= rows) break;
        float du[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          du[k] = g[u][k] * gelu_derivative(v[u][k] + bv[k], a);
          acc[k] += du[k];
        }
        if (dx) store_vec<V>(dx + r * dim + c * V, du);
      }
    }
  }
  store_slot_sums<PerBlock, V>(acc, active, c, w, dim, partial);
}

}  // namespace

void gelu_forward_cuda(const void* x, void* y, DType t, int64_t n, GeluApproximation approx, void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "gelu_forward_cuda", [&] {
    const bool vec = rows_vectorizable(n, sizeof(scalar_t), {x, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      gelu_forward_kernel<scalar_t, V><<<blocks_for(n / V, kThreads, 132 * 16), kThreads, 0,
                                         static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(x), static_cast<scalar_t*>(y), n / V, approx);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void gelu_backward_cuda(const void* dy, const void* x, void* dx, DType t, int64_t n, GeluApproximation approx,
                        void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "gelu_backward_cuda", [&] {
    const bool vec = rows_vectorizable(n, sizeof(scalar_t), {dy, x, dx});
    with_width<scalar_t>(vec, [&]<int V>() {
      gelu_backward_kernel<scalar_t, V><<<blocks_for(n / V, kThreads, 132 * 16), kThreads, 0,
                                          static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(x), static_cast<scalar_t*>(dx), n / V, approx);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void bias_gelu_forward_cuda(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                            GeluApproximation approx, void* stream) {
  if (rows == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_gelu_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, bias, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, rows);
      const dim3 grid(blocks_for(dim / V, block.x, INT32_MAX), blocks_for(rows, block.y * kRowBatch, 65535));
      bias_gelu_forward_kernel<scalar_t, V><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(x), static_cast<const scalar_t*>(bias), static_cast<scalar_t*>(y), rows, dim,
          approx);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void bias_gelu_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                             int64_t rows, int64_t dim, GeluApproximation approx, int device, void* stream) {
  if (dim == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t slots = column_sum_slots(rows, dim);
  PartialSums partial(device, dbias && rows > 0 ? slots : 0, dim, 1, s);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_gelu_backward_cuda", [&] {
    if (rows > 0) {
      const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, x, bias, dx});
      const bool per_block = column_sum_kernel() == ColumnSumKernel::Block;
      with_width<scalar_t>(vec, [&]<int V>() {
        const ColumnSumLaunch l = column_sum_launch(dim / V, rows, slots, per_block);
        with_column_sum_walk(per_block, [&]<bool PerBlock>() {
          bias_gelu_backward_kernel<scalar_t, V, PerBlock><<<l.grid, l.block, 0, s>>>(
              static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(x), static_cast<const scalar_t*>(bias),
              static_cast<scalar_t*>(dx), partial.get(0), rows, dim, slots, approx);
          TANDEM_CUDA_CHECK_LAUNCH();
        });
      });
    }
    if (dbias) {
      if (rows == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dbias, 0, static_cast<size_t>(dim) * sizeof(scalar_t), s));
      else column_sum_finish(partial.get(0), slots, dim, static_cast<scalar_t*>(dbias), s);
    }
  });
}

}  // namespace tandem::kernels
