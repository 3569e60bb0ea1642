// Layer norm over the last dimension on the GPU, forward and backward: the
// device code (kernels/cuda/layer_norm.cu launches it; the emulated tests run it
// on the CPU, tests/kernels/layer_norm_emulated_test.cc).
//
// Layout: a group of Tx threads (a multiple of 32) owns one row and keeps it in
// registers: each thread holds C vectors of V elements (V * C <= 16), so the
// row is read from memory once; a block holds Ty groups. Row statistics are
// group-wide f32 sums (warp shuffles, then, for a group of several warps, the
// warps' partials added in a fixed order through shared memory; a one-warp
// group needs no barrier), two-pass: the mean, then sum((x - mean)^2).
//
// Forward traffic: read x, write y (+ 8 bytes/row of mean/rstd); weight and
// bias are re-read per row from L1/L2. Backward traffic: read x and dy, write
// dx, plus the dweight/dbias partials (kernels/cuda/column_sum.cuh): a group
// walks the rows of one slot, prefetching the next row's x and dy while it
// reduces the current one, and accumulates dy * xhat and dy per column in
// registers. Both are memory bound.
//
// How much is in flight (TANDEM_LAYER_NORM, kernels/cuda/row_kernel_switches.h):
// one_row (the default) has a group normalise one row in forward and keep one
// row ahead in backward; multi_row normalises up to four rows per group in
// forward, with the parameters loaded before the statistics, and keeps three
// rows ahead in backward, for more bytes in flight per thread where a thread
// holds few values of a row (d_model 256 in 16 bits: 8). Either way each row
// sees the same operations in the same order; the forward's unrolled rows may be
// fused into FMAs differently (PTX's plain mul and add allow it; the backward
// rounds where its source says, backward_row), so the two agree to a rounding
// rather than bit for bit. lanes has one_row's forward and deals
// each slot of the backward to a whole block instead of one group (below,
// layer_norm_backward_lanes): its column sums add in another order, so it too
// agrees with one_row to a rounding.
//
// After a sublayer (TANDEM_ADD_LAYER_NORM=fused, residual_layer_norm_*_kernel): the
// forward's input is s = dropout(x + bias) + residual, formed as the rows are
// loaded and stored for the backward (ResidualIn); the backward also forms the
// branch's gradient, dx as stored times the keep factors, and its bias's column
// sums, as it stores each piece of dx (BranchGrad). Forward traffic: read x and
// the residual, write s and y (separately: also read s again); backward: read dy
// and s, write ds and the branch's gradient (separately: also read ds again).
// The separate kernels' operations at the points they store and load: the same
// bits (tests/kernels/residual_layer_norm_emulated_test.cc), but for the branch
// bias's gradient with lanes, which follows the lanes kernel's group order.
//
// Numerics: f32 statistics and arithmetic for f32/f16/bf16 data, 1/sqrtf (IEEE
// rounded, not rsqrtf) as on the CPU, one rounding per output; parameters are
// read as f32 or as the data type (w_f32). dweight/dbias are deterministic.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/element.h"
#include "kernels/cuda/bias_dropout_add_kernels.cuh"
#include "kernels/cuda/dropout_factors.cuh"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels::layer_norm_detail {

constexpr int kMaxThreads = 256;
constexpr int kMaxGroups = kMaxThreads / 32;  // Ty
constexpr int kGroupScratchFloats = kMaxGroups * 2 * 32;  // group_sum2's

// Sum over the Tx threads of this thread's group; every thread of the block must call it.
__device__ __forceinline__ float2 group_sum2(float2 v, float (*scratch)[2][32]) {
  v.x = warp_sum(v.x);
  v.y = warp_sum(v.y);
  // A row of one warp (Tx = 32: up to 256 elements in 16 bits, 128 in f32, e.g. d_model 256) has
  // its sum now; skipping the two block-wide barriers lets the block's Ty rows proceed on their
  // own instead of each waiting for the slowest row's loads. (Tx is the same for the whole block,
  // so either every thread skips the barriers or none does.) 0 + v keeps the bits of the path
  // below, which starts its sum at 0 (so a -0 sum becomes +0 in both).
  if (blockDim.x == 32) return make_float2(0.0f + v.x, 0.0f + v.y);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    scratch[threadIdx.y][0][warp] = v.x;
    scratch[threadIdx.y][1][warp] = v.y;
  }
  __syncthreads();
  float2 t = make_float2(0.0f, 0.0f);
  for (int k = 0; k < warps; ++k) {
    t.x += scratch[threadIdx.y][0][k];
    t.y += scratch[threadIdx.y][1][k];
  }
  __syncthreads();  // scratch is reused by the next call
  return t;
}

