// The fused attention backward: dK, dV and dQ from one pass over the S x S
// matrix, five S x S x Dh products instead of the split path's seven, and
// still deterministic (every sum in a fixed order, no atomics). Opt-in:
// TANDEM_ATTENTION_BACKWARD=fused (kernels/cuda/attention_cuda.h); the
// split path of attention_kernels.cuh stays the default until a GPU has run
// this one.
//
// Why: the split path's dq_kernel recomputes S = Q K^T, dP = dO V^T, the
// exponentials, the dropout decisions and dS, all of which dkdv_kernel has
// just computed, only to contract dS over keys instead of queries.
// FlashAttention-2 contracts it in the dK/dV block and atomicAdds dQ, whose
// f32 sums then depend on the order the blocks arrive in. Here the dK/dV
// block writes its key tile's share of dQ instead, and a second kernel adds
// the shares in key-tile order:
//
//   1. rowdot_kernel (attention_kernels.cuh): D_i = dO_i . O_i.
//   2. fused_backward_kernel (grid (b, h) x ceil(S/64) key tiles, 4 warps,
//      BQ-query inner tiles): dkdv_kernel's work through the same helpers
//      (load_key_tile, load_query_tile, dkdv_query_tile, store_dkdv_rows in
//      attention_kernels.cuh), so the same operations in the same order, and
//      dK and dV are the same bits as the split path's:
//      S^T = K Q^T, dP^T = V dO^T, P^T, dS^T, dV += (P^T * drop) dO,
//      dK += dS^T Q. Then the warps put dS^T into shared memory as dS (BQ
//      queries x 64 keys, rounded to T for 16-bit types exactly as dq_kernel
//      rounds its tensor-core operand), and after a barrier compute the query
//      tile's partial dQ = dS K over the block's 64 keys, each warp a 16-row
//      share of it, in column chunks of at most 32 so that few registers are
//      live next to the dK, dV accumulators. The partial goes, f32, to
//      scratch[(b, h), key tile, query, 0..Dh). One barrier more per query
//      tile than dkdv_kernel; the dS stores are bank-conflict free (row
//      stride 64 keys + 16 bytes).
//   3. dq_reduce_kernel: dQ = (1/sqrt(Dh)) * sum over key tiles 0, 1, ... of
//      the partials, one thread per element, in the output dtype into dqkv.
//
// Scratch: 4 * ceil(S/64) * S * Dh bytes per (b, h): ceil(S/64) times an f32
// dQ; at S = 512, Dh = 64, 1 MiB per (b, h). Launches go in chunks of (b, h)
// whose scratch fits kFusedScratchLimit (64 MiB; plan_fused_backward balances
// the chunks, or with TANDEM_ATTENTION_FUSED_CHUNKS=waves sizes them to whole
// rounds of the blocks the device holds at once), so the buffer is bounded
// whatever the batch. A guess to tune
// on a GPU: smaller chunks keep the partials nearer L2-sized (50 MB on H100)
// for the reduction's read, larger ones give more blocks per launch (at S =
// 512, Dh = 64: 64 (b, h), 512 blocks, 1.3 waves at 3 blocks per SM on 132
// SMs). If a single (b, h) needs more than the limit (S * ceil(S/64) * Dh >
// 16 Mi elements, e.g. S >= 4097 at Dh = 64), the split path runs instead.
//
// Ordered dQ (TANDEM_ATTENTION_BACKWARD=fused_ordered, opt-in until a GPU has
// timed it): the second GPU run found fused slower than split in 16 bits
// without dropout, and the partials are a likely reason: at 64 x 512 x 12 x 64
// they are 768 MiB written and read back, the chunks (64 MiB) larger than L2,
// so through HBM (about 0.4 ms at 4 TB/s, a fifth of the whole backward). The
// ordered kernel writes no partials: the grid puts a head's key tiles side by
// side (key tile = blockIdx.x), each head has one f32 dQ accumulator (128 KiB
// at S = 512, Dh = 64; the heads running at once fit L2 many times over) and a
// turn flag per query tile; key tile kt adds its share to the accumulator
// once key tile kt - 1 has (ld.acquire / st.release on the flag, two barriers
// more per query tile), and the last key tile rounds dQ into dqkv. The same
// additions in the same order as dq_reduce_kernel: the same bits (emulated
// tests on every case; GPU test AttentionFusedOrdered.*). Scratch per (b, h):
// 4 S Dh bytes and 4 ceil(S/16) bytes of flags, zeroed per launch.
// TANDEM_ATTENTION_BACKWARD=fused_ordered_pipelined (16 bits) also double-buffers
// the query tiles by cp.async (Pipelined, below): two blocks per SM with 64-query
// tiles at DP <= 64 (three spill), 229-247 registers, 55-66 KB of shared memory;
// the same bits again (emulated with warps skewed either way).
//
// Memory traffic per (b, h), against the split path: the dQ pass's reads go
// (Q and dO once, K and V ceil(S/64) times: (2 + 2 ceil(S/64)) S Dh elements,
// mostly L2 hits), and 8 ceil(S/64) S Dh bytes of f32 partials come in
// (written once, read once), about S^2 Dh / 8 bytes. FLOPs go from 14 S^2 Dh
// to 10 S^2 Dh (plus ceil(S/64) S Dh adds); also gone: the dQ pass's S^2
// exponentials, its S^2 / 8 Philox blocks (S^2 / 16 under philox7x16), and its dS arithmetic. Saved
// tensor-core FLOPs per added byte are 32 whatever S and Dh, well below an
// H100's balance (about 300 dense bf16 FLOP per HBM byte), so in 16 bits the
// gain depends on the partials being written while the kernel computes and
// read back from L2, and on the saved exponentials (MUFU, as costly as the
// Dh = 64 products per element); for f32 (scalar FMAs, about 15x fewer FLOP/s)
// the saved products should dominate. Unmeasured: bench/attention_bench.cc
// --backward fused|split times both.
//
// Numerics: dK and dV are bit-identical to the split path (same operations in
// the same order). dS is too (S^T's dot products are S's, fmaf(k, q, c) =
// fmaf(q, k, c)), and within one key tile the dQ partial sums the keys in
// dq_kernel's order; what differs is that the split path carries one f32
// accumulator across key tiles while this path starts each tile at zero and
// adds the tiles' sums: dQ agrees to f32 rounding (bit-identical for S <= 64),
// and after the one rounding to T to that plus one unit in T's last place.
//
// Resources (nvcc 13.0.88, -O3 -arch=sm_90 -Xptxas -v; __launch_bounds__(128,
// kFusedBlocksPerSm): 3 blocks cap registers at 168, 2 at 255): registers per
// thread, spill stores/loads in bytes (none unless noted), dynamic shared
// memory per 128-thread block, BQ the query tile (kFusedQueryTile), which
// differs between f32 and 16 bits at DP <= 64:
//
//   kernel      DP   BQ f32/16-bit  f32 regs           f16/bf16 regs     f32 smem   f16/bf16 smem
//   fused       32   64 / 16        242                168 (3 blocks)      54,784          15,232
//   fused       64   64 / 32        255                168 (3 blocks)      87,552          32,512
//   fused      128   16 / 16        255 (spill 40/40)  252                 88,960          45,952
//   dq_reduce    -    -             32                 32                       0               0
//
// The ordered kernels: f32 238-255 (DP = 128: spill 62/68), 16 bits 168 (3 blocks) at DP <= 64
// and 255 at 128, pipelined 231-255; no other spills. (The saved keep bits' read path, 2026-11-28,
// took the f32 DP = 128 spills from 44/44 to 40/40, ordered from 22/20 to 62/68; elsewhere up to
// 5 registers fewer, one more at 16-bit DP = 128 ordered. Measured again after the
// whole-tile copy path, the dK/dV step's unpredicated exponential and the peeled first k-step of 2026-11-27's late evening:
// at f32 DP = 128 the plain kernel's spill went from 24 to 44 bytes each way and the ordered one's from
// 44/36 to 22/20.) The tiles' cp.async loads
// (load_tile_async) took the f32 DP = 128 spills from 56/64 (ordered 56/60) to 24/24 (32/32;
// exp2_ftz then moved the ordered one to 44/36); the trimmed key tiles' early exit and chain end,
// with 16-byte loads through registers, had cost the 16-bit kernels at DP = 64 4-6 bytes of spill,
// gone with them.
//
// Before kFusedBlocksPerSm, 16 bits at DP <= 64 ran BQ = 64 at 233-255
// registers, two blocks per SM. Three blocks at BQ = 64 spill, and so does
// BQ = 32 at DP = 32 (24 bytes). At DP = 128, BQ = 32 (dkdv_kernel's) spills
// 40/56 bytes in 16 bits and 100/120 in f32; 16 removes the 16-bit spills
// (dK and dV do not depend on BQ). In f32 the dK/dV part alone spills 24/32
// bytes here (dkdv_kernel: 24/24 with this nvcc), the dQ step the rest.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cuda/attention_forward_pipelined.cuh"  // load_query_tile_pipelined
#include "kernels/cuda/attention_kernels.cuh"

