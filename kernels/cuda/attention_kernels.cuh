// The device code of the fused attention kernels (the algorithm, memory
// traffic and numerics are described in kernels/cuda/attention.cu), plus the
// launch geometry its users share.
//
// It is included (directly, or through kernels/cuda/attention_forward_pipelined.cuh,
// which builds on it) by:
//   - kernels/cuda/attention.cu, on the GPU. It first defines the tensor-core
//     step mma16816<T>, ldmatrix, cp.async and exp2_ftz (ex2.approx.ftz: the
//     softmax's exponentials; inline PTX) and ATTENTION_SHARED_MEMORY;
//   - the emulated tests (tests/kernels/attention_*emulated_test.cc, through
//     attention_emulated_launches.h), on the CPU, after
//     tests/testing/warp_emulator.h, which supplies CPU versions of those and
//     of the CUDA built-ins used here (threadIdx, __syncthreads, float and
//     unsigned shuffles, 16-bit conversions), so this exact code is tested
//     without a GPU. It also defines ATTENTION_COUNT_PHILOX to count the
//     dropout's Philox blocks.
// So nothing here may use a CUDA API or built-in beyond that list.
//
// Dropout costs one Philox4x32-10 block (10 rounds of two 32 x 32 -> 64-bit
// multiplies) per 8 keep decisions in every pass: 1/8 block per element of
// the S x S matrix in the forward, in dK/dV and in dQ, 3/8 per element for a
// training step, against 1/2, 1 and 1/2 (2 per element) when each block gave
// one row 4 consecutive keys (kernels/attention_params.h says why the blocks
// fit both fragment layouts).
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/element.h"
#include "kernels/attention.h"
#include "kernels/attention_params.h"
#include "kernels/cuda/attention_switches.h"

namespace tandem::kernels::attention_detail {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // rows of a block's tile: 16 per warp, the mma's M
constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shared-memory row stride: DP plus 16 bytes. Rows stay 16-byte aligned for
// vector loads, and the 8 rows a fragment load touches fall in distinct banks.
template <class T, int DP>
constexpr int kLd = DP + 16 / static_cast<int>(sizeof(T));

// ---------------------------------------------------------------------------
// Warp-level tile products. A warp holds a 16 x (8*NT) f32 tile "C" in the
// accumulator layout of mma.m16n8k16: lane = 4*g + t holds, for each 8-column
// block n, c[n][0..1] = C[g][8n + 2t + {0,1}] and c[n][2..3] = C[g+8][8n + 2t + {0,1}].
// 16-bit operands use tensor cores (mma16816<T>) and read their fragments with
// ldmatrix_x4, ldmatrix_x4_trans and ldmatrix_x2_trans, all defined by the
// includer (inline PTX in attention.cu, CPU versions in
// tests/testing/warp_emulator.h); f32 computes the same elements with FMAs.
// ---------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t a, b;
  if constexpr (std::is_same_v<T, Half>) {
    a = __half_as_ushort(__float2half_rn(lo));
    b = __half_as_ushort(__float2half_rn(hi));
  } else {
    a = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    b = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  }
  return a | (b << 16);  // the lower-indexed element sits in the low half
}

// The f32 path's step: a lane's 2 x 2 share of C (rows g, g + 8; columns 2t, 2t + 1 of an 8-column
// block) += (a0, a1)^T (b0, b1).
__device__ __forceinline__ void fma_2x2(float (&c)[4], float a0, float a1, float b0, float b1) {
  c[0] = fmaf(a0, b0, c[0]);
  c[1] = fmaf(a0, b1, c[1]);
  c[2] = fmaf(a1, b0, c[2]);
  c[3] = fmaf(a1, b1, c[3]);
}

// The A fragment of 16-column step kc of a register tile p in the C layout, rounded to T: the C
// layout of two adjacent 8-column blocks is exactly the A layout of one 16-column step.
template <class T, int KT>
__device__ __forceinline__ void a_fragment_of(const float (&p)[KT][4], int kc, uint32_t (&af)[4]) {
  af[0] = pack2<T>(p[2 * kc][0], p[2 * kc][1]);
  af[1] = pack2<T>(p[2 * kc][2], p[2 * kc][3]);
  af[2] = pack2<T>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
  af[3] = pack2<T>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
}

// C[mt][16 x 8NT] += A[mt][16 x K] . B[8NT x K]^T for MT row tiles of A (tile mt at rows 16mt..
// of a), each as mma_abt, fragments by ldmatrix.x4: every B fragment loaded serves all MT tiles.
// Lane l names row l % 8 of matrix l / 8. For A, matrices 0-3 are (rows 0-7 | 8-15) x (columns
// k..k+7 | k+8..) in the order of the A registers a[0..3]; for B, they are (rows 8n..8n+7 |
// 8n+8..) x (columns k.. | k+8..) in the order b[n][0], b[n][1], b[n+1][0], b[n+1][1]. Each
// accumulator sees the same products in the same order whatever MT is.
//
// kPeelFirstStep: the first 16-column step apart from the rolled loop. Where the caller's c starts at
// zero (the backward's score and dP tiles), its products then add to a known zero and the compiler
// drops the zeroing of the accumulators and a trip's loop overhead: 55-94 of the split passes' 375-729
// instructions per tile (docs/results/attention_vs_flashattention2_sass.md). The same operations in
// the same order. The pipelined forward peels except at DP = 32 with one row tile, where it would spill
// at its 128-register cap (kPipelinedPeel).
template <int MT, int NT, int K, bool kPeelFirstStep = false, class T>
__device__ __forceinline__ void mma_abt_ldmatrix(float (&c)[MT][NT][4], const T* a, const T* b, int ld) {
  static_assert(NT % 2 == 0, "B fragments come in pairs of 8-row blocks");
  const int lane = threadIdx.x & 31;
  const T* a_row = a + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ld + 8 * (lane >> 4);
  const T* b_row = b + ((lane & 7) + 8 * (lane >> 4)) * ld + 8 * ((lane >> 3) & 1);
  const auto step = [&](int k) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(af[mt], a_row + 16 * mt * ld + k);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t bf[4];
      ldmatrix_x4(bf, b_row + 8 * n * ld + k);
      const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(c[mt][n], af[mt], b0);
        mma16816<T>(c[mt][n + 1], af[mt], b1);
      }
    }
  };
  // A rolled k loop, as in mma_abt: unrolled, the fragments of every step would be live at once.
  if constexpr (kPeelFirstStep) step(0);
#pragma unroll 1
  for (int k = kPeelFirstStep ? 16 : 0; k < K; k += 16) step(k);
}

// C[mt][16 x 8NT] += P[mt][16 x 8KT] . V[8KT x 8NT] for MT row tiles, each as mma_pb (P a register
// tile in the C layout, rounded to T), V's fragments by ldmatrix.x4.trans, each serving all MT
// tiles. Lane l names row l % 8 of matrix l / 8; the matrices are (keys 16kc..+7 | 16kc+8..+15) x
// (columns 8n.. | 8n+8..), in the order b[n][0], b[n][1], b[n+1][0], b[n+1][1]: transposed, lane
// 4g + w gets keys 2w, 2w + 1 of column g, the B layout.
template <int MT, int NT, int KT, class T>
__device__ __forceinline__ void mma_pv_ldmatrix(float (&c)[MT][NT][4], const float (&p)[MT][KT][4], const T* v,
                                                int ld) {
  static_assert(NT % 2 == 0 && KT % 2 == 0, "whole 16-key steps and pairs of 8-column blocks");
  const int lane = threadIdx.x & 31;
  const T* v_row = v + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ld + 8 * (lane >> 4);
#pragma unroll
  for (int kc = 0; kc < KT / 2; ++kc) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) a_fragment_of<T>(p[mt], kc, af[mt]);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t bf[4];
      ldmatrix_x4_trans(bf, v_row + 16 * kc * ld + 8 * n);
      const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(c[mt][n], af[mt], b0);
        mma16816<T>(c[mt][n + 1], af[mt], b1);
      }
    }
  }
}