template <int V, class W>
__device__ __forceinline__ void load_param(const void* p, int64_t col, float (&out)[V]) {
  load_vec<V>(static_cast<const W*>(p) + col, out);
}

template <int V, class T>
__device__ __forceinline__ void load_param_any(const void* p, bool f32, int64_t col, float (&out)[V]) {
  if (f32) load_param<V, float>(p, col, out);
  else load_param<V, T>(p, col, out);
}

// TANDEM_ADD_LAYER_NORM=fused's inputs: the layer norm's input is s = dropout(x + bias) + residual
// (x the sublayer's branch), computed as the rows are loaded and stored to `sum` (backward's input),
// rounded to T as bias_dropout_add's kernel stores it (its forward_piece, in
// bias_dropout_add_kernels.cuh), so the normalised rows are the separate kernels' bits.
template <class T>
struct ResidualIn {
  const T* residual;
  const T* bias;  // [dim], T
  T* sum;         // [rows, dim]: s
  DropoutMask m;  // its subsequence resolved by the kernel
};

// A piece of a row of s computed from x, the residual and the bias bb, stored, and returned as stored.
template <class T, int V>
__device__ __forceinline__ void load_input(const T* __restrict__ x, int64_t off, const float (&bb)[V],
                                           const ResidualIn<T>& in, float (&out)[V]) {
  bias_dropout_add_detail::forward_piece<T, V>(x, bb, in.residual, in.m, off, in.sum, out);
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = to_f32(from_f32<T>(out[j]));
}

// R rows per group (TANDEM_LAYER_NORM=multi_row: R > 1): a block's R * Ty rows are consecutive,
// row (blockIdx.x * R + r) * Ty + ty for the group's r-th. All R rows' loads, and for R > 1 the
// parameters', are issued before the first statistic waits on any of them.
template <class T, int V, int C, int R, bool Add>
__device__ __forceinline__ void layer_norm_forward(const T* __restrict__ x, const void* __restrict__ w,
                                                   const void* __restrict__ b, bool w_f32, T* __restrict__ y,
                                                   float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                                   int64_t rows, int64_t dim, float eps, ResidualIn<T> in) {
  ROW_KERNEL_SHARED(float, shared, kGroupScratchFloats);
  float(*scratch)[2][32] = reinterpret_cast<float(*)[2][32]>(shared);
  const int64_t nvec = dim / V;
  float bb[Add ? C : 1][V];  // the branch's bias (Add)
  if constexpr (Add) {
    in.m.subsequence = dropout_subsequence(in.m.subsequence, in.m.step);
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (c < nvec) load_vec<V>(in.bias + c * V, bb[k]);
      else fill(bb[k], 0.0f);
    }
  }
  int64_t row[R];
  float xv[R][C][V], s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    row[r] = (blockIdx.x * static_cast<int64_t>(R) + r) * blockDim.y + threadIdx.y;
    s[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if constexpr (Add) {
        if (row[r] < rows && c < nvec) load_input<T, V>(x, row[r] * dim + c * V, bb[k], in, xv[r][k]);
        else fill(xv[r][k], 0.0f);
      } else {
        if (row[r] < rows && c < nvec) load_vec<V>(x + row[r] * dim + c * V, xv[r][k]);
        else fill(xv[r][k], 0.0f);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) s[r] += xv[r][k][j];
    }
  }
  float wv[C][V], bv[C][V];
  if constexpr (R > 1) {
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (c < nvec) {
        load_param_any<V, T>(w, w_f32, c * V, wv[k]);
        load_param_any<V, T>(b, w_f32, c * V, bv[k]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float mean = group_sum2(make_float2(s[r], 0.0f), scratch).x / static_cast<float>(dim);
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (c < nvec)
#pragma unroll
        for (int j = 0; j < V; ++j) q += (xv[r][k][j] - mean) * (xv[r][k][j] - mean);
    }
    const float var = group_sum2(make_float2(q, 0.0f), scratch).x / static_cast<float>(dim);
    const float rstd = 1.0f / sqrtf(var + eps);
    if (row[r] >= rows) continue;  // after the group sums: every thread of the block takes part in those
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (c >= nvec) continue;
      if constexpr (R == 1) {
        load_param_any<V, T>(w, w_f32, c * V, wv[k]);
        load_param_any<V, T>(b, w_f32, c * V, bv[k]);
      }
      float out[V];
#pragma unroll
      for (int j = 0; j < V; ++j) out[j] = (xv[r][k][j] - mean) * rstd * wv[k][j] + bv[k][j];
      store_vec<V>(y + row[r] * dim + c * V, out);
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[row[r]] = mean;
      if (rstd_out) rstd_out[row[r]] = rstd;
    }
  }
}