namespace tandem::kernels::attention_detail {

// C[16 x 8NT] += A[16 x K] . B[K x 8NT], A's rows (stride lda) and B's rows (stride ldb) in shared memory.
// The f32 path sums k in order 0, 1, ..., as mma_pb does for a register A. In 16 bits the fragments come
// by ldmatrix, as mma_abt_ldmatrix reads A (.x4: rows 0-7 | 8-15 x columns k.. | k+8..) and mma_pb reads
// a k-major B (.x2.trans: keys k..k+7 | k+8..k+15 of 8 columns): one instruction each where the scalar
// loads took four 32-bit loads for A and four 16-bit loads and two packs per B fragment; the same
// fragments, so the same bits. The rows are 16-byte aligned: dS's stride is 64 keys + 16 bytes, K's
// DP + 8 elements, and the column offsets are multiples of 8 elements.
template <int NT, int K, class T>
__device__ __forceinline__ void mma_ab(float (&c)[NT][4], const T* a, int lda, const T* b, int ldb) {
  if constexpr (std::is_same_v<T, float>) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll 2
    for (int k = 0; k < K; ++k) {
      const float a0 = a[g * lda + k], a1 = a[(g + 8) * lda + k];
      const float* brow = b + k * ldb + 2 * t;
#pragma unroll
      for (int n = 0; n < NT; ++n) fma_2x2(c[n], a0, a1, brow[8 * n], brow[8 * n + 1]);
    }
  } else {
    const int lane = threadIdx.x & 31;
    const T* a_row = a + ((lane & 7) + 8 * ((lane >> 3) & 1)) * lda + 8 * (lane >> 4);
    const T* b_row = b + (lane & 15) * ldb;
#pragma unroll 1
    for (int k = 0; k < K; k += 16) {
      uint32_t af[4];
      ldmatrix_x4(af, a_row + k);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        uint32_t bf[2];
        ldmatrix_x2_trans(bf, b_row + k * ldb + 8 * n);
        mma16816<T>(c[n], af, bf);
      }
    }
  }
}