// C[16 x 8NT] += A[16 x K] . B[8NT x K]^T, with A's and B's rows in shared memory (row stride ld).
// 16-bit: tensor cores, fragments by ldmatrix (mma_abt_ldmatrix, one row tile).
template <int NT, int K, class T>
__device__ __forceinline__ void mma_abt(float (&c)[NT][4], const T* a, const T* b, int ld) {
  if constexpr (std::is_same_v<T, float>) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    // Rolled k loop: fully unrolled, the compiler hoists every operand load and runs out of registers.
#pragma unroll 2
    for (int k = 0; k < K; ++k) {
      const float a0 = a[g * ld + k], a1 = a[(g + 8) * ld + k];
#pragma unroll
      for (int n = 0; n < NT; ++n)
        fma_2x2(c[n], a0, a1, b[(8 * n + 2 * t) * ld + k], b[(8 * n + 2 * t + 1) * ld + k]);
    }
  } else {
    mma_abt_ldmatrix<1, NT, K, true>(reinterpret_cast<float(&)[1][NT][4]>(c), a, b, ld);
  }
}

// C[16 x 8NT] += P[16 x 8KT] . B[8KT x 8NT]: P is a register tile in the C
// layout (rounded to T for tensor cores), B's rows in shared memory (stride ld).
template <int NT, int KT, class T>
__device__ __forceinline__ void mma_pb(float (&c)[NT][4], const float (&p)[KT][4], const T* b, int ld) {
  static_assert(KT % 2 == 0, "P must span whole 16-column steps");
  const int lane = threadIdx.x & 31;
  if constexpr (std::is_same_v<T, float>) {
    const int t = lane & 3;
    // Row g's P values are spread over the 4 lanes of this quad: lane 4g + src holds columns 2src, 2src+1.
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
      for (int src = 0; src < 4; ++src) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p0 = __shfl_sync(kFullMask, p[kt][e], (lane & ~3) | src);
          const float p1 = __shfl_sync(kFullMask, p[kt][2 + e], (lane & ~3) | src);
          const float* brow = b + (8 * kt + 2 * src + e) * ld + 2 * t;
#pragma unroll
          for (int n = 0; n < NT; ++n) fma_2x2(c[n], p0, p1, brow[8 * n], brow[8 * n + 1]);
        }
      }
    }
  } else {
    // B's fragments by ldmatrix.x2.trans (B is stored k-major; the mma wants it column-major):
    // lane l names key row l % 16 of the step at column 8n, so registers 0 and 1 are keys 2t, 2t + 1
    // and 2t + 8, 2t + 9 of column g: one instruction where scalar loads took four 16-bit loads
    // and two packs. x2, not mma_pv_ldmatrix's x4: one fragment live at a time, because
    // dkdv_kernel is at the 255-register limit at DP = 64 (it spills 8 bytes either way).
    const T* b_row = b + (lane & 15) * ld;
#pragma unroll
    for (int kc = 0; kc < KT / 2; ++kc) {
      uint32_t af[4];
      a_fragment_of<T>(p, kc, af);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        uint32_t bf[2];
        ldmatrix_x2_trans(bf, b_row + 16 * kc * ld + 8 * n);
        mma16816<T>(c[n], af, bf);
      }
    }
  }
}

// Shared-memory tiles from global memory. A tile is rows [row0, row0 + R) of a
// matrix with `seq` rows of stride `stride`, columns [0, dh), in an R x DP
// shared tile (row stride kLd), zero beyond the matrix.
//
// load_tile_async copies 16 bytes per cp.async (global to shared, no register
// round trip): it needs a 16-byte aligned source and dh a multiple of 16 bytes
// (vector_loads). Each thread owns one 16-byte column piece (threadIdx.x % C) of
// every (kThreads / C)-th row from threadIdx.x / C, so its addresses are a base
// and a fixed step; the generic idx -> (row, column) walk it replaces took about
// 30 instructions per copy (a loop of unknown trip count, divisions, two 64-bit
// products), and loading through registers held them across the loads, which
// cost the 168-register fused backward a spill. Pieces past the matrix read 0
// bytes (their source address only an aligned stand-in) and are zero-filled.
// The copies are not committed: the pipelined kernels commit them with their
// next tiles' (attention_forward_pipelined.cuh), start_tile / finish_tiles below
// wait for them at once.
template <int R, int DP, class T>
__device__ __forceinline__ void load_tile_async(T* dst, const T* src, int64_t stride, int row0, int seq, int dh) {
  constexpr int ld = kLd<T, DP>, V = 16 / static_cast<int>(sizeof(T)), C = DP / V;
  static_assert(kThreads % C == 0, "a thread's column piece is the same in every row it copies");
  constexpr int kRowStep = kThreads / C, kSteps = (R + kRowStep - 1) / kRowStep;
  const int r0 = static_cast<int>(threadIdx.x) / C, col = (static_cast<int>(threadIdx.x) % C) * V;
  const bool col_in = col < dh;
  const T* from = src + (row0 + r0) * stride + col;
  const int64_t from_step = kRowStep * stride;
  T* to = dst + r0 * ld + col;
  if (col_in && row0 + R <= seq) {  // the whole tile inside the matrix (all but a last partial one):
#pragma unroll                       // no per-copy bound and no stand-in address to select
    for (int i = 0; i < kSteps; ++i, from += from_step, to += kRowStep * ld) {
      if (R % kRowStep != 0 && r0 + i * kRowStep >= R) break;  // only where the last step covers part of the rows
      cp_async_16(to, from, 16);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i, from += from_step, to += kRowStep * ld) {
    const int r = r0 + i * kRowStep;
    if (R % kRowStep != 0 && r >= R) break;  // only where the last step covers part of the rows
    const bool in = col_in && row0 + r < seq;
    cp_async_16(to, in ? from : src, in ? 16 : 0);
  }
}

// A tile's copies started: with `vec` by load_tile_async (uncommitted), else by plain element loads and
// stores, done at once (Dh not a multiple of 16 bytes, or an unaligned base).
template <int R, int DP, class T>
__device__ __forceinline__ void start_tile(T* dst, const T* src, int64_t stride, int row0, int seq, int dh, bool vec) {
  if (vec) return load_tile_async<R, DP>(dst, src, stride, row0, seq, dh);
  constexpr int ld = kLd<T, DP>;
  for (int idx = threadIdx.x; idx < R * DP; idx += kThreads) {
    const int r = idx / DP, col = idx % DP;
    T v{};
    if (row0 + r < seq && col < dh) v = src[(row0 + r) * stride + col];
    dst[r * ld + col] = v;
  }
}

// Waits for this thread's started copies (every group: only where none of a pipeline's is in flight);
// the caller's next barrier makes everyone's visible.
__device__ __forceinline__ void finish_tiles() {
  cp_async_commit_group();
  cp_async_wait_group<0>();
}

// One tile, landed (this thread's part; visible to the block after its next barrier).
template <int R, int DP, class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t stride, int row0, int seq, int dh, bool vec) {
  start_tile<R, DP>(dst, src, stride, row0, seq, dh, vec);
  finish_tiles();
}

