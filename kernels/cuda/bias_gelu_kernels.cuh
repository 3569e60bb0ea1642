// The fused bias + GELU on the GPU, forward and backward, optionally with the
// dropout that follows it in the transformer's feed-forward block: the device
// code (kernels/cuda/gelu.cu launches it; the emulated tests run it on the CPU,
// tests/kernels/bias_gelu_dropout_emulated_test.cc).
//
// [rows, dim] with one thread per vector column (its bias kept in registers)
// walking the rows. Forward reads x and writes y. Backward reads dy and x,
// writes dx and folds du = dy * gelu'(x + b) into per-column f32 sums for the
// bias gradient (kernels/cuda/column_sum.cuh: deterministic; the rows a thread
// walks are TANDEM_COLUMN_SUM's, column_sum_kernels.cuh); rows are processed
// four at a time so four loads per tensor are in flight per thread. All memory
// bound: erff/tanhf/expf cost ~20-40 FLOPs per element, below the ~20 FLOP/byte
// balance point of an H100 for 4-byte elements and close to it for 2-byte ones.
//
// Dropout (TANDEM_GELU_DROPOUT=fused, kernels/cuda/row_kernel_switches.h): the
// forward applies dropout(gelu(x + b)) before its store and the backward applies
// dropout's backward to dy as it loads it, so the pair replaces bias_gelu then
// dropout (and in backward dropout's pass then bias_gelu's) and saves a read and
// a write of the [rows, dim] activation each way: at ag_news_optimized's FFN,
// 32768 x 1024 in bf16 (64 MiB a tensor), 256 MiB of traffic become 128 forward and
// 320 become 192 backward. The separate ops round gelu's output, and dropout's
// gradient, to T in memory; the
// fused kernels round them to T in registers at the same points, and draw the
// same keep decisions (dropout_factors.cuh), so they give the separate ops'
// bits. Numerics: f32 math (x + b not rounded before the GELU), one rounding
// per output (two with dropout, as the separate ops).
//
// Saved keep bits (TANDEM_DROPOUT_KEEP=saved, dropout_factors.cuh): the fused
// forward also stores each Philox block's byte of decisions, and the fused
// backward reads them, with the row's dy and x, instead of computing the
// blocks: at 32768 x 1024 a 4 MiB write forward and read backward (next to 192
// MiB of traffic) for the 4.2 M blocks that cost the backward about as much as
// the GELU's own arithmetic (third H200 run: 125.6 against 90.8 us without
// dropout, bf16). The same decisions: the same bits.
#pragma once

#include <cstdint>

#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/dropout_factors.cuh"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/gelu_formula.h"

namespace tandem::kernels::bias_gelu_detail {

constexpr int kRowBatch = 4;

// v as T holds it in memory (store_vec then load_vec): what the separate ops pass each other.
template <class T>
__device__ __forceinline__ float through_memory(float v) {
  return to_f32(from_f32<T>(v));
}

// How a kernel with dropout gets its keep decisions.
enum class Keep { Recompute, Save, Read };

template <class T, int V, bool Dropout, Keep K = Keep::Recompute>
__device__ __forceinline__ void bias_gelu_forward(const T* __restrict__ x, const T* __restrict__ b, T* __restrict__ y,
                                                  int64_t rows, int64_t dim, GeluApproximation a, DropoutMask m,
                                                  uint8_t* __restrict__ keep = nullptr) {
  if constexpr (Dropout) m.subsequence = dropout_subsequence(m.subsequence, m.step);
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
    if constexpr (Dropout) {
      float f[V];
      if constexpr (K == Keep::Save) keep_factors_saving<V>(m, static_cast<uint64_t>(r * dim + c * V), f, keep);
      else keep_factors<V>(m, static_cast<uint64_t>(r * dim + c * V), f);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = dropout_add(through_memory<T>(v[k]), 0.0f, f[k], 0.0f);
    }
    store_vec<V>(y + r * dim + c * V, v);
  }
}

template <class T, int V>
__global__ void bias_gelu_forward_kernel(const T* __restrict__ x, const T* __restrict__ b, T* __restrict__ y,
                                         int64_t rows, int64_t dim, GeluApproximation a) {
  bias_gelu_forward<T, V, false>(x, b, y, rows, dim, a, DropoutMask{});
}

