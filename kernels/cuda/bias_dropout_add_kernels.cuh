// y = dropout(x + bias) + residual on the GPU (each part optional) and its
// backward: the device code (kernels/cuda/bias_dropout_add.cu launches it; the
// emulated tests run it on the CPU, tests/kernels/bias_gelu_dropout_emulated_test.cc).
//
// Layout: [rows, dim] with one thread per vector column (bias in registers)
// walking rows; without a bias the launcher views the data as one long row, so
// 16-byte vectors apply whenever numel allows. Forward traffic: read x (and
// residual), write y. Backward: read dy, write dx, plus the bias-gradient
// partials (kernels/cuda/column_sum.cuh, deterministic; the rows a thread
// walks are TANDEM_COLUMN_SUM's, column_sum_kernels.cuh) when a bias is
// present; rows four at a time per thread. Without a bias gradient the data
// is one long row and each thread has one vector, so the four-row batch only
// costs registers (114 against 43 for the forward in 16 bits: a quarter of the
// threads per SM); TANDEM_DROPOUT_BACKWARD=flat (kernels/cuda/row_kernel_switches.h)
// compiles that case with a batch of one row (64 registers), the same
// arithmetic. The keep mask is recomputed from Philox (dropout_factors.cuh)
// instead of being stored: it matches kernels/dropout_mask.h, and the CPU
// reference, bit for bit. Numerics: f32 arithmetic, one rounding per output.
#pragma once

#include <cstdint>

#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/dropout_factors.cuh"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels::bias_dropout_add_detail {

constexpr int kRowBatch = 4;

// The V elements at flat index i0: y = dropout(x + bias) + residual (residual null: none), stored, and
// left in v unrounded. The one place the forward's per-element steps are written: the layer norm's
// fused kernel (layer_norm_kernels.cuh, ResidualIn) calls it too, so both give the same bits.
template <class T, int V>
__device__ __forceinline__ void forward_piece(const T* __restrict__ x, const float (&bias)[V],
                                              const T* __restrict__ residual, const DropoutMask& m, int64_t i0,
                                              T* __restrict__ y, float (&v)[V]) {
  float f[V], rv[V];
  load_vec<V>(x + i0, v);
  if (residual) load_vec<V>(residual + i0, rv);
  else fill(rv, 0.0f);
  keep_factors<V>(m, static_cast<uint64_t>(i0), f);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = dropout_add(v[k], bias[k], f[k], rv[k]);
  store_vec<V>(y + i0, v);
}

// The backward of the V elements at flat index i0, g their output gradient as stored: g times the
// keep factors, added to the bias gradient's column sums acc. The layer norm's fused backward
// (layer_norm_kernels.cuh, BranchGrad) calls it too.
template <int V>
__device__ __forceinline__ void backward_piece(const DropoutMask& m, int64_t i0, float (&g)[V], float (&acc)[V]) {
  float f[V];
  keep_factors<V>(m, static_cast<uint64_t>(i0), f);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    g[k] *= f[k];
    acc[k] += g[k];
  }
}

template <class T, int V>
__global__ void forward_kernel(const T* __restrict__ x, const T* __restrict__ b, const T* __restrict__ res,
                               T* __restrict__ y, int64_t rows, int64_t dim, DropoutMask m) {
  m.subsequence = dropout_subsequence(m.subsequence, m.step);
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  float bv[V];
  if (b) load_vec<V>(b + c * V, bv);
  else fill(bv, 0.0f);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    forward_piece<T, V>(x, bv, res, m, r * dim + c * V, y, v);
  }
}

// A thread walks its slot's rows (column_sum_kernels.cuh: TANDEM_COLUMN_SUM's thread or block walk,
// the block walk only with a bias gradient) RowBatch at a time (kRowBatch, or 1 for the one long
// row of TANDEM_DROPOUT_BACKWARD=flat).
template <class T, int V, int RowBatch, bool PerBlock>
__global__ void backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, float* __restrict__ partial,
                                int64_t rows, int64_t dim, int64_t slots, DropoutMask m) {
  m.subsequence = dropout_subsequence(m.subsequence, m.step);
  const auto [c, w, active] = column_sum_thread<PerBlock, V>(dim, slots);
  if (!PerBlock && !active) return;
  float acc[V];
  fill(acc, 0.0f);
  if (active)
    for (int64_t r0 = w.first; r0 < rows; r0 += RowBatch * w.stride) {
      float g[RowBatch][V];
#pragma unroll
      for (int u = 0; u < RowBatch; ++u)
        if (r0 + u * w.stride < rows) load_vec<V>(dy + (r0 + u * w.stride) * dim + c * V, g[u]);
#pragma unroll
      for (int u = 0; u < RowBatch; ++u) {
        const int64_t r = r0 + u * w.stride;
        if (r >= rows) break;
        backward_piece<V>(m, r * dim + c * V, g[u], acc);
        if (dx) store_vec<V>(dx + r * dim + c * V, g[u]);
      }
    }
  store_slot_sums<PerBlock, V>(acc, active, c, w, dim, partial);
}

}  // namespace tandem::kernels::bias_dropout_add_detail