__device__ __forceinline__ bool real_key(const uint8_t* mask, int b, int seq, int j) {
  return j < seq && (mask == nullptr || mask[static_cast<int64_t>(b) * seq + j] != 0);
}

// Whether key k0 + threadIdx.x of a 64-key tile is real, for threads 0-63 (0 for the others): a tile's
// flags, one per thread. A loop over the tile's keys in steps of the block's threads runs at most once,
// but the compiler does not know the block's size and emitted an unrolled loop with a remainder.
__device__ __forceinline__ uint8_t key_flag_of_thread(const uint8_t* mask, int b, int seq, int k0) {
  static_assert(kThreads >= kRows, "one key flag per thread");
  return threadIdx.x < kRows && real_key(mask, b, seq, k0 + static_cast<int>(threadIdx.x));
}

// key_end[b] = one past the last j with mask[b, j] != 0 (0 for a row with no real key), one warp per
// batch row: each lane scans every 32nd key, then the lanes' maxima meet by shuffles. Reads B * S bytes.
__global__ void key_end_kernel(const uint8_t* __restrict__ mask, int batch, int seq, int* __restrict__ key_end) {
  const int b = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x >> 5);
  if (b >= batch) return;  // the whole warp leaves together
  const int lane = threadIdx.x & 31;
  unsigned end = 0;
  for (int j = lane; j < seq; j += 32)
    if (mask[static_cast<int64_t>(b) * seq + j] != 0) end = static_cast<unsigned>(j) + 1;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned other = __shfl_xor_sync(kFullMask, end, o);
    end = other > end ? other : end;
  }
  if (lane == 0) key_end[b] = static_cast<int>(end);
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// Dropout (kernels/attention_params.h): a group of 8 decisions is a lane's
// part of a 16 x 16 square in the accumulator layout, so each pass spends one
// Philox4x32-10 block per 8 decisions (philox10x8), or one Philox4x32-7 block
// per 16, shared by a lane pair (philox7x16), and none on squares outside the
// S x S matrix (whose probabilities are 0 anyway: their keep bits stay 0).
// An includer may define ATTENTION_COUNT_PHILOX() to count the blocks
// computed (the emulator test does); on the GPU it is nothing.
#ifndef ATTENTION_COUNT_PHILOX
#define ATTENTION_COUNT_PHILOX()
#endif

struct Params {
  int seq, heads, dh;
  float score_scale;        // log2(e) / sqrt(Dh): scores in log2 units
  float grad_scale;         // 1 / sqrt(Dh)
  float drop_scale;         // 1 / (quantised keep rate); 1 without dropout
  uint32_t drop_threshold;  // uniforms (16-bit, or 8-bit under philox7x16) below it drop their element
  AttentionDropout drop;
  // Trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed): key_end[b] is one past batch row b's last
  // real key (key_end_kernel), so every key tile from ceil(key_end[b] / 64) on holds padding only and
  // the kernels skip it (key_tiles_of). Null: every tile is visited.
  const int* key_end = nullptr;
  // Saved keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved; kernels/attention_params.h): the forward writes
  // each Philox block's 8 keep bits to keep_out[block] as it computes them; a backward with keep_in reads
  // them there instead of computing any block. Null: nothing written, every block computed.
  uint8_t* keep_out = nullptr;
  const uint8_t* keep_in = nullptr;
  // The forward's grid under TANDEM_ATTENTION_BLOCK_ORDER=tiles_first (the forward's launch decides:
  // tiles_first_applies): blockIdx.x is the block's query tile and blockIdx.y its head, so that a head's
  // tiles run side by side and share its K and V in L2; otherwise blockIdx.x is the head. block_tile reads
  // it, block_grid lays the grid out by it. The backward kernels read blockIdx.x as the head, always.
  bool tiles_first = false;
};

// A forward block's head (b * H + h) and query tile, from its place in a grid laid out by block_grid.
// Read at run time, the place costs registers where the kernels used to re-read blockIdx (-5 to +5 in
// the forward kernels; the five-block pipelined forward at DP = 32 spills 4 bytes each way, nvcc 13.0;
// multiplying by the flag instead of selecting gave the same), which is why the backward's kernels,
// whose budgets are tighter and whose grids showed no L2 loss, do not read it.
struct BlockTile {
  int head, tile;
};
__device__ __forceinline__ BlockTile block_tile(const Params& P) {
  const int x = static_cast<int>(blockIdx.x), y = static_cast<int>(blockIdx.y);
  return P.tiles_first ? BlockTile{y, x} : BlockTile{x, y};
}

// Key tiles of batch row b that can hold a real key: all ceil(S / 64), or with P.key_end only those
// before its last real key. A skipped tile's keys are all padding, so in every pass its probabilities
// are 0: skipping it leaves the running max, the denominators and every accumulator as they were, the
// same bits (an accumulator that starts at +0 only ever adds +0 products from such a tile; the
// emulated tests compare the bits). So the work of a right-padded batch row follows its length, not S,
// which a padded batch (every row padded to max_seq_len) otherwise spends on keys it masks.
__device__ __forceinline__ int key_tiles_of(const Params& P, int b) {
  const int end = P.key_end != nullptr ? P.key_end[b] : P.seq;
  return (end + kRows - 1) / kRows;
}

// Where head (b, h) starts in a packed qkv [B, S, 3*H*Dh] (the rows of Q, K and V, stride
// `stride`), and the row stride of out and dout [B, S, H*Dh]. Every kernel's first step.
template <class T>
struct HeadRows {
  const T* q;
  const T* k;
  const T* v;
  int64_t stride;      // 3 * H * Dh
  int64_t out_stride;  // H * Dh
};

template <class T>
__device__ __forceinline__ HeadRows<T> head_rows(const T* qkv, const Params& P, int b, int h) {
  const int64_t stride = int64_t{3} * P.heads * P.dh, out_stride = int64_t{P.heads} * P.dh;
  const T* q = qkv + int64_t{b} * P.seq * stride + int64_t{h} * P.dh;
  const T* k = q + out_stride;
  return {q, k, k + out_stride, stride, out_stride};
}

// The 8 keep bits of the group that holds (i, j) of head bh (kernels/attention_params.h) under
// philox10x8, computed, and saved to P.keep_out where the forward is given it.
__device__ __forceinline__ uint32_t keep8_at(const Params& P, int64_t bh, int64_t i, int64_t j) {
  const uint64_t group = attention_dropout_group(bh, i, j, P.seq);
  ATTENTION_COUNT_PHILOX();
  const uint32_t k8 = dropout_keep8(philox_block(P.drop.seed, P.drop.subsequence(), group), P.drop_threshold);
  if (P.keep_out != nullptr) P.keep_out[group] = static_cast<uint8_t>(k8);
  return k8;
}