// v rounded to T as pack2 rounds a tensor-core operand (the hardware conversion, not store<T>'s bit arithmetic).
template <class T>
__device__ __forceinline__ T round_to(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, Half>) return T{__half_as_ushort(__float2half_rn(v))};
  else return T{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}

// Row stride of the dS tile in shared memory: 64 keys plus 16 bytes, so that
// the stores from the transposed register tile and the A-fragment loads both
// fall in distinct banks.
template <class T>
constexpr int kDsLd = kRows + 16 / static_cast<int>(sizeof(T));

// Blocks per SM the kernel is compiled for (the second __launch_bounds__ argument: at most
// 65536 / (128 * blocks) registers). The first GPU run had it at 255 registers, two blocks per SM
// (8 warps: at S = 512, Dh = 64, B*H = 64, two waves over 132 SMs). In 16 bits at DP <= 64, three
// blocks fit 168 registers with no spills once the query tile below shrinks (nvcc 13.0: 32 at
// DP = 64, 16 at DP = 32; 32 at DP = 32 spills 24 bytes); f32 and DP = 128 stay at two. The
// double-buffered kernel (Pipelined) at three blocks spills 64-76 bytes at DP = 64 (its prefetch's
// addresses on top of the 168 registers), so it runs two, with 64-query tiles, at every DP <= 64.
template <class T, int DP, bool Pipelined = false>
constexpr int kFusedBlocksPerSm = sizeof(T) == 2 && DP <= 64 && !Pipelined ? 3 : 2;

