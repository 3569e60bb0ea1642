// y = dropout(x + bias) + residual on the GPU (each part optional), and its backward.
//
// Layout: [rows, dim] with one thread per vector column (bias in registers)
// walking rows; without a bias the data is viewed as one long row, so 16-byte
// vectors apply whenever numel allows. Forward traffic: read x (and residual),
// write y. Backward: read dy, write dx, plus the bias-gradient partials
// (kernels/cuda/column_sum.cuh, deterministic; the rows a thread walks are
// TANDEM_COLUMN_SUM's, column_sum_kernels.cuh) when a bias is present; rows
// four at a time per thread. Without a bias gradient the data is one long row
// and each thread has one vector, so the four-row batch only costs registers
// (114 against 43 for the forward in 16 bits: a quarter of the threads per SM);
// TANDEM_DROPOUT_BACKWARD=flat (kernels/cuda/row_kernel_switches.h) compiles
// that case with a batch of one row (64 registers), the same arithmetic. The keep mask is recomputed from Philox (one
// 10-round block per 4 elements, ~15 integer ops per element) instead of being
// stored: it matches kernels/dropout_mask.h, and the CPU reference, bit for bit.
// Numerics: f32 arithmetic, one rounding per output.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/bias_dropout_add_cuda.h"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/column_sum_kernels.cuh"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {

namespace {

constexpr int kRowBatch = 4;

struct Mask {
  float p, scale;  // p == 0: keep everything, unscaled
  uint64_t seed, subsequence;
  const int64_t* step;  // null, or the device step count: read by each thread (kernels/dropout_mask.h)
};

// Keep factors (scale or 0) of the V elements starting at flat index i0. For V a
// multiple of 4, i0 is too (rows are whole vectors), so each Philox block is computed once.
template <int V>
__device__ __forceinline__ void keep_factors(const Mask& m, uint64_t i0, float (&f)[V]) {
  if (m.p == 0.0f) {
    fill(f, 1.0f);
  } else if constexpr (V % 4 == 0) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const unsigned bits = dropout_keep4(m.seed, m.subsequence, i0 / 4 + q, m.p);
#pragma unroll
      for (int k = 0; k < 4; ++k) f[4 * q + k] = (bits >> k) & 1u ? m.scale : 0.0f;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = dropout_keep(m.seed, m.subsequence, i0 + k, m.p) ? m.scale : 0.0f;
  }
}

template <class T, int V>
__global__ void forward_kernel(const T* __restrict__ x, const T* __restrict__ b, const T* __restrict__ res,
                               T* __restrict__ y, int64_t rows, int64_t dim, Mask m) {
  m.subsequence = dropout_subsequence(m.subsequence, m.step);
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  float bv[V];
  if (b) load_vec<V>(b + c * V, bv);
  else fill(bv, 0.0f);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t i0 = r * dim + c * V;
    float v[V], f[V], rv[V];
    load_vec<V>(x + i0, v);
    if (res) load_vec<V>(res + i0, rv);
    else fill(rv, 0.0f);
    keep_factors<V>(m, static_cast<uint64_t>(i0), f);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = (v[k] + bv[k]) * f[k] + rv[k];
    store_vec<V>(y + i0, v);
  }
}

// A thread walks its slot's rows (column_sum_kernels.cuh: TANDEM_COLUMN_SUM's thread or block walk,
// the block walk only with a bias gradient) RowBatch at a time (kRowBatch, or 1 for the one long
// row of TANDEM_DROPOUT_BACKWARD=flat).
template <class T, int V, int RowBatch, bool PerBlock>
__global__ void backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, float* __restrict__ partial,
                                int64_t rows, int64_t dim, int64_t slots, Mask m) {
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
        float f[V];
        keep_factors<V>(m, static_cast<uint64_t>(r * dim + c * V), f);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          g[u][k] *= f[k];
          acc[k] += g[u][k];
        }
        if (dx) store_vec<V>(dx + r * dim + c * V, g[u]);
      }
    }
  store_slot_sums<PerBlock, V>(acc, active, c, w, dim, partial);
}

}  // namespace

void bias_dropout_add_forward_cuda(const void* x, const void* bias, const void* residual, void* y, DType t,
                                   int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence,
                                   const int64_t* step, void* stream) {
  if (!bias) {  // purely elementwise: one long row
    dim *= rows;
    rows = 1;
  }
  if (rows == 0 || dim == 0) return;
  const Mask m{p, dropout_scale(p), seed, subsequence, step};
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
  const Mask m{p, dropout_scale(p), seed, subsequence, step};
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