// philox7x16: the 16 keep bits of Philox4x32-7 block `block16` (kernels/attention_params.h).
__device__ __forceinline__ uint32_t keep16_at(const Params& P, uint64_t block16) {
  ATTENTION_COUNT_PHILOX();
  return attention_keep16(P.drop, block16, P.drop_threshold);
}

// philox7x16 for squares m and m + 1 of a tile: lanes L and L ^ 4 need the same block of each square,
// so L computes the one of square m + odd (odd: 1 for the pair's second lane) and they swap. `group0` is
// this lane's group of square 0 of the tile and `step` the groups between consecutive squares (32 along
// keys, 32 ceil(S / 16) along queries), so square m's block is block16(group0) + m * step / 2; `squares`
// how many of the tile's squares hold decisions. keep16[0], keep16[1]: the blocks of squares m and
// m + 1. Warp-uniform m, so every lane takes part in the shuffle; a lane whose square is outside the
// matrix computes nothing (its bits are 0).
__device__ __forceinline__ void keep16_pair(const Params& P, int m, int odd, uint64_t group0, uint64_t step,
                                            int squares, uint32_t (&keep16)[2]) {
  const int mine = m + odd;
  const uint64_t block = attention_dropout_block16(group0) + static_cast<uint64_t>(mine) * (step / 2);
  const uint32_t own = mine < squares ? keep16_at(P, block) : 0u;
  const uint32_t other = __shfl_xor_sync(kFullMask, own, 4);
  keep16[0] = odd ? other : own;
  keep16[1] = odd ? own : other;
}

// The same 8 bits read from P.keep_in, where the forward saved them (TANDEM_ATTENTION_DROPOUT_KEEP=saved).
// The byte a lane reads is its lane's of the square's 32 consecutive bytes, so a warp's read of a square
// is one 32-byte sector. The callers request every square's byte of a tile before using any, so that
// the loads are in flight together: one memory latency per tile, where the Philox path's loop (unrolled
// once, for registers) would wait for each in turn. An includer may define ATTENTION_ON_KEEP_READ(block)
// to see the reads (the emulator test checks that each was written).
#ifndef ATTENTION_ON_KEEP_READ
#define ATTENTION_ON_KEEP_READ(block)
#endif
__device__ __forceinline__ uint32_t saved_keep8_at(const Params& P, int64_t bh, int64_t i, int64_t j) {
  const uint64_t group = attention_dropout_group(bh, i, j, P.seq);
  ATTENTION_ON_KEEP_READ(group);
  return P.keep_in[group];
}

// Decisions of a lane's fragment of a 16 x 8N tile in the accumulator layout:
// rows (queries) i and i + 8, columns (keys) k0 + 8n + 2t + {0, 1}, as keep[r]
// bit 2n + c for row i + 8r. i % 16 = g < 8 and k0 is a multiple of 16, so the
// lane's 8 elements of each 16 x 16 square are exactly Philox block
// (square, 4g + t): N / 2 blocks, every decision used. Slot 4nb + 2r + c of
// square m's block is the element of 8-column block n = 2m + nb. Squares
// outside the S x S matrix keep their bits 0.
__device__ __forceinline__ void add_square_along_keys(uint32_t (&keep)[2], uint32_t k8, int m) {
#pragma unroll
  for (int r = 0; r < 2; ++r) keep[r] |= (((k8 >> (2 * r)) & 3u) | ((k8 >> (4 + 2 * r)) & 3u) << 2) << (4 * m);
}

template <int N>
__device__ __forceinline__ void keep_bits_along_keys(const Params& P, int64_t bh, int64_t i, int k0, int t,
                                                     uint32_t (&keep)[2]) {
  keep[0] = keep[1] = 0;
  if (i - i % 16 >= P.seq) return;
  if (P.keep_in != nullptr) {
    uint32_t k8[N / 2];
#pragma unroll
    for (int m = 0; m < N / 2; ++m)
      k8[m] = k0 + 16 * m < P.seq ? saved_keep8_at(P, bh, i, k0 + 16 * m + 2 * t) : 0u;
#pragma unroll
    for (int m = 0; m < N / 2; ++m) add_square_along_keys(keep, k8[m], m);
    return;
  }
  if (P.drop.rng == AttentionDropoutRng::Philox7x16) {
    // Rows i and i ^ 1 (lanes L and L ^ 4) hold the two halves of each square's block: this lane's is half
    // i % 2 (i % 16 < 8 is the lane's g).
    const int odd = static_cast<int>(i & 1);
    const int inside = (P.seq - k0 + 15) / 16, squares = inside < N / 2 ? inside : N / 2;  // inside the matrix
    const uint64_t group0 = attention_dropout_group(bh, i, k0 + 2 * t, P.seq);
#pragma unroll 1
    for (int m = 0; m < squares; m += 2) {
      uint32_t keep16[2];
      keep16_pair(P, m, odd, group0, 32, squares, keep16);
#pragma unroll
      for (int s = 0; s < 2; ++s) {  // unrolled: keep16[s] stays in registers
        if (m + s >= squares) break;
        const uint32_t k8 = (keep16[s] >> (8 * odd)) & 0xffu;
        add_square_along_keys(keep, k8, m + s);
        if (P.keep_out != nullptr) P.keep_out[group0 + 32 * static_cast<uint64_t>(m + s)] = static_cast<uint8_t>(k8);
      }
    }
    return;
  }
#pragma unroll 1
  for (int m = 0; m < N / 2 && k0 + 16 * m < P.seq; ++m)
    add_square_along_keys(keep, keep8_at(P, bh, i, k0 + 16 * m + 2 * t), m);
}

// Decisions of a lane's fragment of a transposed 16 x 8N tile (dK/dV): rows
// (keys) j and j + 8, columns (queries) q0 + 8n + 2t + {0, 1}, as keep[r] bit
// 2n + c for row j + 8r. j % 16 = g < 8 and q0 is a multiple of 16. Of square
// m this lane holds, for query columns 2t + c, the halves of blocks (square,
// 4(2t + c) + g/2) whose key parity is g's; lane ^ 4 (key g ^ 1) holds the
// other halves of the same two blocks. So each lane computes one of them, the
// one for c = g % 2, and the pair swap keep bits: one shuffle per block, and
// again one Philox block per 8 decisions (under philox7x16 the pair share each
// square's one block of 16, keep16_pair, so one per 16). Warp-uniform loop bounds, so every
// lane takes part in every shuffle. (Saved bits take the same route: a lane
// reads its own block's byte, and the pair swap them.)
// k8[c]: the keep bits of the group holding query column 2t + c of square m.
__device__ __forceinline__ void add_groups_along_queries(uint32_t (&keep)[2], const uint32_t (&k8)[2], int m,
                                                         int odd) {
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) keep[r] |= ((k8[c] >> (4 * r + 2 * nb + odd)) & 1u) << (2 * (2 * m + nb) + c);
}

__device__ __forceinline__ void add_square_along_queries(uint32_t (&keep)[2], uint32_t own, int m, int odd) {
  const uint32_t other = __shfl_xor_sync(kFullMask, own, 4);
  const uint32_t k8[2] = {odd ? other : own, odd ? own : other};
  add_groups_along_queries(keep, k8, m, odd);
}