// Queries per inner tile: fewer live registers next to the dK, dV accumulators, which do not depend on
// it (both paths add the queries' terms in the same order, 16 per tensor-core step). At DP = 128, 16
// (not dkdv_kernel's 32) frees the registers the dQ step needs (no spills in 16 bits); at DP <= 64, 64
// for two blocks per SM and 32 (DP = 64) or 16 (DP = 32) for three.
template <class T, int DP, bool Pipelined = false>
constexpr int kFusedQueryTile = DP > 64                                     ? 16
                                : kFusedBlocksPerSm<T, DP, Pipelined> == 2 ? 64
                                : DP == 64                                  ? 32
                                                                            : 16;

// The ordered dQ accumulation (Ordered, TANDEM_ATTENTION_BACKWARD=fused_ordered): one thread waits
// for the block's turn and a barrier releases the others; at the end of the turn a barrier, then one
// thread passes it on (CUTLASS's semaphore: the barrier orders the block's accumulator stores before
// the release). turn_wait_acquire / turn_release are the includer's (attention.cu: ld.acquire.gpu in a
// spin and st.release.gpu; the emulator: checks), as are load_l2 / store_l2 for the accumulator
// (ld/st.global.cg) and, through attention_forward_pipelined.cuh, the cp.async functions.
__device__ __forceinline__ void wait_for_turn(const int* flag, int turn) {
  if (threadIdx.x == 0) turn_wait_acquire(flag, turn);
  __syncthreads();
}

__device__ __forceinline__ void pass_turn(int* flag, int next) {
  __syncthreads();
  if (threadIdx.x == 0) turn_release(flag, next);
}

// Turn flags per head of the ordered accumulation: one per query tile, for the smallest tile (16).
__host__ __device__ inline int fused_turns_per_head(int64_t seq) { return static_cast<int>((seq + 15) / 16); }

