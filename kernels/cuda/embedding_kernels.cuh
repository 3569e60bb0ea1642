// The device code of the token-embedding gradient's window walk
// (TANDEM_EMBEDDING_BACKWARD=windows, kernels/cuda/row_kernel_switches.h; embedding.cu sorts the ids
// and launches it). Also runs on the CPU under tests/testing/warp_emulator.h.
//
// Input: the n (key, row) pairs sorted by key, stable (cub's radix sort), so every id's
// occurrences form a segment in increasing position order; keys equal to `vocab` (out-of-range ids)
// come last and are skipped.
//
// Pass 1, window_kernel: one warp per window of 32 sorted positions (a lane's key and row each),
// blocks of 8 warps, grid.y over chunks of 32 vector columns. The warp walks its window 8 positions
// at a time: the 8 dout rows' loads are issued together, then added in position order into one f32
// accumulator per vector element, which is flushed where a piece (the window's share of a segment)
// ends: a segment that lies wholly in the window goes to its dtok row; one that continues past the
// window's end and starts in it goes to the window's tail slot; one that came from the window
// before goes to its head slot (it may continue past the end too).
// Pass 2, window_combine_kernel: block m finishes the segment that continues from window m into m + 1 and
// started in m: tail[m] + the heads of windows m + 1 .. e, where e (the last window starting with
// the key) comes from a binary search over the windows' first keys. The heads are dealt to the
// block's kCombineLanes = 8 thread rows (row l adds heads m + 1 + l, m + 1 + l + 8, ... in order,
// eight loads in flight), and tail[m] + lane 0 + lane 1 + ... + lane 7 is the sum.
//
// Why: the pieces walk (embedding.cu) runs one block per sorted position, of which most return at
// once and the rest follow a chain of dependent loads (the piece's keys, then its rows, then dout):
// the H200 measured it at 9-19 % of its copy bandwidth. And its pass 2 adds a long segment's
// partial rows one after another: a padding id that fills 85 % of a batch of 128 x 256 tokens
// spans 430 pieces, each thread waiting for one load at a time. Here the windows are dealt to
// warps with 8 rows' loads in flight each, and a long segment's partial rows to 8 lanes per
// column with 8 loads in flight each: 64 KB in flight for the block, about what one SM can draw
// from L2 (a padding run over 870 windows of 256 f32 columns is 890 KB of partial rows).
//
// Numerics: f32 sums, one rounding per dtok element. A segment that fits in one window is summed in
// position order from 0, as the CPU reference sums (the same bits); a longer one in window pieces,
// then across lanes in the fixed order above (equal to a rounding; the order depends only on the
// sorted keys and dim, so the bits repeat). Traffic: dout read once, dtok written once for every
// id present (embedding.cu zeroes it first), 8 bytes per position for the sorted pairs and two f32
// rows per window for the slots.
#pragma once

#include <cstdint>

#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

inline constexpr int kEmbeddingWindow = 32;      // sorted positions per warp: one per lane
inline constexpr int kEmbeddingWindowWarps = 8;  // windows per block of pass 1
inline constexpr int kEmbeddingInFlight = 8;     // dout rows a lane loads before adding them
inline constexpr int kCombineColumns = 64;       // pass 2: vector columns per block row
inline constexpr int kCombineLanes = 8;          // pass 2: thread rows, each adding every 8th head
inline constexpr int kCombineInFlight = 8;       // pass 2: heads a thread row loads before adding them

__host__ __device__ inline int64_t embedding_windows(int64_t n) { return (n + kEmbeddingWindow - 1) / kEmbeddingWindow; }

// The grids and blocks of both passes for n sorted positions and rows of nvec vectors, as embedding.cu
// launches them (and the emulated test).
struct EmbeddingWindowLaunch {
  dim3 grid, block;                  // pass 1
  dim3 combine_grid, combine_block;  // pass 2
};
inline EmbeddingWindowLaunch embedding_window_launch(int64_t n, int64_t nvec) {
  const int64_t windows = embedding_windows(n);
  return {dim3(static_cast<unsigned>((windows + kEmbeddingWindowWarps - 1) / kEmbeddingWindowWarps),
               static_cast<unsigned>((nvec + kEmbeddingWindow - 1) / kEmbeddingWindow)),
          dim3(kEmbeddingWindow, kEmbeddingWindowWarps), dim3(static_cast<unsigned>(windows)),
          dim3(kCombineColumns, kCombineLanes)};
}