template <int N>
__device__ __forceinline__ void keep_bits_along_queries(const Params& P, int64_t bh, int q0, int64_t j, int t,
                                                        uint32_t (&keep)[2]) {
  keep[0] = keep[1] = 0;
  if (j - j % 16 >= P.seq) return;
  const int odd = static_cast<int>(j & 1);
  if (P.keep_in != nullptr) {
    uint32_t own[N / 2];
#pragma unroll
    for (int m = 0; m < N / 2; ++m)
      own[m] = q0 + 16 * m < P.seq ? saved_keep8_at(P, bh, q0 + 16 * m + 2 * t + odd, j - odd) : 0u;
#pragma unroll
    for (int m = 0; m < N / 2; ++m) add_square_along_queries(keep, own[m], m, odd);  // 0 outside: adds nothing
    return;
  }
  if (P.drop.rng == AttentionDropoutRng::Philox7x16) {
    // Keys j and j ^ 1 (lanes L and L ^ 4) hold the same 8 keys x 4 queries of each square: both groups
    // of one block, query columns 2t (half 0) and 2t + 1 (half 1).
    const int inside = (P.seq - q0 + 15) / 16, squares = inside < N / 2 ? inside : N / 2;
    const uint64_t group0 = attention_dropout_group(bh, q0 + 2 * t + odd, j - odd, P.seq);
    const uint64_t step = 32 * static_cast<uint64_t>((P.seq + 15) / 16);  // the next square down the queries
#pragma unroll 1
    for (int m = 0; m < squares; m += 2) {
      uint32_t keep16[2];
      keep16_pair(P, m, odd, group0, step, squares, keep16);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        if (m + s >= squares) break;
        const uint32_t k8[2] = {keep16[s] & 0xffu, keep16[s] >> 8};
        add_groups_along_queries(keep, k8, m + s, odd);
        if (P.keep_out != nullptr)
          P.keep_out[group0 + step * static_cast<uint64_t>(m + s)] = static_cast<uint8_t>(keep16[s] >> (8 * odd));
      }
    }
    return;
  }
#pragma unroll 1
  for (int m = 0; m < N / 2 && q0 + 16 * m < P.seq; ++m)
    add_square_along_queries(keep, keep8_at(P, bh, q0 + 16 * m + 2 * t + odd, j - odd), m, odd);
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

// Whether every key of a 64-key tile is real, from its flags in shared memory (one byte each, 0 or 1,
// 16-byte aligned) read as four 16-byte words and ANDed: a few instructions per tile, where masking the
// scores costs a flag load per two elements and a select per element. Most tiles are all real (every
// tile but the last of an unpadded row; with trimmed key tiles, all but one per padded row), and they
// skip the masking (mask_padding_keys).
__device__ __forceinline__ bool all_keys_real(const uint8_t* real) {
  const uint4* words = reinterpret_cast<const uint4*>(real);
  uint32_t all = ~0u;
#pragma unroll
  for (int i = 0; i < kRows / 16; ++i) all &= words[i].x & words[i].y & words[i].z & words[i].w;
  return all == 0x01010101u;
}