template <class T, int V, int C, int R>
__global__ void __launch_bounds__(kMaxThreads) layer_norm_forward_kernel(const T* __restrict__ x, const void* __restrict__ w,
                                          const void* __restrict__ b, bool w_f32, T* __restrict__ y,
                                          float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows,
                                          int64_t dim, float eps) {
  layer_norm_forward<T, V, C, R, false>(x, w, b, w_f32, y, mean_out, rstd_out, rows, dim, eps, ResidualIn<T>{});
}

// TANDEM_ADD_LAYER_NORM=fused: layer_norm(dropout(x + bias) + residual), s stored on the way (ResidualIn).
template <class T, int V, int C, int R>
__global__ void __launch_bounds__(kMaxThreads)
    residual_layer_norm_forward_kernel(const T* __restrict__ x, const void* __restrict__ w, const void* __restrict__ b,
                                       bool w_f32, T* __restrict__ y, float* __restrict__ mean_out,
                                       float* __restrict__ rstd_out, int64_t rows, int64_t dim, float eps,
                                       ResidualIn<T> in) {
  layer_norm_forward<T, V, C, R, true>(x, w, b, w_f32, y, mean_out, rstd_out, rows, dim, eps, in);
}

// Row `it` of a backward slot (slot + it * slots) into registers, zeros past the rows.
template <int V, int C, class T>
__device__ __forceinline__ void load_backward_row(const T* __restrict__ x, const T* __restrict__ dy, int64_t slot,
                                                  int64_t slots, int64_t it, int64_t rows, int64_t dim,
                                                  float (&xr)[C][V], float (&gr)[C][V]) {
  const int64_t row = slot + it * slots, nvec = dim / V;
  const bool active = slot < slots && row < rows;
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (active && c < nvec) {
      load_vec<V>(x + row * dim + c * V, xr[k]);
      load_vec<V>(dy + row * dim + c * V, gr[k]);
    } else {
      fill(xr[k], 0.0f);
      fill(gr[k], 0.0f);
    }
  }
}

// Row `it` of a slot's mean and rstd (0 past the rows).
__device__ __forceinline__ void load_row_stats(const float* __restrict__ mean, const float* __restrict__ rstd,
                                               int64_t slot, int64_t slots, int64_t it, int64_t rows, float& mu,
                                               float& rs) {
  const int64_t row = slot + it * slots;
  const bool active = slot < slots && row < rows;
  mu = active ? mean[row] : 0.0f;
  rs = active ? rstd[row] : 0.0f;
}

// What the backward does with each stored piece of a row of dx besides storing it: nothing (NoBranch),
// or (BranchGrad, TANDEM_ADD_LAYER_NORM=fused) the gradient of the sublayer's branch x of
// s = dropout(x + bias) + residual: dx rounded to T as stored (the residual's gradient), times the
// keep factor, stored to dbranch and added to the bias gradient's column sums (backward_piece in
// bias_dropout_add_kernels.cuh, as bias_dropout_add's backward does with the stored dx).
struct NoBranch {
  template <int V>
  __device__ __forceinline__ void operator()(int, int64_t, const float (&)[V]) {}
};