// Pass 1, launched as embedding_window_launch says.
template <class T, int V>
__global__ void __launch_bounds__(kEmbeddingWindow * kEmbeddingWindowWarps)
    window_kernel(const T* __restrict__ dout, const uint32_t* __restrict__ keys, const int32_t* __restrict__ rows,
                  T* __restrict__ dtok, float* __restrict__ head, float* __restrict__ tail, int64_t n, int64_t dim,
                  uint32_t vocab) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kEmbeddingWindowWarps + threadIdx.y;
  const int64_t a = w * kEmbeddingWindow;
  if (a >= n) return;  // the whole warp: a, like everything that steers the walk below, is the warp's
  const int64_t i = a + lane;
  const uint32_t key = i < n ? keys[i] : vocab;
  const unsigned row = i < n ? static_cast<unsigned>(rows[i]) : 0u;
  const uint32_t before = a > 0 ? keys[a - 1] : vocab;  // a real key is never vocab
  const uint32_t after = a + kEmbeddingWindow < n ? keys[a + kEmbeddingWindow] : vocab;
  const uint32_t left = __shfl_sync(0xffffffffu, key, lane > 0 ? lane - 1 : 0);
  // Bit p: a piece starts at window position p. Sorted, the out-of-range keys (and the positions
  // past n, given the key vocab) are the window's last `32 - real` positions.
  const unsigned starts = __ballot_sync(0xffffffffu, lane == 0 || key != left);
  const int real = __popc(__ballot_sync(0xffffffffu, key != vocab));
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kEmbeddingWindow + lane;  // this lane's vector column
  const bool has_column = c * V < dim;
  float acc[V];
  fill(acc, 0.0f);
  int piece = 0;  // where the current piece started
  for (int j0 = 0; j0 < real; j0 += kEmbeddingInFlight) {
    float v[kEmbeddingInFlight][V];
#pragma unroll
    for (int u = 0; u < kEmbeddingInFlight; ++u) {
      const int j = j0 + u;
      const int64_t r = static_cast<int64_t>(__shfl_sync(0xffffffffu, row, j & (kEmbeddingWindow - 1)));
      if (j < real && has_column) load_vec<V>(dout + r * dim + c * V, v[u]);
      else fill(v[u], 0.0f);  // never added: the walk stops at `real`, and a lane without a column stores nothing
    }
#pragma unroll
    for (int u = 0; u < kEmbeddingInFlight; ++u) {
      const int j = j0 + u;
      const uint32_t k = __shfl_sync(0xffffffffu, key, j & (kEmbeddingWindow - 1));
      if (j >= real) break;
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] += v[u][e];
      if (j + 1 < real && ((starts >> (j + 1)) & 1u) == 0) continue;  // the piece goes on
      const bool from_before = piece == 0 && before == k;
      const bool goes_on = j + 1 == kEmbeddingWindow && after == k;
      if (has_column) {
        if (!from_before && !goes_on) {
          store_vec<V>(dtok + static_cast<int64_t>(k) * dim + c * V, acc);
        } else {
          store_vec<V>((from_before ? head : tail) + w * dim + c * V, acc);
        }
      }
      fill(acc, 0.0f);
      piece = j + 1;
    }
  }
}

// The last window in (m, windows) whose first key is `key` (m itself if none): the windows whose first
// key is `key` are a run from m + 1, since the keys are sorted.
__device__ __forceinline__ int64_t last_window_starting_with(const uint32_t* __restrict__ keys, uint32_t key,
                                                             int64_t m, int64_t windows) {
  int64_t lo = m, hi = windows;  // keys[lo * 32] == key or lo == m; hi is past the run
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid * kEmbeddingWindow] == key) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Pass 2, launched as embedding_window_launch says (a block per window); shared memory
// kCombineLanes * kCombineColumns * V floats. V = 4 needs dim % 4 == 0 (the slots are 16-byte aligned).
template <class T, int V>
__global__ void __launch_bounds__(kCombineColumns * kCombineLanes)
    window_combine_kernel(const uint32_t* __restrict__ keys, const float* __restrict__ head, const float* __restrict__ tail,
                   T* __restrict__ dtok, int64_t n, int64_t dim, uint32_t vocab) {
  ROW_KERNEL_SHARED(float, lanes, kCombineLanes * kCombineColumns * V);
  const int64_t m = blockIdx.x;
  const int64_t windows = embedding_windows(n);
  const int64_t last = (m + 1) * kEmbeddingWindow - 1;
  if (last + 1 >= n) return;
  const uint32_t key = keys[last];
  if (key == vocab || keys[last + 1] != key) return;
  if (m > 0 && keys[m * kEmbeddingWindow - 1] == key) return;  // started in an earlier window: its block's
  const int64_t end = last_window_starting_with(keys, key, m, windows);  // >= m + 1
  const int ty = static_cast<int>(threadIdx.y);
  for (int64_t c0 = 0; c0 * V < dim; c0 += kCombineColumns) {
    const int64_t c = c0 + threadIdx.x;
    const bool has_column = c * V < dim;
    float acc[V];
    fill(acc, 0.0f);
    if (has_column) {
      int64_t h = m + 1 + ty;
      for (; h + (kCombineInFlight - 1) * kCombineLanes <= end; h += kCombineInFlight * kCombineLanes) {
        float v[kCombineInFlight][V];
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) load_vec<V>(head + (h + u * kCombineLanes) * dim + c * V, v[u]);
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] += v[u][e];
      }
      for (; h <= end; h += kCombineLanes) {
        float v[V];
        load_vec<V>(head + h * dim + c * V, v);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += v[e];
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) lanes[(ty * kCombineColumns + threadIdx.x) * V + e] = acc[e];
    __syncthreads();
    if (ty == 0 && has_column) {
      float s[V];
      load_vec<V>(tail + m * dim + c * V, s);
#pragma unroll
      for (int e = 0; e < V; ++e)
        for (int l = 0; l < kCombineLanes; ++l) s[e] += lanes[(l * kCombineColumns + threadIdx.x) * V + e];
      store_vec<V>(dtok + static_cast<int64_t>(key) * dim + c * V, s);
    }
    __syncthreads();
  }
}

}  // namespace tandem::kernels
