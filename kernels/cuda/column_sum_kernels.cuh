// The device code of the deterministic column sums of [rows, dim] data
// (kernels/cuda/column_sum.cuh has the two passes and their launches): how the
// pass-1 kernels (linear's below, bias_gelu's and bias_dropout_add's backward)
// walk the rows of their slot and write the slot's sums, and pass 2, which
// adds the slots. Also runs on the CPU under tests/testing/warp_emulator.h.
//
// TANDEM_COLUMN_SUM (kernels/cuda/row_kernel_switches.h) picks one of two walks:
//
//   thread (the default): a thread per (vector column, slot). Blocks are
//     column_block's (Tx, Ty): thread row ty of block row by is slot
//     by * Ty + ty and sums rows slot, slot + slots, ... in order. At 32768
//     rows of 256 16-bit columns that is 1024 warps of 32 rows each, about 8
//     warps per SM of an H200 (bias_dropout_add's backward ran at 27 % of copy).
//   block: a block per (32 vector columns, slot). Blocks are (32, 8): block row
//     by is slot by, and its thread row ty sums the slot's rows
//     slot + (ty + 8 j) * slots, j = 0, 1, ..., in order; the 8 sums of a column
//     are added in order of ty through shared memory and written as the slot's.
//     At that shape 8192 warps of 4 rows each, the four rows' loads in flight
//     together (the kernels' four-row batches).
//
// Either way the slots and their partial sums are column_sum_slots' (the extra
// traffic and the finish pass are the same), and the order of every addition
// depends only on the shape, not on the vector width: a thread row covers the
// same rows whether its thread holds 1 or 16 / sizeof(T) columns. The two walks
// add in different orders, so they agree to a rounding, not bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

// Thread rows of a block in the block walk.
inline constexpr int kColumnSumSubRows = 8;

// The slot a thread sums for and the rows it visits: first, first + stride, ... below rows.
struct SlotWalk {
  int64_t slot, first, stride;
};

template <bool PerBlock>
__device__ __forceinline__ SlotWalk slot_walk(int64_t slots) {
  if constexpr (PerBlock) {
    const int64_t slot = blockIdx.y;
    return {slot, slot + static_cast<int64_t>(threadIdx.y) * slots, kColumnSumSubRows * slots};
  } else {
    const int64_t slot = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
    return {slot, slot, slots};
  }
}

// A pass-1 thread: its vector column c, its walk, and whether it has a column and a slot (a thread
// without one returns at once in the thread walk, and in the block walk only skips the rows).
struct ColumnSumThread {
  int64_t c;
  SlotWalk w;
  bool active;
};

template <bool PerBlock, int V>
__device__ __forceinline__ ColumnSumThread column_sum_thread(int64_t dim, int64_t slots) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const SlotWalk w = slot_walk<PerBlock>(slots);
  return {c, w, c * V < dim && w.slot < slots};
}

// Writes this thread's sums of vector column c as (its share of) the slot's partial sums.
// `active`: the thread has a column and a slot. In the block walk every thread of the block must
// call it (a barrier); thread (x, y) then adds element y of column x's 8 sums (V <= 8).
template <bool PerBlock, int V>
__device__ __forceinline__ void store_slot_sums(const float (&acc)[V], bool active, int64_t c, const SlotWalk& w,
                                                int64_t dim, float* __restrict__ partial) {
  if constexpr (PerBlock) {
    static_assert(V <= kColumnSumSubRows, "thread row y finishes element y of each column vector");
    ROW_KERNEL_SHARED(float, sums, kColumnSumSubRows * 8 * 32);  // [sub row][element][lane]
    const int lane = static_cast<int>(threadIdx.x), sub = static_cast<int>(threadIdx.y);
#pragma unroll
    for (int k = 0; k < V; ++k) sums[(sub * V + k) * 32 + lane] = acc[k];
    __syncthreads();
    if (active && partial && sub < V) {
      float t = 0.0f;
#pragma unroll
      for (int s = 0; s < kColumnSumSubRows; ++s) t += sums[(s * V + sub) * 32 + lane];
      partial[w.slot * dim + c * V + sub] = t;
    }
  } else {
    if (!active || !partial) return;
#pragma unroll
    for (int k = 0; k < V; ++k) partial[w.slot * dim + c * V + k] = acc[k];
  }
}

// Pass 1 of a plain column sum (linear's bias gradient): each slot's f32 sums of dy's rows.
template <class T, int V, bool PerBlock>
__global__ void column_sum_partial_kernel(const T* __restrict__ dy, float* __restrict__ partial, int64_t rows,
                                          int64_t dim, int64_t slots) {
  const auto [c, w, active] = column_sum_thread<PerBlock, V>(dim, slots);
  if (!PerBlock && !active) return;
  float acc[V];
  fill(acc, 0.0f);
  if (active)
#pragma unroll 4
    for (int64_t r = w.first; r < rows; r += w.stride) {
      float g[V];
      load_vec<V>(dy + r * dim + c * V, g);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += g[k];
    }
  store_slot_sums<PerBlock, V>(acc, active, c, w, dim, partial);
}

// Pass 2: out[c] = the sum over slots of partial[s, c], in a fixed order: 16 lanes per column, lane l
// adding slots l, l + 16, ... in order, then the lanes in order. Block (32, 16) per 32 columns; up to
// two sums at once (block row blockIdx.y picks partial0/out0 or partial1/out1: layer norm's dweight
// and dbias in one launch). Each lane's loads are unrolled 16 deep: they do not depend on the sum,
// so 16 are in flight where a lane has that many slots (64 at 1024 slots), not the compiler's 4.
template <class Out>
__global__ void column_sum_finish_kernel(const float* __restrict__ partial0, Out* __restrict__ out0,
                                         const float* __restrict__ partial1, Out* __restrict__ out1, int64_t slots,
                                         int64_t dim) {
  ROW_KERNEL_SHARED(float, lanes, 16 * 33);
  const float* partial = blockIdx.y == 0 ? partial0 : partial1;
  Out* out = blockIdx.y == 0 ? out0 : out1;
  const int64_t col = blockIdx.x * 32ll + threadIdx.x;
  float a = 0.0f;
  if (col < dim)
#pragma unroll 16
    for (int64_t s = threadIdx.y; s < slots; s += 16) a += partial[s * dim + col];
  lanes[threadIdx.y * 33 + threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && col < dim) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; ++k) t += lanes[k * 33 + threadIdx.x];
    out[col] = from_f32<Out>(t);
  }
}

// The grid and block of a pass-1 launch over nvec vector columns: column_block's shape with Ty slots
// per block row (thread walk), or (32, 8) with a block row per slot (block walk).
struct ColumnSumLaunch {
  dim3 grid, block;
};

// Calls f.template operator()<PerBlock>() for the walk TANDEM_COLUMN_SUM picked (as with_width does for V).
template <class F>
void with_column_sum_walk(bool per_block, F&& f) {
  if (per_block) f.template operator()<true>();
  else f.template operator()<false>();
}

inline ColumnSumLaunch column_sum_launch(int64_t nvec, int64_t rows, int64_t slots, bool per_block) {
  if (per_block) return {dim3(blocks_for(nvec, 32, INT32_MAX), static_cast<unsigned>(slots)), dim3(32, kColumnSumSubRows)};
  const dim3 block = column_block(nvec, rows);
  return {dim3(blocks_for(nvec, block.x, INT32_MAX), blocks_for(slots, block.y, 65535)), block};
}

}  // namespace tandem::kernels