template <class T, int V, int C>
struct BranchGrad {
  DropoutMask m;  // its subsequence resolved by the kernel
  T* dbranch;     // [rows, dim], or null (p = 0: the branch's gradient is dx itself)
  float acc[C][V];

  __device__ __forceinline__ void operator()(int k, int64_t off, const float (&dx)[V]) {
    float g[V];
#pragma unroll
    for (int j = 0; j < V; ++j) g[j] = to_f32(from_f32<T>(dx[j]));
    bias_dropout_add_detail::backward_piece<V>(m, off, g, acc[k]);
    if (dbranch) store_vec<V>(dbranch + off, g);
  }
};

// The backward of row `it` of a slot, whose x and dy are in xr, gr and whose statistics are mu, rs:
// adds dy * xhat and dy to the column sums acc_w, acc_b and writes the row of dx (each piece also to
// `branch`). Every thread of the block calls it (group_sum2).
// Every product is rounded where the source says (__fmul_rn, __fmaf_rn): left to itself nvcc fuses
// g * w - mg into one fma in some instantiations and not others, and on the H200 (2026-11-28)
// multi_row's dx then differed from one_row's by a rounding (nonzero where d_model 1 makes it 0) and
// the fused residual backward's from the separate one's.
template <class T, int V, int C, class Branch = NoBranch>
__device__ __forceinline__ void backward_row(const float (&xr)[C][V], const float (&gr)[C][V], const float (&wv)[C][V],
                                             float mu, float rs, T* __restrict__ dx, int64_t slot, int64_t slots,
                                             int64_t it, int64_t rows, int64_t dim, float (&acc_w)[C][V],
                                             float (&acc_b)[C][V], float (*scratch)[2][32], Branch&& branch = {}) {
  const int64_t row = slot + it * slots, nvec = dim / V;
  const bool active = slot < slots && row < rows;
  float sg = 0.0f, sgx = 0.0f;
#pragma unroll
  for (int k = 0; k < C; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float xhat = (xr[k][j] - mu) * rs;
      const float g = __fmul_rn(gr[k][j], wv[k][j]);
      sg += g;
      sgx = __fmaf_rn(g, xhat, sgx);
      acc_w[k][j] = __fmaf_rn(gr[k][j], xhat, acc_w[k][j]);
      acc_b[k][j] += gr[k][j];
    }
  const float2 sums = group_sum2(make_float2(sg, sgx), scratch);
  if (!dx || !active) return;
  const float inv_dim = 1.0f / static_cast<float>(dim);
  const float mg = sums.x * inv_dim, mgx = sums.y * inv_dim;
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c >= nvec) continue;
    float out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float xhat = (xr[k][j] - mu) * rs;
      out[j] = rs * ((__fmul_rn(gr[k][j], wv[k][j]) - mg) - __fmul_rn(xhat, mgx));
    }
    store_vec<V>(dx + row * dim + c * V, out);
    branch(k, row * dim + c * V, out);
  }
}

// The weight (for every column of this thread) at the start of a backward slot, and the slot's
// column sums at its end.
template <int V, int C, class T>
__device__ __forceinline__ void load_backward_weight(const void* w, bool w_f32, int64_t nvec, float (&wv)[C][V]) {
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < nvec) load_param_any<V, T>(w, w_f32, c * V, wv[k]);
    else fill(wv[k], 0.0f);
  }
}

template <int V, int C>
__device__ __forceinline__ void store_backward_partials(const float (&acc_w)[C][V], const float (&acc_b)[C][V],
                                                        float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                        int64_t slot, int64_t dim) {
  const int64_t nvec = dim / V;
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c >= nvec) continue;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (partial_w) partial_w[slot * dim + c * V + j] = acc_w[k][j];
      if (partial_b) partial_b[slot * dim + c * V + j] = acc_b[k][j];
    }
  }
}