template <class T, int V>
__global__ void bias_gelu_dropout_forward_kernel(const T* __restrict__ x, const T* __restrict__ b, T* __restrict__ y,
                                                 int64_t rows, int64_t dim, GeluApproximation a, DropoutMask m) {
  bias_gelu_forward<T, V, true>(x, b, y, rows, dim, a, m);
}

// TANDEM_DROPOUT_KEEP=saved: the fused forward, also storing the keep bytes (dropout_factors.cuh).
template <class T, int V>
__global__ void bias_gelu_dropout_forward_saving_keep_kernel(const T* __restrict__ x, const T* __restrict__ b,
                                                             T* __restrict__ y, int64_t rows, int64_t dim,
                                                             GeluApproximation a, DropoutMask m,
                                                             uint8_t* __restrict__ keep) {
  bias_gelu_forward<T, V, true, Keep::Save>(x, b, y, rows, dim, a, m, keep);
}

// A thread walks its slot's rows (column_sum_kernels.cuh: TANDEM_COLUMN_SUM's thread or block walk)
// four at a time. With Dropout, dy is the gradient of dropout's output: each loaded value becomes
// dropout's input gradient, rounded to T as dropout's backward would store it. With K = Read the keep
// decisions are the forward's saved bytes, loaded with the rows' dy and x.
template <class T, int V, bool PerBlock, bool Dropout, Keep K = Keep::Recompute>
__device__ __forceinline__ void bias_gelu_backward(const T* __restrict__ dy, const T* __restrict__ x,
                                                   const T* __restrict__ b, T* __restrict__ dx,
                                                   float* __restrict__ partial, int64_t rows, int64_t dim,
                                                   int64_t slots, GeluApproximation a, DropoutMask m,
                                                   const uint8_t* __restrict__ keep = nullptr) {
  if constexpr (Dropout && K != Keep::Read) m.subsequence = dropout_subsequence(m.subsequence, m.step);
  const auto [c, w, active] = column_sum_thread<PerBlock, V>(dim, slots);
  if (!PerBlock && !active) return;
  float bv[V], acc[V];
  fill(acc, 0.0f);
  if (active) {
    load_vec<V>(b + c * V, bv);
    for (int64_t r0 = w.first; r0 < rows; r0 += kRowBatch * w.stride) {
      float g[kRowBatch][V], v[kRowBatch][V];
      KeepBytes<V> kb[kRowBatch];
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const int64_t r = r0 + u * w.stride;
        if (r < rows) {
          load_vec<V>(dy + r * dim + c * V, g[u]);
          load_vec<V>(x + r * dim + c * V, v[u]);
          if constexpr (K == Keep::Read) kb[u] = load_keep_bytes<V>(keep, static_cast<uint64_t>(r * dim + c * V));
        }
      }
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const int64_t r = r0 + u * w.stride;
        if (r >= rows) break;
        if constexpr (Dropout) {
          float f[V];
          if constexpr (K == Keep::Read) saved_keep_factors<V>(m, static_cast<uint64_t>(r * dim + c * V), kb[u], f);
          else keep_factors<V>(m, static_cast<uint64_t>(r * dim + c * V), f);
#pragma unroll
          for (int k = 0; k < V; ++k) g[u][k] = through_memory<T>(g[u][k] * f[k]);
        }
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

template <class T, int V, bool PerBlock>
__global__ void bias_gelu_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ b,
                                          T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t dim,
                                          int64_t slots, GeluApproximation a) {
  bias_gelu_backward<T, V, PerBlock, false>(dy, x, b, dx, partial, rows, dim, slots, a, DropoutMask{});
}

// Capped at 128 registers (two 256-thread blocks per SM): uncapped, the keep decisions next to the
// four rows' loads took 16-byte-vector kernels from the plain kernel's 128 registers to 165-168, one
// block per SM; capped, no spills (nvcc 13.0, sm_90).
template <class T, int V, bool PerBlock>
__global__ void __launch_bounds__(256, 2)
    bias_gelu_dropout_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ b,
                                      T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t dim,
                                      int64_t slots, GeluApproximation a, DropoutMask m) {
  bias_gelu_backward<T, V, PerBlock, true>(dy, x, b, dx, partial, rows, dim, slots, a, m);
}