// A lane's scores of padding keys (columns 8n + 2t + {0, 1} of a tile in the accumulator layout) set to
// -inf, so that they weigh exp2(-inf) = 0.
template <int NC>
__device__ __forceinline__ void mask_padding_keys(float (&s)[NC][4], const uint8_t* real, int t) {
#pragma unroll
  for (int n = 0; n < NC; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (!real[8 * n + 2 * t + (e & 1)]) s[n][e] = -INFINITY;
}

// One 64-key tile of the forward for a warp's 16 query rows (row = this lane's
// first row, q0 + 16 * warp + g), given its scores s = Q K^T: mask them
// (real[j]: key k0 + j is real), update the running max m (scaled, log2 units)
// and this lane's part of the denominators l, rescale the output accumulator o
// by exp(m_old - m_new), and leave in s the (dropped-out) probabilities that
// P V consumes. The scale is applied in the exponent's FMA, s * scale - m, as
// FlashAttention does (and as the backward recomputes P): the max is taken on
// the raw scores and scaled once, which gives the same value as the max of the
// scaled ones (rounding is monotonic and the scale positive), and each element
// costs one instruction less than a multiply before the max.
// Shared by forward_kernel and the pipelined forward.
template <int NC, int NO>
__device__ __forceinline__ void online_softmax_tile(float (&s)[NC][4], float (&o)[NO][4], float (&m)[2],
                                                    float (&l)[2], const uint8_t* real, const Params& P, int64_t bh,
                                                    int64_t row, int k0, int t) {
  if (!all_keys_real(real)) mask_padding_keys(s, real, t);
  float mx[2] = {-INFINITY, -INFINITY};  // this tile's raw maxima
#pragma unroll
  for (int n = 0; n < NC; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
  float base[2], alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(m[r], quad_max(mx[r]) * P.score_scale);  // -inf stays -inf
    base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];  // no real key yet: keep everything at 0, not NaN
    alpha[r] = exp2_ftz(m[r] - base[r]);
    m[r] = mx[r];
  }
#pragma unroll
  for (int n = 0; n < NC; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2_ftz(fmaf(s[n][e], P.score_scale, -base[e >> 1]));  // -inf: 0
      sum[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + sum[r];
#pragma unroll
  for (int d = 0; d < NO; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[d][e] *= alpha[e >> 1];

  if (P.drop.active()) {
    uint32_t keep[2];
    keep_bits_along_keys<NC>(P, bh, row, k0, t, keep);
#pragma unroll
    for (int n = 0; n < NC; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (!((keep[e >> 1] >> (2 * n + (e & 1))) & 1u)) s[n][e] = 0.0f;
  }
}

// The forward's end for a warp's rows (row = this lane's first, as above): out = o / l (times the
// dropout scale) and lse = m + log l in natural-log units, +inf and 0 for a row with no real key.
template <class T, int NO>
__device__ __forceinline__ void store_forward_rows(const float (&o)[NO][4], const float (&m)[2], const float (&l)[2],
                                                   T* __restrict__ out, float* __restrict__ lse, const Params& P,
                                                   int bh, int row, int t) {
  const int b = bh / P.heads, h = bh % P.heads;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    const int i = row + 8 * r;
    if (i >= P.seq) continue;
    const float inv = total > 0.0f ? P.drop_scale / total : 0.0f;
    T* orow = out + (int64_t{b} * P.seq + i) * (int64_t{P.heads} * P.dh) + int64_t{h} * P.dh;
#pragma unroll
    for (int d = 0; d < NO; ++d)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * d + 2 * t + e;
        if (col < P.dh) orow[col] = store<T>(o[d][2 * r + e] * inv);
      }
    if (t == 0) lse[int64_t{bh} * P.seq + i] = total > 0.0f ? (m[r] + log2f(total)) * kLn2 : INFINITY;
  }
}

template <class T, int DP>
__global__ void __launch_bounds__(kThreads, 2)
    forward_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, T* __restrict__ out,
                   float* __restrict__ lse, Params P, bool vec) {
  constexpr int ld = kLd<T, DP>;
  constexpr int NC = kRows / 8;  // 8-column blocks of a 64-key tile
  ATTENTION_SHARED_MEMORY(smem);
  T* q_s = reinterpret_cast<T*>(smem);
  T* k_s = q_s + kRows * ld;
  T* v_s = k_s + kRows * ld;
  uint8_t* real_s = reinterpret_cast<uint8_t*>(v_s + kRows * ld);

  const BlockTile place = block_tile(P);
  const int bh = place.head, b = bh / P.heads, h = bh % P.heads;
  const int q0 = place.tile * kRows;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);

  load_tile<kRows, DP>(q_s, src.q, src.stride, q0, P.seq, P.dh, vec);
  const T* q_w = q_s + warp * 16 * ld;

  float o[DP / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of rows g and g+8
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running denominators

  const int key_stop = key_tiles_of(P, b) * kRows;
  for (int k0 = 0; k0 < key_stop; k0 += kRows) {
    __syncthreads();  // every warp is done with the previous K/V tile
    start_tile<kRows, DP>(k_s, src.k, src.stride, k0, P.seq, P.dh, vec);
    start_tile<kRows, DP>(v_s, src.v, src.stride, k0, P.seq, P.dh, vec);
    if (threadIdx.x < kRows) real_s[threadIdx.x] = key_flag_of_thread(mask, b, P.seq, k0);
    finish_tiles();
    __syncthreads();

    float s[NC][4] = {};
    mma_abt<NC, DP>(s, q_w, k_s, ld);
    online_softmax_tile(s, o, m, l, real_s, P, bh, q0 + warp * 16 + g, k0, t);
    mma_pb<DP / 8, NC>(o, s, v_s, ld);
  }
  store_forward_rows<T>(o, m, l, out, lse, P, bh, q0 + warp * 16 + g, t);
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

// rowdot[b, h, i] = sum_d dout[b, i, h, d] * out[b, i, h, d], one warp per (b, i, h).
template <class T>
__global__ void rowdot_kernel(const T* __restrict__ dout, const T* __restrict__ out, float* __restrict__ rowdot,
                              int64_t rows, int seq, int heads, int dh) {
  const int64_t row = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5);  // (b * S + i) * H + h
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x & 31;
  float acc = 0.0f;
  for (int d = lane; d < dh; d += 32) acc += load(dout[row * dh + d]) * load(out[row * dh + d]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(kFullMask, acc, o);
  if (lane == 0) {
    const int64_t h = row % heads, bi = row / heads, b = bi / seq, i = bi % seq;
    rowdot[(b * heads + h) * seq + i] = acc;
  }
}

// The dK/dV pass's steps, shared by dkdv_kernel and fused_backward_kernel (which adds dQ to the same
// operations in the same order, so that the two paths' dK and dV are the same bits).

// The block's 64 keys from k0: the K and V tiles into shared memory, and this lane's two keys (rows g
// and g + 8 of its warp's 16) and whether each is real.
template <int DP, class T>
__device__ __forceinline__ void load_key_tile(T* k_s, T* v_s, const HeadRows<T>& src, const uint8_t* mask,
                                              const Params& P, int b, int k0, bool vec, int (&key)[2],
                                              bool (&real)[2]) {
  start_tile<kRows, DP>(k_s, src.k, src.stride, k0, P.seq, P.dh, vec);
  start_tile<kRows, DP>(v_s, src.v, src.stride, k0, P.seq, P.dh, vec);
  finish_tiles();
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    key[r] = k0 + warp * 16 + g + 8 * r;
    real[r] = real_key(mask, b, P.seq, key[r]);
  }
}

// Queries [q0, q0 + BQ) into shared memory: Q, dO, lse (in log2 units) and rowdot, rows past S as P = 0.
// Between two barriers: the first waits until every warp is done with the previous query tile (and
// with whatever else of it the caller keeps in shared memory), the second until this one is loaded.
template <int BQ, int DP, class T>
__device__ __forceinline__ void load_query_tile(T* q_s, T* do_s, float* lse_s, float* rowdot_s,
                                                const HeadRows<T>& src, const T* do_g, const float* lse,
                                                const float* rowdot, const Params& P, int bh, int q0,
                                                bool vec_qkv, bool vec_dout) {
  __syncthreads();
  start_tile<BQ, DP>(q_s, src.q, src.stride, q0, P.seq, P.dh, vec_qkv);
  start_tile<BQ, DP>(do_s, do_g, src.out_stride, q0, P.seq, P.dh, vec_dout);
  for (int i = threadIdx.x; i < BQ; i += kThreads) {
    const bool in = q0 + i < P.seq;  // rows past the end: P = 0
    lse_s[i] = in ? lse[int64_t{bh} * P.seq + q0 + i] * kLog2e : INFINITY;
    rowdot_s[i] = in ? rowdot[int64_t{bh} * P.seq + q0 + i] : 0.0f;
  }
  finish_tiles();
  __syncthreads();
}

// One query tile for this warp's 16 keys (k_w, v_w: their K and V rows): S^T = K Q^T, dP^T = V dO^T,
// P^T, dS^T = P^T (dP^T * drop - D), then dV += (P^T * drop) dO and dK += dS^T Q. Leaves dS^T (before
// the 1/sqrt(Dh) of dK and dQ) in dst, a transposed tile: rows this warp's keys, columns queries.
//
// kDropoutFreeCopy: a second copy of the element loop for P.drop.active() false, without the keep bits
// and the two multiplies by f = 1 (the same values: p * 1 = p). The split path's dK/dV kernels take it;
// the fused kernel at its 168-register cap spills 24 bytes with both copies, so it keeps the one loop.
template <int DP, int NQ, bool kDropoutFreeCopy, class T>
__device__ __forceinline__ void dkdv_query_tile(float (&dk)[DP / 8][4], float (&dv)[DP / 8][4], float (&dst)[NQ][4],
                                                const T* k_w, const T* v_w, const T* q_s, const T* do_s,
                                                const float* lse_s, const float* rowdot_s, const int (&key)[2],
                                                const bool (&real)[2], const Params& P, int bh, int q0, int t) {
  constexpr int ld = kLd<T, DP>;
  float pt[NQ][4] = {};
#pragma unroll
  for (int n = 0; n < NQ; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[n][e] = 0.0f;
  mma_abt<NQ, DP>(pt, k_w, q_s, ld);
  mma_abt<NQ, DP>(dst, v_w, do_s, ld);
  // P^T of element (n, e): row (key) e / 2 of this lane's two, query qi. The exponential is taken for a
  // padding key too and then not selected: computed only for real keys, the compiler predicated it on
  // the key's flag and loaded lse and the scale once per predicate, twice per element (an extra shared
  // and a constant load per element, 47 of the 798 instructions per query tile at Dh = 64 in bf16;
  // docs/results/attention_vs_flashattention2_sass.md). The same values.
  const auto probability = [&](int n, int e, int qi) {
    const float p = exp2_ftz(pt[n][e] * P.score_scale - lse_s[qi]);
    return real[e >> 1] ? p : 0.0f;
  };
  // The element loop; without WithKeep the same with f = 1 (p * 1 = p exactly): no keep bit and two
  // multiplies fewer per element.
  const auto elements = [&](auto with_keep) {
    constexpr bool WithKeep = decltype(with_keep)::value;
    uint32_t keep[2] = {~0u, ~0u};
    if (WithKeep && P.drop.active()) keep_bits_along_queries<NQ>(P, bh, q0, key[0], t, keep);
#pragma unroll
    for (int n = 0; n < NQ; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qi = 8 * n + 2 * t + (e & 1);
        const float p = probability(n, e, qi);
        // f: 1 without dropout (drop_scale is then 1)
        const float f = !WithKeep || (keep[e >> 1] >> (2 * n + (e & 1))) & 1u ? P.drop_scale : 0.0f;
        pt[n][e] = WithKeep ? p * f : p;                                          // dropped-out probability
        dst[n][e] = p * ((WithKeep ? dst[n][e] * f : dst[n][e]) - rowdot_s[qi]);  // dS^T
      }
  };
  if (!kDropoutFreeCopy || P.drop.active()) elements(std::true_type{});
  else elements(std::false_type{});
  mma_pb<DP / 8, NQ>(dv, pt, do_s, ld);
  mma_pb<DP / 8, NQ>(dk, dst, q_s, ld);
}

// The pass's end: dK (times 1/sqrt(Dh)) and dV of this lane's two keys into dqkv.
template <int DP, class T>
__device__ __forceinline__ void store_dkdv_rows(const float (&dk)[DP / 8][4], const float (&dv)[DP / 8][4],
                                                T* __restrict__ dqkv, const HeadRows<T>& src, const int (&key)[2],
                                                const Params& P, int b, int h, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= P.seq) continue;
    T* row = dqkv + (int64_t{b} * P.seq + key[r]) * src.stride + int64_t{h} * P.dh;
    T* dk_row = row + src.out_stride;
    T* dv_row = dk_row + src.out_stride;
#pragma unroll
    for (int d = 0; d < DP / 8; ++d)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * d + 2 * t + e;
        if (col < P.dh) {
          dk_row[col] = store<T>(dk[d][2 * r + e] * P.grad_scale);
          dv_row[col] = store<T>(dv[d][2 * r + e]);
        }
      }
  }
}