// Slot s (= blockIdx.x * Ty + ty) takes rows s, s + slots, ... in order, with D - 1 rows' loads in
// flight while one is reduced: rows it + 1 .. it + D - 1 sit in a ring of D register buffers, and
// row it + D - 1's loads go out into the buffer row it - 1 freed. D = 2 (TANDEM_LAYER_NORM=one_row)
// is one row ahead; multi_row takes D = 4 where a thread's share of a row is at most 8 values.
// The rows are reduced in the same order whatever D (to a rounding: see the top of the file).
// Branch: NoBranch, or (TANDEM_ADD_LAYER_NORM=fused) a BranchGrad whose column sums go to partial_bb.
template <class T, int V, int C, int D, class Branch>
__device__ __forceinline__ void layer_norm_backward(const T* __restrict__ dy, const T* __restrict__ x,
                                                    const void* __restrict__ w, bool w_f32,
                                                    const float* __restrict__ mean, const float* __restrict__ rstd,
                                                    T* __restrict__ dx, float* __restrict__ partial_w,
                                                    float* __restrict__ partial_b, int64_t rows, int64_t dim,
                                                    int64_t slots, Branch& branch, float* __restrict__ partial_bb) {
  static_assert(D >= 2, "one buffer being reduced and at least one loading");
  ROW_KERNEL_SHARED(float, shared, kGroupScratchFloats);
  float(*scratch)[2][32] = reinterpret_cast<float(*)[2][32]>(shared);
  const int64_t slot = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  const int64_t iters = (rows + slots - 1) / slots;  // the same for every group: group_sum2 needs all threads
  float wv[C][V], acc_w[C][V], acc_b[C][V];
  load_backward_weight<V, C, T>(w, w_f32, dim / V, wv);
#pragma unroll
  for (int k = 0; k < C; ++k) {
    fill(acc_w[k], 0.0f);
    fill(acc_b[k], 0.0f);
  }
  float xb[D][C][V], gb[D][C][V];
#pragma unroll
  for (int d = 0; d < D - 1; ++d) load_backward_row(x, dy, slot, slots, d, rows, dim, xb[d], gb[d]);
  if constexpr (D == 2) {
    // One row ahead without unrolling: the next row's loads go to buffer 1, which then moves to
    // buffer 0 (register moves), so the loop body stays one row long (fewer registers than the
    // ring below unrolled twice: 80 against 124 at 16-bit d_model 256).
    for (int64_t it = 0; it < iters; ++it) {
      if (it + 1 < iters) load_backward_row(x, dy, slot, slots, it + 1, rows, dim, xb[1], gb[1]);
      float mu, rs;
      load_row_stats(mean, rstd, slot, slots, it, rows, mu, rs);
      backward_row(xb[0], gb[0], wv, mu, rs, dx, slot, slots, it, rows, dim, acc_w, acc_b, scratch, branch);
      if (it + 1 < iters) {
#pragma unroll
        for (int k = 0; k < C; ++k)
#pragma unroll
          for (int j = 0; j < V; ++j) {
            xb[0][k][j] = xb[1][k][j];
            gb[0][k][j] = gb[1][k][j];
          }
      }
    }
  } else {
  for (int64_t it0 = 0; it0 < iters; it0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int64_t it = it0 + d;
      if (it >= iters) break;
      if (it + D - 1 < iters)
        load_backward_row(x, dy, slot, slots, it + D - 1, rows, dim, xb[(d + D - 1) % D], gb[(d + D - 1) % D]);
      float mu, rs;
      load_row_stats(mean, rstd, slot, slots, it, rows, mu, rs);
      backward_row(xb[d], gb[d], wv, mu, rs, dx, slot, slots, it, rows, dim, acc_w, acc_b, scratch, branch);
    }
  }
  }
  if (slot >= slots) return;
  store_backward_partials(acc_w, acc_b, partial_w, partial_b, slot, dim);
  if constexpr (!std::is_same_v<Branch, NoBranch>) store_backward_partials(branch.acc, branch.acc, partial_bb, nullptr, slot, dim);
}