// dK and dV for 64 keys per block, streaming BQ queries at a time (dkdv_kernel's steps), plus this key tile's
// share of dQ for every query, unscaled, into dq_scratch[(head in the launch, key tile, query, 0..Dh)] (f32).
// Block (x, y) is head bh0 + x, key tile y.
//
// Ordered: block (x, y) is key tile x of head bh0 + y (a head's key tiles next to each other in the grid,
// so its accumulator stays in L2 while they run), and dq_scratch holds one f32 dQ per head,
// [y, query, 0..Dh), which the key tiles add their shares to in key-tile order, query tile by query
// tile: key tile 0 writes 0 + its share, tile kt waits until turns[y][query tile] says kt, adds its
// share to what is there and passes the turn to kt + 1, and the last key tile writes
// 1/sqrt(Dh) * (sum + share) rounded to T straight into dqkv. dq_reduce_kernel's additions in its
// order, so the same bits as the unordered path, with no partials to write and read back and no
// second kernel. A block only waits for the block one key tile before it in the same head, which has
// a lower linear index and so was started first (as FlashAttention's deterministic backward assumes):
// no block waits for one that cannot run.
//
// Pipelined (16 bits; TANDEM_ATTENTION_BACKWARD=fused_ordered_pipelined, with Ordered): the query tiles
// are double-buffered as dkdv_pipelined_kernel does them. Tile i + 1's Q and dO stream in by cp.async
// (and its lse and D by plain loads) into the other buffers while tile i is computed; one barrier at
// the top of each tile (this thread's copies have landed, everyone's have after it, and every warp is
// done with tile i - 1: its buffers and its dS) replaces load_query_tile's two. The same operations on
// the same values: the same bits.
template <class T, int DP, int BQ, bool Ordered = false, bool Pipelined = false>
__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm<T, DP, Pipelined>)
    fused_backward_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, const float* __restrict__ lse,
                          const float* __restrict__ rowdot, const T* __restrict__ dout, T* __restrict__ dqkv,
                          float* __restrict__ dq_scratch, int* __restrict__ turns, int bh0, Params P, bool vec_qkv,
                          bool vec_dout) {
  constexpr int ld = kLd<T, DP>, lds = kDsLd<T>;
  constexpr int NQ = BQ / 8;
  // A warp's share of the BQ x DP partial dQ: 16 query rows x kCols columns, kChunk 8-column blocks at a time.
  constexpr int kRowGroups = BQ / 16, kCols = DP * kRowGroups / kWarps, kChunk = kCols < 32 ? kCols / 8 : 4;
  static_assert(kWarps % kRowGroups == 0 && kCols % (8 * kChunk) == 0, "the warps must tile the dQ tile");
  static_assert(!Pipelined || sizeof(T) == 2, "cp.async of 8 elements: 16-bit data (f32 runs unpipelined)");
  constexpr int kBuffers = Pipelined ? 2 : 1;  // of Q, dO, lse and D: buffer buf at + buf * (BQ rows)
  ATTENTION_SHARED_MEMORY(smem);
  T* k_s = reinterpret_cast<T*>(smem);
  T* v_s = k_s + kRows * ld;
  T* q_s = v_s + kRows * ld;
  T* do_s = q_s + kBuffers * BQ * ld;
  T* ds_s = do_s + kBuffers * BQ * ld;                       // dS: BQ queries x 64 keys
  float* lse_s = reinterpret_cast<float*>(ds_s + BQ * lds);  // log2 units
  float* rowdot_s = lse_s + kBuffers * BQ;

  const int local = static_cast<int>(Ordered ? blockIdx.y : blockIdx.x);
  const int key_tile = static_cast<int>(Ordered ? blockIdx.x : blockIdx.y);
  const int bh = bh0 + local, b = bh / P.heads, h = bh % P.heads;
  const int k0 = key_tile * kRows;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);
  const T* do_g = dout + int64_t{b} * P.seq * src.out_stride + int64_t{h} * P.dh;
  const int key_tiles = (P.seq + kRows - 1) / kRows;
  float* dq_g = dq_scratch + (Ordered ? int64_t{local} : int64_t{local} * key_tiles + key_tile) * P.seq * P.dh;
  // Trimmed key tiles: the tiles from key_tiles_of(P, b) on hold padding only. Their blocks write zero dK and
  // dV and leave, with no dQ share: dq_reduce_kernel stops before them, and ordered, the last tile that can
  // hold a real key ends the chain. Ordered, key tile 0 always runs, so that a row with no real key still
  // gets its dQ (0) written by the chain's end (a special case for that would cost the kernel spills).
  const int tiles_of_row = key_tiles_of(P, b), real_tiles = Ordered && tiles_of_row == 0 ? 1 : tiles_of_row;
  if (key_tile >= real_tiles) return store_zero_dkdv_rows<DP>(dqkv, src, k0, P, b, h);
  const bool last_key_tile = key_tile == real_tiles - 1;

  int key[2];
  bool real[2];
  load_key_tile<DP>(k_s, v_s, src, mask, P, b, k0, vec_qkv, key, real);
  const T* k_w = k_s + warp * 16 * ld;
  const T* v_w = v_s + warp * 16 * ld;
  const int dq_row = (warp % kRowGroups) * 16, dq_col = (warp / kRowGroups) * kCols;

  float dk[DP / 8][4] = {}, dv[DP / 8][4] = {};
  const auto load_queries = [&](auto q0, int buf) {  // generic: instantiated only where Pipelined calls it
    load_query_tile_pipelined<BQ, DP>(q_s + buf * BQ * ld, do_s + buf * BQ * ld, lse_s + buf * BQ,
                                      rowdot_s + buf * BQ, src, do_g, lse, rowdot, P, bh, q0, vec_qkv, vec_dout);
  };
  if constexpr (Pipelined) load_queries(0, 0);
  for (int q0 = 0, buf = 0; q0 < P.seq; q0 += BQ, buf ^= Pipelined ? 1 : 0) {
    if constexpr (Pipelined) {
      cp_async_wait_group<0>();  // this thread's copies of this tile (the only group in flight) have landed
      __syncthreads();           // everyone's have, and every warp is done with the previous tile and its dS
      if (q0 + BQ < P.seq) load_queries(q0 + BQ, buf ^ 1);
    } else {
      // The first barrier in it also waits until every warp is done with the previous tile's dS.
      load_query_tile<BQ, DP>(q_s, do_s, lse_s, rowdot_s, src, do_g, lse, rowdot, P, bh, q0, vec_qkv, vec_dout);
    }
    float dst[NQ][4];
    dkdv_query_tile<DP, NQ, false>(dk, dv, dst, k_w, v_w, q_s + buf * BQ * ld, do_s + buf * BQ * ld,
                                   lse_s + buf * BQ, rowdot_s + buf * BQ, key, real, P, bh, q0, t);
    // dS^T into shared memory as dS (rows queries), after the products: fewer registers live across them.
#pragma unroll
    for (int n = 0; n < NQ; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ds_s[(8 * n + 2 * t + (e & 1)) * lds + warp * 16 + g + 8 * (e >> 1)] = round_to<T>(dst[n][e]);
    __syncthreads();  // dS is complete: all 64 keys

    if constexpr (Ordered) wait_for_turn(turns + int64_t{local} * fused_turns_per_head(P.seq) + q0 / BQ, key_tile);
    // dQ[q0 + dq_row .. + 16, dq_col .. + kCols] over this block's keys; warp-uniform skips of padding.
    if (q0 + dq_row < P.seq) {
#pragma unroll 1
      for (int c0 = dq_col; c0 < dq_col + kCols && c0 < P.dh; c0 += 8 * kChunk) {
        float dq[kChunk][4] = {};
        mma_ab<kChunk, kRows>(dq, ds_s + dq_row * lds, lds, k_s + c0, ld);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = q0 + dq_row + g + 8 * r;
          if (i >= P.seq) continue;
#pragma unroll
          for (int n = 0; n < kChunk; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int col = c0 + 8 * n + 2 * t + e;
              if (col >= P.dh) continue;
              float* at = dq_g + int64_t{i} * P.dh + col;
              if constexpr (!Ordered) {
                *at = dq[n][2 * r + e];
              } else {
                const float sum = (key_tile == 0 ? 0.0f : load_l2(at)) + dq[n][2 * r + e];  // dq_reduce's order
                if (!last_key_tile) store_l2(at, sum);
                else dqkv[(int64_t{b} * P.seq + i) * src.stride + int64_t{h} * P.dh + col] = store<T>(sum * P.grad_scale);
              }
            }
        }
      }
    }
    if constexpr (Ordered) pass_turn(turns + int64_t{local} * fused_turns_per_head(P.seq) + q0 / BQ, key_tile + 1);
  }
  store_dkdv_rows<DP>(dk, dv, dqkv, src, key, P, b, h, t);
}