// TANDEM_DROPOUT_KEEP=saved: the fused backward reading the forward's keep bytes; capped as above.
template <class T, int V, bool PerBlock>
__global__ void __launch_bounds__(256, 2)
    bias_gelu_dropout_backward_saved_keep_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                 const T* __restrict__ b, T* __restrict__ dx,
                                                 float* __restrict__ partial, int64_t rows, int64_t dim, int64_t slots,
                                                 GeluApproximation a, DropoutMask m, const uint8_t* __restrict__ keep) {
  bias_gelu_backward<T, V, PerBlock, true, Keep::Read>(dy, x, b, dx, partial, rows, dim, slots, a, m, keep);
}

// The backward without a bias gradient (TANDEM_BIAS_GRADIENT=gemm, kernels/bias_gradient.h: the linear
// before forms it in dw's GEMM): no column sums, so no slots, and the forward's walk instead (a thread
// per vector column with its bias in registers, rows strided across the grid, one at a time). The
// column walk's per-element arithmetic in the same order: the same dx bits. Why: the column walk keeps
// four rows of dy and x in registers per thread to sum them (128 registers in 16 bits: two blocks per
// SM); without sums a thread needs one row's, as GELU's own backward, which the H200 ran at 90 % of
// copy where bias + GELU's reached 55 % (third run, bf16, 16384 x 3072). ptxas (nvcc 13.0, sm_90):
// 48 registers at 16-byte vectors in 16 bits, with or without dropout and saved bytes (the column
// walk: 128, capped), 40 in f32 (99-119), 24-32 for single elements; no spills. Not yet run on a GPU.
template <class T, int V, bool Dropout, Keep K = Keep::Recompute>
__device__ __forceinline__ void bias_gelu_backward_rows(const T* __restrict__ dy, const T* __restrict__ x,
                                                        const T* __restrict__ b, T* __restrict__ dx, int64_t rows,
                                                        int64_t dim, GeluApproximation a, DropoutMask m,
                                                        const uint8_t* __restrict__ keep = nullptr) {
  if constexpr (Dropout && K != Keep::Read) m.subsequence = dropout_subsequence(m.subsequence, m.step);
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  float bv[V];
  load_vec<V>(b + c * V, bv);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const uint64_t first = static_cast<uint64_t>(r * dim + c * V);
    float g[V], v[V];
    load_vec<V>(dy + r * dim + c * V, g);
    load_vec<V>(x + r * dim + c * V, v);
    if constexpr (Dropout) {
      float f[V];
      if constexpr (K == Keep::Read) saved_keep_factors<V>(m, first, load_keep_bytes<V>(keep, first), f);
      else keep_factors<V>(m, first, f);
#pragma unroll
      for (int k = 0; k < V; ++k) g[k] = through_memory<T>(g[k] * f[k]);
    }
    float du[V];
#pragma unroll
    for (int k = 0; k < V; ++k) du[k] = g[k] * gelu_derivative(v[k] + bv[k], a);
    store_vec<V>(dx + r * dim + c * V, du);
  }
}

template <class T, int V>
__global__ void bias_gelu_backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                               const T* __restrict__ b, T* __restrict__ dx, int64_t rows, int64_t dim,
                                               GeluApproximation a) {
  bias_gelu_backward_rows<T, V, false>(dy, x, b, dx, rows, dim, a, DropoutMask{});
}

template <class T, int V>
__global__ void bias_gelu_dropout_backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                       const T* __restrict__ b, T* __restrict__ dx, int64_t rows,
                                                       int64_t dim, GeluApproximation a, DropoutMask m) {
  bias_gelu_backward_rows<T, V, true>(dy, x, b, dx, rows, dim, a, m);
}

// TANDEM_DROPOUT_KEEP=saved: the rows walk reading the forward's keep bytes.
template <class T, int V>
__global__ void bias_gelu_dropout_backward_rows_saved_keep_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                                  const T* __restrict__ b, T* __restrict__ dx,
                                                                  int64_t rows, int64_t dim, GeluApproximation a,
                                                                  DropoutMask m, const uint8_t* __restrict__ keep) {
  bias_gelu_backward_rows<T, V, true, Keep::Read>(dy, x, b, dx, rows, dim, a, m, keep);
}

}  // namespace tandem::kernels::bias_gelu_detail