template <class T, int V, int C, int D>
__global__ void __launch_bounds__(kMaxThreads) layer_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                           const void* __restrict__ w, bool w_f32, const float* __restrict__ mean,
                                           const float* __restrict__ rstd, T* __restrict__ dx,
                                           float* __restrict__ partial_w, float* __restrict__ partial_b, int64_t rows,
                                           int64_t dim, int64_t slots) {
  NoBranch none;
  layer_norm_backward<T, V, C, D>(dy, x, w, w_f32, mean, rstd, dx, partial_w, partial_b, rows, dim, slots, none,
                                  nullptr);
}

// TANDEM_ADD_LAYER_NORM=fused: the layer norm's backward (dx: the gradient of s, and so of the residual)
// and the branch's of s = dropout(x + bias) + residual (dbranch, its bias's partial sums in
// partial_bb) in one pass; dx must not be null.
template <class T, int V, int C, int D>
__global__ void __launch_bounds__(kMaxThreads)
    residual_layer_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const void* __restrict__ w,
                                        bool w_f32, const float* __restrict__ mean, const float* __restrict__ rstd,
                                        T* __restrict__ dx, float* __restrict__ partial_w,
                                        float* __restrict__ partial_b, int64_t rows, int64_t dim, int64_t slots,
                                        DropoutMask m, T* __restrict__ dbranch, float* __restrict__ partial_bb) {
  m.subsequence = dropout_subsequence(m.subsequence, m.step);
  BranchGrad<T, V, C> branch{m, dbranch, {}};
#pragma unroll
  for (int k = 0; k < C; ++k) fill(branch.acc[k], 0.0f);
  layer_norm_backward<T, V, C, D>(dy, x, w, w_f32, mean, rstd, dx, partial_w, partial_b, rows, dim, slots, branch,
                                  partial_bb);
}

// TANDEM_LAYER_NORM=lanes: the backward with a block per slot instead of a group per slot.
//
// Why: one_row gives each slot (32 rows) to one group, so at 32768 rows of d_model 256 in 16 bits the
// backward is 1024 warps walking 32 rows each, about 8 warps per SM of the H200, and it ran at 17 % of
// copy (docs/results/gpu.md). Here the slot's rows are dealt to all Ty groups of a block: 8192 warps
// of 4 rows each at that shape, and each row's mean and rstd are loaded with its x and dy, one row
// ahead, instead of when the row is reduced. The slots, their partial sums and the finish pass are
// one_row's, so the extra traffic is the same; the block adds its groups' sums through shared memory.
//
// The order of the column sums: slot s's rows s + i * slots (i = 0, 1, ...) are dealt to the block's
// Ty groups, row i to group i % Ty, which sums its rows in order of i; the slot's partial is the
// groups' sums added in group order (0 + group 0 + group 1 + ...). Ty depends on the layout, as
// the row statistics already do (a row's sums are split over the group's threads), so the bits
// depend on the shape and the vector width, like every layer-norm result, and not on the run.
template <class T, int V, int C>
struct LaneRow {
  float x[C][V], g[C][V], mu, rs;
};

template <class T, int V, int C>
__device__ __forceinline__ void load_lane_row(const T* __restrict__ x, const T* __restrict__ dy,
                                              const float* __restrict__ mean, const float* __restrict__ rstd,
                                              int64_t slot, int64_t slots, int64_t i, int64_t rows, int64_t dim,
                                              LaneRow<T, V, C>& r) {
  load_backward_row(x, dy, slot, slots, i, rows, dim, r.x, r.g);
  load_row_stats(mean, rstd, slot, slots, i, rows, r.mu, r.rs);
}

// Shared memory of the lanes kernels: group_sum2's scratch, then the groups' sums, [Ty][2][dim]
// floats (Ty * dim <= 4096: Ty = 256 / Tx and dim <= 16 * Tx). The fused kernel's third sum (the
// branch's bias) reuses them after the first two: three would pass the 48 KB of static shared memory.
constexpr int kGroupSumFloats = 2 * 4096;
constexpr int kLanesSharedFloats = kGroupScratchFloats + kGroupSumFloats;