// dQ of heads [bh0, bh0 + count / (S * Dh)): one thread per element (local head, query, column), summing
// the key tiles' partials in tile order, then scaling by 1/sqrt(Dh) and rounding once, into dqkv. count is
// at most a launch's scratch in floats (kFusedScratchLimit / 4), so 32-bit index arithmetic suffices.
template <class T>
__global__ void dq_reduce_kernel(const float* __restrict__ dq_partial, T* __restrict__ dqkv, int bh0, int count,
                                 Params P) {
  const int idx = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (idx >= count) return;
  const int key_tiles = (P.seq + kRows - 1) / kRows, tile_stride = P.seq * P.dh;
  const int d = idx % P.dh, row = idx / P.dh, i = row % P.seq, local = row / P.seq;
  const float* src = dq_partial + (local * key_tiles * tile_stride + i * P.dh + d);
  const int64_t bh = bh0 + local, b = bh / P.heads, h = bh % P.heads;
  const int real_tiles = key_tiles_of(P, static_cast<int>(b));  // trimmed: padding tiles wrote no share
  float acc = 0.0f;
  for (int kt = 0; kt < real_tiles; ++kt) acc += src[kt * tile_stride];
  dqkv[(b * P.seq + i) * (int64_t{3} * P.heads * P.dh) + h * P.dh + d] = store<T>(acc * P.grad_scale);
}

// ---------------------------------------------------------------------------
// Launch plan (host)
// ---------------------------------------------------------------------------

// The most scratch one launch of the fused backward may use (see the header).
constexpr size_t kFusedScratchLimit = size_t{64} << 20;
static_assert(kFusedScratchLimit / sizeof(float) <= INT_MAX, "dq_reduce_kernel indexes a launch's partials with int");

// (b, h) pairs per fused launch, and the scratch that takes. heads_per_launch = 0: even one (b, h)
// would need more than the limit, and the split path runs.
struct FusedBackwardPlan {
  int64_t heads_per_launch = 0;
  size_t scratch_bytes = 0;
};

// Bytes of scratch for one (b, h): its key tiles' f32 dQ partials, or with `ordered` one f32 dQ
// accumulator and its turn flags.
inline size_t fused_scratch_bytes_per_head(const AttentionShape& s, bool ordered = false) {
  if (ordered) return sizeof(float) * static_cast<size_t>(s.seq * s.head_dim) + sizeof(int) * fused_turns_per_head(s.seq);
  const int64_t key_tiles = (s.seq + kRows - 1) / kRows;
  return sizeof(float) * static_cast<size_t>(key_tiles * s.seq * s.head_dim);
}