// Whether a dK/dV block's key tile k0 lies past batch row b's last real key (trimmed key tiles): the
// whole block skips it, uniformly, before its first barrier.
__device__ __forceinline__ bool padding_key_tile(const Params& P, int b, int k0) {
  return k0 >= key_tiles_of(P, b) * kRows;
}

// What a skipped key tile's block writes: dK = dV = 0 for its keys, the bits its products would give
// (every P and dS of a padding key is 0).
template <int DP, class T>
__device__ __forceinline__ void store_zero_dkdv_rows(T* __restrict__ dqkv, const HeadRows<T>& src, int k0,
                                                     const Params& P, int b, int h) {
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const float zero[DP / 8][4] = {};
  store_dkdv_rows<DP>(zero, zero, dqkv, src, key, P, b, h, t);
}

// dK and dV for 64 keys per block, streaming BQ queries at a time.
template <class T, int DP, int BQ>
__global__ void __launch_bounds__(kThreads, 2)
    dkdv_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, const float* __restrict__ lse,
                const float* __restrict__ rowdot, const T* __restrict__ dout, T* __restrict__ dqkv, Params P,
                bool vec_qkv, bool vec_dout) {
  constexpr int ld = kLd<T, DP>;
  constexpr int NQ = BQ / 8;
  ATTENTION_SHARED_MEMORY(smem);
  T* k_s = reinterpret_cast<T*>(smem);
  T* v_s = k_s + kRows * ld;
  T* q_s = v_s + kRows * ld;
  T* do_s = q_s + BQ * ld;
  float* lse_s = reinterpret_cast<float*>(do_s + BQ * ld);  // log2 units
  float* rowdot_s = lse_s + BQ;

  const int bh = blockIdx.x, b = bh / P.heads, h = bh % P.heads;
  const int k0 = blockIdx.y * kRows;
  const int warp = threadIdx.x >> 5, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);
  const T* do_g = dout + int64_t{b} * P.seq * src.out_stride + int64_t{h} * P.dh;
  if (padding_key_tile(P, b, k0)) return store_zero_dkdv_rows<DP>(dqkv, src, k0, P, b, h);

  int key[2];
  bool real[2];
  load_key_tile<DP>(k_s, v_s, src, mask, P, b, k0, vec_qkv, key, real);
  const T* k_w = k_s + warp * 16 * ld;
  const T* v_w = v_s + warp * 16 * ld;

  float dk[DP / 8][4] = {}, dv[DP / 8][4] = {};
  for (int q0 = 0; q0 < P.seq; q0 += BQ) {
    load_query_tile<BQ, DP>(q_s, do_s, lse_s, rowdot_s, src, do_g, lse, rowdot, P, bh, q0, vec_qkv, vec_dout);
    float dst[NQ][4];
    dkdv_query_tile<DP, NQ, true>(dk, dv, dst, k_w, v_w, q_s, do_s, lse_s, rowdot_s, key, real, P, bh, q0, t);
  }
  store_dkdv_rows<DP>(dk, dv, dqkv, src, key, P, b, h, t);
}

// One 64-key tile of the dQ pass for this warp's 16 queries (q_w, do_w: their Q and dO rows; lse2,
// rd: its lane's two rows' lse in log2 units and D): S = Q K^T, dP = dO V^T, P, dS = P (dP * drop - D),
// dQ += dS K (before the 1/sqrt(Dh)). real_s: the tile's key flags.
template <int DP, class T>
__device__ __forceinline__ void dq_key_tile(float (&dq)[DP / 8][4], const T* q_w, const T* do_w, const T* k_s,
                                            const T* v_s, const uint8_t* real_s, const float (&lse2)[2],
                                            const float (&rd)[2], const int (&query)[2], const Params& P, int bh,
                                            int k0, int t) {
  constexpr int ld = kLd<T, DP>;
  constexpr int NC = kRows / 8;
  float s[NC][4] = {}, dp[NC][4] = {};
  mma_abt<NC, DP>(s, q_w, k_s, ld);
  mma_abt<NC, DP>(dp, do_w, v_s, ld);
  if (!all_keys_real(real_s)) mask_padding_keys(s, real_s, t);  // then P = exp2(-inf) = 0 there, as the forward's
  // P of element (n, 2r + c): query row r of this lane's two, key 8n + 2t + c of the tile.
  const auto probability = [&](int n, int r, int c) {
    return exp2_ftz(s[n][2 * r + c] * P.score_scale - lse2[r]);
  };
  if (P.drop.active()) {
    uint32_t keep[2];
    keep_bits_along_keys<NC>(P, bh, query[0], k0, t, keep);
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int n = 0; n < NC; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float p = probability(n, r, c);
          const float f = (keep[r] >> (2 * n + c)) & 1u ? P.drop_scale : 0.0f;
          s[n][2 * r + c] = p * (dp[n][2 * r + c] * f - rd[r]);  // dS (before the 1/sqrt(Dh) of dQ)
        }
  } else {  // the same with f = 1 (dp * 1 = dp exactly), without a keep bit and a multiply per element
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int n = 0; n < NC; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) s[n][2 * r + c] = probability(n, r, c) * (dp[n][2 * r + c] - rd[r]);
  }
  mma_pb<DP / 8, NC>(dq, s, k_s, ld);
}

// This lane's two query rows of the dQ pass: their indices, lse (log2 units) and D.
template <class T>
__device__ __forceinline__ void dq_rows(const float* lse, const float* rowdot, const Params& P, int bh, int q0,
                                        int (&query)[2], float (&lse2)[2], float (&rd)[2]) {
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    query[r] = q0 + warp * 16 + g + 8 * r;
    const bool in = query[r] < P.seq;
    lse2[r] = in ? lse[int64_t{bh} * P.seq + query[r]] * kLog2e : INFINITY;
    rd[r] = in ? rowdot[int64_t{bh} * P.seq + query[r]] : 0.0f;
  }
}