// Adds the block's Ty groups' column sums a (and b, if given) in group order into the slot's
// partials out_a[slot, :] and out_b[slot, :] (either may be null) through group_sums: the sums of
// group ty are at rows 2 ty and 2 ty + 1 of [2 Ty, dim]. Every thread of the block calls it.
template <int V, int C>
__device__ __forceinline__ void add_group_sums(const float (&a)[C][V], const float (&b)[C][V], float* group_sums,
                                               float* __restrict__ out_a, float* __restrict__ out_b, int64_t slot,
                                               int64_t dim) {
  const int64_t ty = threadIdx.y, groups = blockDim.y;
  store_backward_partials(a, b, group_sums, group_sums + dim, 2 * ty, dim);
  __syncthreads();
  for (int64_t e = ty * blockDim.x + threadIdx.x; e < 2 * dim; e += static_cast<int64_t>(blockDim.x) * groups) {
    const int64_t which = e / dim, col = e % dim;
    float* out = which == 0 ? out_a : out_b;
    if (!out) continue;
    float t = 0.0f;
    for (int64_t g = 0; g < groups; ++g) t += group_sums[(g * 2 + which) * dim + col];
    out[slot * dim + col] = t;
  }
}

// The lanes walk of a slot (blockIdx.x). Branch: NoBranch, or (TANDEM_ADD_LAYER_NORM=fused) a
// BranchGrad whose column sums go to partial_bb, added over the groups in the same order as dweight's.
template <class T, int V, int C, class Branch>
__device__ __forceinline__ void layer_norm_backward_lanes(const T* __restrict__ dy, const T* __restrict__ x,
                                                          const void* __restrict__ w, bool w_f32,
                                                          const float* __restrict__ mean,
                                                          const float* __restrict__ rstd, T* __restrict__ dx,
                                                          float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                          int64_t rows, int64_t dim, int64_t slots, Branch& branch,
                                                          float* __restrict__ partial_bb) {
  ROW_KERNEL_SHARED(float, shared, kLanesSharedFloats);
  float(*scratch)[2][32] = reinterpret_cast<float(*)[2][32]>(shared);
  float* group_sums = shared + kGroupScratchFloats;
  const int64_t slot = blockIdx.x, nvec = dim / V, ty = threadIdx.y, groups = blockDim.y;
  // Every group runs the same number of rows (group_sum2 needs all threads): the most any slot has.
  const int64_t per_slot = (rows + slots - 1) / slots, iters = (per_slot + groups - 1) / groups;
  float wv[C][V], acc_w[C][V], acc_b[C][V];
  load_backward_weight<V, C, T>(w, w_f32, nvec, wv);
#pragma unroll
  for (int k = 0; k < C; ++k) {
    fill(acc_w[k], 0.0f);
    fill(acc_b[k], 0.0f);
  }
  LaneRow<T, V, C> cur, next;
  load_lane_row(x, dy, mean, rstd, slot, slots, ty, rows, dim, cur);
  for (int64_t it = 0; it < iters; ++it) {
    const int64_t i = ty + it * groups;
    if (it + 1 < iters) load_lane_row(x, dy, mean, rstd, slot, slots, i + groups, rows, dim, next);
    backward_row(cur.x, cur.g, wv, cur.mu, cur.rs, dx, slot, slots, i, rows, dim, acc_w, acc_b, scratch, branch);
    if (it + 1 < iters) cur = next;
  }
  add_group_sums(acc_w, acc_b, group_sums, partial_w, partial_b, slot, dim);
  if constexpr (!std::is_same_v<Branch, NoBranch>) {
    __syncthreads();  // every group's first two sums are read before the branch's overwrite them
    add_group_sums(branch.acc, branch.acc, group_sums, partial_bb, nullptr, slot, dim);
  }
}

template <class T, int V, int C>
__global__ void __launch_bounds__(kMaxThreads)
    layer_norm_backward_lanes_kernel(const T* __restrict__ dy, const T* __restrict__ x, const void* __restrict__ w,
                                     bool w_f32, const float* __restrict__ mean, const float* __restrict__ rstd,
                                     T* __restrict__ dx, float* __restrict__ partial_w, float* __restrict__ partial_b,
                                     int64_t rows, int64_t dim, int64_t slots) {
  NoBranch none;
  layer_norm_backward_lanes<T, V, C>(dy, x, w, w_f32, mean, rstd, dx, partial_w, partial_b, rows, dim, slots, none,
                                     nullptr);
}