// Rounds of `resident` blocks (as many as fit the device at once) that a launch of `blocks` blocks takes.
inline int64_t block_rounds(int64_t blocks, int64_t resident) { return (blocks + resident - 1) / resident; }

// Splits the B * H heads into the fewest launches within `limit` (and, ordered, 65535 heads), as even as
// possible (the last may be smaller). With `resident_blocks` (TANDEM_ATTENTION_FUSED_CHUNKS=waves: the
// fused kernel's blocks that fit the device at once, SMs x blocks per SM), the chunk that takes the
// fewest rounds of resident blocks over all its launches, then the fewest launches: a launch's last
// round, part-filled, leaves SMs idle, since the next launch starts only after it and its reduction.
// At 64 x 512 x 12 x 64 on 132 SMs at 3 blocks each, the even split is 12 launches of 64 heads, 512
// blocks (1.29 waves) in 2 rounds each: 24 rounds; 49 heads fill one round (392 of 396 blocks): 16
// launches, 16 rounds. The candidates are the chunks of whole rounds nearest the limit (the others
// only add launches), the largest chunk and the even split, which stays where none does better.
inline FusedBackwardPlan plan_fused_backward(const AttentionShape& s, size_t limit = kFusedScratchLimit,
                                             bool ordered = false, int64_t resident_blocks = 0) {
  const int64_t heads = s.batch * s.heads;
  const size_t per_head = fused_scratch_bytes_per_head(s, ordered);
  if (heads == 0 || per_head == 0 || per_head > limit) return {};
  // The ordered kernel's heads are its grid's y dimension: at most 65535 per launch.
  const int64_t most = std::min<int64_t>({heads, static_cast<int64_t>(limit / per_head), ordered ? 65535 : heads});
  const int64_t launches = (heads + most - 1) / most;
  int64_t per_launch = (heads + launches - 1) / launches;
  if (resident_blocks > 0) {
    const int64_t tiles = row_tiles(s);
    const auto cost = [&](int64_t n) {  // (rounds, launches) of chunks of n heads
      const int64_t full = heads / n, rest = heads % n;
      return std::pair{full * block_rounds(n * tiles, resident_blocks) +
                           (rest > 0 ? block_rounds(rest * tiles, resident_blocks) : 0),
                       full + (rest > 0 ? 1 : 0)};
    };
    auto best = cost(per_launch);
    const auto consider = [&](int64_t n) {
      if (n >= 1 && n <= most && cost(n) < best) best = cost(n), per_launch = n;
    };
    consider(most);
    const int64_t whole = most * tiles / resident_blocks;  // whole rounds in the largest chunk
    for (int64_t k = whole; k >= 1 && k > whole - 8; --k) consider(k * resident_blocks / tiles);
  }
  return {per_launch, static_cast<size_t>(per_launch) * per_head};
}

// K, V, Q and dO (two of each of the last two when pipelined), dS, lse and D (likewise).
template <class T, int DP, bool Pipelined = false>
constexpr size_t fused_backward_smem_bytes() {
  constexpr int BQ = kFusedQueryTile<T, DP, Pipelined>, buffers = Pipelined ? 2 : 1;
  return (2 * kRows + 2 * buffers * BQ) * kLd<T, DP> * sizeof(T) + BQ * kDsLd<T> * sizeof(T) +
         2 * buffers * BQ * sizeof(float);
}

// Calls f(kernel, shared-memory bytes) with the ordered fused kernel: its double-buffered form with
// `pipelined` (16 bits only). attention.cu's launches and the emulated tests' share it.
template <class T, int DP, class F>
void with_ordered_fused_kernel(bool pipelined, F&& f) {
  if constexpr (sizeof(T) == 2) {
    if (pipelined) {
      f(fused_backward_kernel<T, DP, kFusedQueryTile<T, DP, true>, true, true>,
        fused_backward_smem_bytes<T, DP, true>());
      return;
    }
  }
  f(fused_backward_kernel<T, DP, kFusedQueryTile<T, DP>, true>, fused_backward_smem_bytes<T, DP>());
}

}  // namespace tandem::kernels::attention_detail