// The dQ pass's end: dQ (times 1/sqrt(Dh)) of this lane's two queries into dqkv.
template <int DP, class T>
__device__ __forceinline__ void store_dq_rows(const float (&dq)[DP / 8][4], T* __restrict__ dqkv,
                                              const HeadRows<T>& src, const int (&query)[2], const Params& P, int b,
                                              int h, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (query[r] >= P.seq) continue;
    T* dq_row = dqkv + (int64_t{b} * P.seq + query[r]) * src.stride + int64_t{h} * P.dh;
#pragma unroll
    for (int d = 0; d < DP / 8; ++d)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * d + 2 * t + e;
        if (col < P.dh) dq_row[col] = store<T>(dq[d][2 * r + e] * P.grad_scale);
      }
  }
}

// dQ for 64 queries per block, streaming 64 keys at a time.
template <class T, int DP>
__global__ void __launch_bounds__(kThreads, 2)
    dq_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, const float* __restrict__ lse,
              const float* __restrict__ rowdot, const T* __restrict__ dout, T* __restrict__ dqkv, Params P,
              bool vec_qkv, bool vec_dout) {
  constexpr int ld = kLd<T, DP>;
  ATTENTION_SHARED_MEMORY(smem);
  T* q_s = reinterpret_cast<T*>(smem);
  T* do_s = q_s + kRows * ld;
  T* k_s = do_s + kRows * ld;
  T* v_s = k_s + kRows * ld;
  uint8_t* real_s = reinterpret_cast<uint8_t*>(v_s + kRows * ld);

  const int bh = blockIdx.x, b = bh / P.heads, h = bh % P.heads;
  const int q0 = blockIdx.y * kRows;
  const int warp = threadIdx.x >> 5, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);
  const T* do_g = dout + int64_t{b} * P.seq * src.out_stride + int64_t{h} * P.dh;

  start_tile<kRows, DP>(q_s, src.q, src.stride, q0, P.seq, P.dh, vec_qkv);
  start_tile<kRows, DP>(do_s, do_g, src.out_stride, q0, P.seq, P.dh, vec_dout);
  finish_tiles();  // visible to every warp after the K/V loop's first barrier
  const T* q_w = q_s + warp * 16 * ld;
  const T* do_w = do_s + warp * 16 * ld;
  int query[2];
  float lse2[2], rd[2];
  dq_rows<T>(lse, rowdot, P, bh, q0, query, lse2, rd);

  float dq[DP / 8][4] = {};
  const int key_stop = key_tiles_of(P, b) * kRows;
  for (int k0 = 0; k0 < key_stop; k0 += kRows) {
    __syncthreads();  // every warp is done with the previous K/V tile
    start_tile<kRows, DP>(k_s, src.k, src.stride, k0, P.seq, P.dh, vec_qkv);
    start_tile<kRows, DP>(v_s, src.v, src.stride, k0, P.seq, P.dh, vec_qkv);
    if (threadIdx.x < kRows) real_s[threadIdx.x] = key_flag_of_thread(mask, b, P.seq, k0);
    finish_tiles();
    __syncthreads();
    dq_key_tile<DP>(dq, q_w, do_w, k_s, v_s, real_s, lse2, rd, query, P, bh, k0, t);
  }
  store_dq_rows<DP>(dq, dqkv, src, query, P, b, h, t);
}

// ---------------------------------------------------------------------------
// Launch geometry (host)
// ---------------------------------------------------------------------------

// Calls f(std::integral_constant<int, DP>) with the padded head dimension for dh.
template <class F>
void with_padded_dim(int64_t dh, F&& f) {
  if (dh <= 32) f(std::integral_constant<int, 32>{});
  else if (dh <= 64) f(std::integral_constant<int, 64>{});
  else f(std::integral_constant<int, 128>{});
}

// Whether tiles of `base` (a whole qkv or dout tensor) can be loaded 16 bytes at a time.
template <class T>
bool vector_loads(const void* base, int64_t dh) {
  return (reinterpret_cast<uintptr_t>(base) & 15u) == 0 && dh % (16 / static_cast<int64_t>(sizeof(T))) == 0;
}

// Queries per inner tile of dkdv_kernel: fewer live registers next to the dK, dV accumulators at DP = 128.
template <int DP>
constexpr int kDkdvQueryTile = DP > 64 ? 32 : 64;

template <class T, int DP>
constexpr size_t forward_smem_bytes() {
  return 3 * kRows * kLd<T, DP> * sizeof(T) + kRows;
}
template <class T, int DP>
constexpr size_t dkdv_smem_bytes() {
  constexpr int BQ = kDkdvQueryTile<DP>;
  return (2 * kRows + 2 * BQ) * kLd<T, DP> * sizeof(T) + 2 * BQ * sizeof(float);
}
template <class T, int DP>
constexpr size_t dq_smem_bytes() {
  return 4 * kRows * kLd<T, DP> * sizeof(T) + kRows;
}

// Whether the forward's grid runs tiles first (Params::tiles_first): as `order` says, where the heads fit a
// grid's y dimension (65535); beyond, heads first (x holds up to 2^31 - 1).
inline bool tiles_first_applies(const AttentionShape& s, AttentionBlockOrder order) {
  return order == AttentionBlockOrder::TilesFirst && s.batch * s.heads <= 65535;
}

inline Params make_params(const AttentionShape& s, const AttentionDropout& d) {
  TANDEM_CHECK(s.head_dim >= 1 && s.head_dim <= kAttentionMaxHeadDimCuda,
               "attention on CUDA: head_dim {} is outside the fused kernels' range [1, {}]", s.head_dim,
               kAttentionMaxHeadDimCuda);
  TANDEM_CHECK(s.batch * s.heads <= INT_MAX && (s.seq + kRows - 1) / kRows <= 65535,
               "attention on CUDA: batch * heads = {} or seq = {} is too large for one launch", s.batch * s.heads,
               s.seq);
  const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  return Params{static_cast<int>(s.seq),
                static_cast<int>(s.heads),
                static_cast<int>(s.head_dim),
                static_cast<float>(inv_sqrt * 1.4426950408889634),
                1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                attention_dropout_scale<float>(d),
                attention_dropout_threshold(d),
                d};
}

// The grid of `tiles` blocks for each of `heads` heads, in P's block order (block_tile reads it back):
// (heads, tiles), or with P.tiles_first (tiles, heads).
struct Grid {
  unsigned x, y;
};
inline Grid block_grid(const Params& P, int64_t heads, int64_t tiles) {
  const auto h = static_cast<unsigned>(heads), t = static_cast<unsigned>(tiles);
  return P.tiles_first ? Grid{t, h} : Grid{h, t};
}

// 64-row tiles along the sequence: the query tiles of the forward (one row tile per warp) and the dQ pass,
// the key tiles of the dK/dV pass and the fused backward.
inline int64_t row_tiles(const AttentionShape& s) { return (s.seq + kRows - 1) / kRows; }

// Grid of every attention kernel but rowdot, key_end and the ordered fused backward: a block per
// (b * H + h, 64-row tile), the heads on x (the forward's launch lays its own out by block_grid).
inline Grid grid_for(const AttentionShape& s) {
  return {static_cast<unsigned>(s.batch * s.heads), static_cast<unsigned>(row_tiles(s))};
}

}  // namespace tandem::kernels::attention_detail