// TANDEM_ADD_LAYER_NORM=fused with TANDEM_LAYER_NORM=lanes: residual_layer_norm_backward_kernel's work
// (the gradients of s and of the branch, and the branch bias's partial sums) with the lanes walk.
// Why: that kernel's one_row walk has one warp per 32-row slot at d_model 256 in 16 bits, as the plain
// one_row backward, which ran at 20-23 % of copy on the H200 at 32768 x 256 (docs/results/gpu.md).
template <class T, int V, int C>
__global__ void __launch_bounds__(kMaxThreads)
    residual_layer_norm_backward_lanes_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                              const void* __restrict__ w, bool w_f32, const float* __restrict__ mean,
                                              const float* __restrict__ rstd, T* __restrict__ dx,
                                              float* __restrict__ partial_w, float* __restrict__ partial_b,
                                              int64_t rows, int64_t dim, int64_t slots, DropoutMask m,
                                              T* __restrict__ dbranch, float* __restrict__ partial_bb) {
  m.subsequence = dropout_subsequence(m.subsequence, m.step);
  BranchGrad<T, V, C> branch{m, dbranch, {}};
#pragma unroll
  for (int k = 0; k < C; ++k) fill(branch.acc[k], 0.0f);
  layer_norm_backward_lanes<T, V, C>(dy, x, w, w_f32, mean, rstd, dx, partial_w, partial_b, rows, dim, slots, branch,
                                     partial_bb);
}

// How a row is spread over a group: V-wide vectors, C per thread, Tx threads per row, Ty rows per block.
struct Layout {
  int v, c, tx, ty;
};

// At most 256 threads per block: the backward kernel needs up to ~190 registers per thread
// when V * C = 16, and 256 of them fit an SM's 64K registers.
inline Layout layout_for(int64_t dim, int v) {
  const int64_t nvec = dim / v;
  const int max_c = 16 / v;
  int c = 1;
  while (c < max_c && (nvec + c - 1) / c > kMaxThreads) c *= 2;
  const int64_t tx = round_up_32((nvec + c - 1) / c);
  TANDEM_CHECK(tx <= kMaxThreads, "layer_norm on CUDA supports rows of at most 4096 elements, got {}", dim);
  const int t = static_cast<int>(tx);
  return Layout{v, c, t, kMaxThreads / t};
}

// Calls f.template operator()<V, C>() for the (V, C) of the layout; V is 1 or kVec16<T>.
template <class T, class F>
void with_layout(const Layout& l, F&& f) {
  constexpr int VV = kVec16<T>;
  auto by_c = [&](auto v_tag) {
    constexpr int V = decltype(v_tag)::value;
    switch (l.c) {
      case 1: f.template operator()<V, 1>(); break;
      case 2: if constexpr (16 / V >= 2) f.template operator()<V, 2>(); break;
      case 4: if constexpr (16 / V >= 4) f.template operator()<V, 4>(); break;
      case 8: if constexpr (16 / V >= 8) f.template operator()<V, 8>(); break;
      case 16: if constexpr (16 / V >= 16) f.template operator()<V, 16>(); break;
      default: TANDEM_FAIL("layer_norm: no kernel for {} vectors per thread", l.c);
    }
  };
  if (l.v == VV) by_c(std::integral_constant<int, VV>{});
  else by_c(std::integral_constant<int, 1>{});
}

// TANDEM_LAYER_NORM=multi_row's depths for a thread's V * C values of a row: the forward's rows per
// group (R * V * C <= 16, at most 4) and the backward's row buffers (three rows ahead up to 8
// values, one beyond, as one_row). one_row is R = 1, D = 2.
constexpr int multi_row_rows(int values) { return values >= 16 ? 1 : (16 / values < 4 ? 16 / values : 4); }
constexpr int multi_row_buffers(int values) { return values <= 8 ? 4 : 2; }

}  // namespace tandem::kernels::layer_norm_detail
