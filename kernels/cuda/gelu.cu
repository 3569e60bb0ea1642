// GELU (exact erf or tanh approximation) on the GPU, and the launches of the
// fused bias + GELU (its kernels, optionally with dropout: kernels/cuda/bias_gelu_kernels.cuh).
//
// gelu forward/backward: one pass over n elements, 16-byte vectors where the
// pointers allow (traffic: 2 or 3 * n * sizeof(T)). Memory bound (see
// bias_gelu_kernels.cuh). Numerics: f32 math, one rounding per output.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/bias_gradient.h"
#include "kernels/cuda/bias_gelu_kernels.cuh"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/dropout_factors.cuh"
#include "kernels/cuda/gelu_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

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

namespace {

using namespace bias_gelu_detail;

// The forward's grid and block over nvec vector columns of `rows` rows (a thread per vector column,
// about kRowBatch rows per thread row), which the backward without a bias gradient shares.
struct RowsWalk {
  dim3 grid, block;
};

RowsWalk rows_walk(int64_t nvec, int64_t rows) {
  const dim3 block = column_block(nvec, rows);
  return {dim3(blocks_for(nvec, block.x, INT32_MAX), blocks_for(rows, block.y * kRowBatch, 65535)), block};
}

template <bool Dropout>
void launch_bias_gelu_forward(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                              GeluApproximation approx, const DropoutMask& m, void* stream, uint8_t* keep_out) {
  if (rows == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_gelu_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, bias, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const auto [grid, block] = rows_walk(dim / V, rows);
      const auto* px = static_cast<const scalar_t*>(x);
      const auto* pb = static_cast<const scalar_t*>(bias);
      auto* py = static_cast<scalar_t*>(y);
      if constexpr (Dropout) {
        if (keep_out)
          bias_gelu_dropout_forward_saving_keep_kernel<scalar_t, V>
              <<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(px, pb, py, rows, dim, approx, m, keep_out);
        else
          bias_gelu_dropout_forward_kernel<scalar_t, V><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
              px, pb, py, rows, dim, approx, m);
      } else
        bias_gelu_forward_kernel<scalar_t, V><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(px, pb, py, rows,
                                                                                                   dim, approx);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

// Without a bias gradient, under TANDEM_BIAS_GRADIENT=gemm (kernels/bias_gradient.h): the rows walk,
// launched as the forward is (bias_gelu_kernels.cuh). Nothing to do without dx either.
template <bool Dropout>
void launch_bias_gelu_backward_rows(const void* dy, const void* x, const void* bias, void* dx, DType t, int64_t rows,
                                    int64_t dim, GeluApproximation approx, const DropoutMask& m, cudaStream_t s,
                                    const uint8_t* keep_in) {
  if (rows == 0 || !dx) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_gelu_backward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, x, bias, dx});
    with_width<scalar_t>(vec, [&]<int V>() {
      const auto [grid, block] = rows_walk(dim / V, rows);
      const auto* pdy = static_cast<const scalar_t*>(dy);
      const auto* px = static_cast<const scalar_t*>(x);
      const auto* pb = static_cast<const scalar_t*>(bias);
      auto* pdx = static_cast<scalar_t*>(dx);
      if constexpr (Dropout) {
        if (keep_in)
          bias_gelu_dropout_backward_rows_saved_keep_kernel<scalar_t, V>
              <<<grid, block, 0, s>>>(pdy, px, pb, pdx, rows, dim, approx, m, keep_in);
        else
          bias_gelu_dropout_backward_rows_kernel<scalar_t, V><<<grid, block, 0, s>>>(pdy, px, pb, pdx, rows, dim,
                                                                                     approx, m);
      } else
        bias_gelu_backward_rows_kernel<scalar_t, V><<<grid, block, 0, s>>>(pdy, px, pb, pdx, rows, dim, approx);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

template <bool Dropout>
void launch_bias_gelu_backward(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                               int64_t rows, int64_t dim, GeluApproximation approx, const DropoutMask& m, int device,
                               void* stream, const uint8_t* keep_in) {
  if (dim == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (!dbias && bias_gradient() == BiasGradient::Gemm) {
    launch_bias_gelu_backward_rows<Dropout>(dy, x, bias, dx, t, rows, dim, approx, m, s, keep_in);
    return;
  }
  const int64_t slots = column_sum_slots(rows, dim);
  PartialSums partial(device, dbias && rows > 0 ? slots : 0, dim, 1, s);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_gelu_backward_cuda", [&] {
    if (rows > 0) {
      const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, x, bias, dx});
      const bool per_block = column_sum_kernel() == ColumnSumKernel::Block;
      with_width<scalar_t>(vec, [&]<int V>() {
        const ColumnSumLaunch l = column_sum_launch(dim / V, rows, slots, per_block);
        with_column_sum_walk(per_block, [&]<bool PerBlock>() {
          const auto* pdy = static_cast<const scalar_t*>(dy);
          const auto* px = static_cast<const scalar_t*>(x);
          const auto* pb = static_cast<const scalar_t*>(bias);
          auto* pdx = static_cast<scalar_t*>(dx);
          if constexpr (Dropout) {
            if (keep_in)
              bias_gelu_dropout_backward_saved_keep_kernel<scalar_t, V, PerBlock><<<l.grid, l.block, 0, s>>>(
                  pdy, px, pb, pdx, partial.get(0), rows, dim, slots, approx, m, keep_in);
            else
              bias_gelu_dropout_backward_kernel<scalar_t, V, PerBlock><<<l.grid, l.block, 0, s>>>(
                  pdy, px, pb, pdx, partial.get(0), rows, dim, slots, approx, m);
          } else
            bias_gelu_backward_kernel<scalar_t, V, PerBlock><<<l.grid, l.block, 0, s>>>(pdy, px, pb, pdx, partial.get(0),
                                                                                      rows, dim, slots, approx);
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

}  // namespace

void bias_gelu_forward_cuda(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                            GeluApproximation approx, void* stream) {
  launch_bias_gelu_forward<false>(x, bias, y, t, rows, dim, approx, dropout_mask(0.0f, 0, 0, nullptr), stream,
                                  nullptr);
}

void bias_gelu_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                             int64_t rows, int64_t dim, GeluApproximation approx, int device, void* stream) {
  launch_bias_gelu_backward<false>(dy, x, bias, dx, dbias, t, rows, dim, approx, dropout_mask(0.0f, 0, 0, nullptr),
                                   device, stream, nullptr);
}

void bias_gelu_dropout_forward_cuda(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                                    GeluApproximation approx, float p, uint64_t seed, uint64_t subsequence,
                                    const int64_t* step, void* stream, uint8_t* keep_out) {
  launch_bias_gelu_forward<true>(x, bias, y, t, rows, dim, approx, dropout_mask(p, seed, subsequence, step), stream,
                                 keep_out);
}

void bias_gelu_dropout_backward_cuda(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                                     int64_t rows, int64_t dim, GeluApproximation approx, float p, uint64_t seed,
                                     uint64_t subsequence, const int64_t* step, int device, void* stream,
                                     const uint8_t* keep_in) {
  launch_bias_gelu_backward<true>(dy, x, bias, dx, dbias, t, rows, dim, approx,
                                  dropout_mask(p, seed, subsequence, step), device, stream, keep_in);
}

}  // namespace tandem::kernels
