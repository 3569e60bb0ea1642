// The pipelined split backward for 16-bit inputs (f16, bf16), which
// TANDEM_ATTENTION_BACKWARD=split_pipelined runs in place of the split path's
// two passes: dkdv_pipelined_kernel has dkdv_kernel's algorithm (attention.cu
// describes it: a block owns 64 keys, keeps K, V in shared memory and dK, dV in
// registers, and streams query tiles of Q, dO, lse and D) with the query tiles
// double-buffered; dq_pipelined_kernel has dq_kernel's (a block owns 64
// queries and streams 64-key tiles of K, V) with the K/V tiles double-buffered,
// as forward_pipelined_kernel does.
//
// Pipelining, as forward_pipelined_kernel does for its K/V tiles: Q and dO of
// query tile i + 1 are copied global to shared by cp.async (16 bytes per
// instruction, no register round trip) while tile i is computed from the other
// buffer. One __syncthreads per tile instead of dkdv_kernel's two: before it
// each thread waits for its own copies of tile i (cp.async.wait_group 0), after
// it everyone's have landed and every warp is done with tile i - 1, whose
// buffer tile i + 1's copies and its lse and D (plain loads, they need scaling
// and padding) then overwrite. Rows past S are zero-filled by cp.async's
// src-size operand and get lse = +inf, D = 0 (P = 0), as in dkdv_kernel. Where
// 16-byte copies are impossible (Dh not a multiple of 8, or an unaligned base)
// start_tile's plain loads fill the same buffers: same results, less overlap.
//
// Memory traffic: the plain kernels' (dK/dV: K, V once, Q, dO, lse, D once per
// key block; dQ: Q, dO once, K, V once per query block).
// Shared memory: dK/dV: K, V and two buffers of Q and dO, (128 + 4 BQ) x (DP +
// 8) elements plus 4 BQ floats, 1.5x dkdv_kernel's at BQ = 64 (55 KB at DP =
// 64); dQ: Q, dO and two buffers of K and V, 1.5x dq_kernel's (102 KB at DP =
// 128); still two blocks per SM.
// Numerics: the plain kernels', operation for operation (the same
// dkdv_query_tile and dq_key_tile on the same values, the same stores), so the
// two paths agree bit for bit (under the warp emulator, and on a GPU:
// AttentionSplitPipelined.*).
//
// Besides attention_kernels.cuh's requirements, the includer supplies
// cp_async_16, cp_async_commit_group() and cp_async_wait_group<N>()
// (attention_forward_pipelined.cuh says where), and includes that header first
// (load_kv_pipelined, load_query_tile_pipelined).
#pragma once

#include "kernels/cuda/attention_forward_pipelined.cuh"
#include "kernels/cuda/attention_kernels.cuh"

namespace tandem::kernels::attention_detail {

// Blocks per SM both passes are compiled for, and the dK/dV pass's query tile. By default two, at
// 190-242 registers (nvcc 13.0), with dkdv_kernel's tile. High (TANDEM_ATTENTION_OCCUPANCY=high) at
// DP = 32: three, 168 registers, no spills, with 32-query tiles (64 spill 32-236 bytes there; at
// DP = 64 three spill). dK and dV do not depend on the tile (the queries' terms are added in the same
// order, 16 per tensor-core step, whatever the tile), nor does dQ (the dQ pass has none): the same bits.
template <int DP>
constexpr bool kSplitPipelinedHasHighOccupancy = DP <= 32;
template <int DP, bool High>
constexpr int kSplitPipelinedBlocksPerSm = High && kSplitPipelinedHasHighOccupancy<DP> ? 3 : 2;
template <int DP, bool High>
constexpr int kDkdvPipelinedQueryTile = High && kSplitPipelinedHasHighOccupancy<DP> ? 32 : kDkdvQueryTile<DP>;

template <class T, int DP, int BQ, int Blocks = 2>
__global__ void __launch_bounds__(kThreads, Blocks)
    dkdv_pipelined_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, const float* __restrict__ lse,
                          const float* __restrict__ rowdot, const T* __restrict__ dout, T* __restrict__ dqkv,
                          Params P, bool vec_qkv, bool vec_dout) {
  static_assert(sizeof(T) == 2, "f16/bf16 only: cp.async of 8 elements (f32 runs dkdv_kernel)");
  constexpr int ld = kLd<T, DP>;
  constexpr int NQ = BQ / 8;
  constexpr int kQueryTile = BQ * ld;  // elements of one Q or dO buffer
  ATTENTION_SHARED_MEMORY(smem);
  T* k_s = reinterpret_cast<T*>(smem);
  T* v_s = k_s + kRows * ld;
  T* q_s = v_s + kRows * ld;           // buffers 0 and 1: q_s + buf * kQueryTile
  T* do_s = q_s + 2 * kQueryTile;      // likewise
  float* lse_s = reinterpret_cast<float*>(do_s + 2 * kQueryTile);  // 2 x BQ, log2 units
  float* rowdot_s = lse_s + 2 * BQ;                                  // 2 x BQ

  const int bh = blockIdx.x, b = bh / P.heads, h = bh % P.heads;
  const int k0 = blockIdx.y * kRows;
  const int warp = threadIdx.x >> 5, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);
  const T* do_g = dout + int64_t{b} * P.seq * src.out_stride + int64_t{h} * P.dh;

  // Query tile q0 into buffer buf: its Q and dO copies as one cp.async group, its lse and D stored.
  const auto load_queries = [&](int q0, int buf) {
    load_query_tile_pipelined<BQ, DP>(q_s + buf * kQueryTile, do_s + buf * kQueryTile, lse_s + buf * BQ,
                                      rowdot_s + buf * BQ, src, do_g, lse, rowdot, P, bh, q0, vec_qkv, vec_dout);
  };

  if (padding_key_tile(P, b, k0)) return store_zero_dkdv_rows<DP>(dqkv, src, k0, P, b, h);

  int key[2];
  bool real[2];
  load_key_tile<DP>(k_s, v_s, src, mask, P, b, k0, vec_qkv, key, real);  // visible after the first barrier
  load_queries(0, 0);
  const T* k_w = k_s + warp * 16 * ld;
  const T* v_w = v_s + warp * 16 * ld;

  float dk[DP / 8][4] = {}, dv[DP / 8][4] = {};
  const int tiles = (P.seq + BQ - 1) / BQ;
  for (int i = 0; i < tiles; ++i) {
    const int buf = i & 1;
    cp_async_wait_group<0>();  // this thread's copies of tile i (the only group in flight) have landed
    __syncthreads();           // everyone's have, and every warp is done with tile i - 1's buffer
    if (i + 1 < tiles) load_queries((i + 1) * BQ, buf ^ 1);
    float dst[NQ][4];
    dkdv_query_tile<DP, NQ, true>(dk, dv, dst, k_w, v_w, q_s + buf * kQueryTile, do_s + buf * kQueryTile,
                                  lse_s + buf * BQ, rowdot_s + buf * BQ, key, real, P, bh, i * BQ, t);
  }
  store_dkdv_rows<DP>(dk, dv, dqkv, src, key, P, b, h, t);
}

// dQ as dq_kernel (the same dq_key_tile on the same values: the same bits), with the 64-key K/V
// tiles double-buffered by cp.async exactly as forward_pipelined_kernel does it: tile j + 1's K and
// V stream into the other buffer while tile j is computed, one __syncthreads per tile, and tile
// j + 1's key flags are read into a register after the barrier and stored once tile j is done.
template <class T, int DP, int Blocks = 2>
__global__ void __launch_bounds__(kThreads, Blocks)
    dq_pipelined_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, const float* __restrict__ lse,
                        const float* __restrict__ rowdot, const T* __restrict__ dout, T* __restrict__ dqkv, Params P,
                        bool vec_qkv, bool vec_dout) {
  static_assert(sizeof(T) == 2, "f16/bf16 only: cp.async of 8 elements (f32 runs dq_kernel)");
  constexpr int ld = kLd<T, DP>;
  constexpr int kTile = kRows * ld;  // elements of one 64-row tile
  ATTENTION_SHARED_MEMORY(smem);
  T* q_s = reinterpret_cast<T*>(smem);
  T* do_s = q_s + kTile;
  T* k_s = do_s + kTile;  // buffers 0 and 1: k_s + buf * kTile
  T* v_s = k_s + 2 * kTile;
  uint8_t* real_s = reinterpret_cast<uint8_t*>(v_s + 2 * kTile);  // 2 x kRows key flags

  const int bh = blockIdx.x, b = bh / P.heads, h = bh % P.heads;
  const int q0 = blockIdx.y * kRows;
  const int warp = threadIdx.x >> 5, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);
  const T* do_g = dout + int64_t{b} * P.seq * src.out_stride + int64_t{h} * P.dh;

  const auto load_kv = [&](int k0, int buf) {
    load_kv_pipelined<DP>(k_s + buf * kTile, v_s + buf * kTile, src, k0, P, vec_qkv);
  };
  const int tiles = key_tiles_of(P, b);
  if (tiles > 0) {  // none: a row with no real key (trimmed), whose dQ is 0 without reading anything
    start_tile<kRows, DP>(q_s, src.q, src.stride, q0, P.seq, P.dh, vec_qkv);
    start_tile<kRows, DP>(do_s, do_g, src.out_stride, q0, P.seq, P.dh, vec_dout);
    load_kv(0, 0);  // Q and dO join the first K/V tile's group
    if (threadIdx.x < kRows) real_s[threadIdx.x] = key_flag_of_thread(mask, b, P.seq, 0);
  }
  const T* q_w = q_s + warp * 16 * ld;
  const T* do_w = do_s + warp * 16 * ld;
  int query[2];
  float lse2[2], rd[2];
  dq_rows<T>(lse, rowdot, P, bh, q0, query, lse2, rd);

  float dq[DP / 8][4] = {};
  for (int j = 0; j < tiles; ++j) {
    const int buf = j & 1;
    cp_async_wait_group<0>();  // this thread's copies of tile j (the only group in flight) have landed
    __syncthreads();           // everyone's have, and every warp is done with tile j - 1's buffer
    const bool more = j + 1 < tiles;
    uint8_t next_flag = 0;
    if (more) {
      load_kv((j + 1) * kRows, buf ^ 1);
      next_flag = key_flag_of_thread(mask, b, P.seq, (j + 1) * kRows);
    }
    dq_key_tile<DP>(dq, q_w, do_w, k_s + buf * kTile, v_s + buf * kTile, real_s + buf * kRows, lse2, rd, query, P,
                    bh, j * kRows, t);
    if (more && threadIdx.x < kRows) real_s[(buf ^ 1) * kRows + threadIdx.x] = next_flag;
  }
  store_dq_rows<DP>(dq, dqkv, src, query, P, b, h, t);
}

// Q, dO, two K and two V tiles, two tiles' key flags.
template <class T, int DP>
constexpr size_t dq_pipelined_smem_bytes() {
  return dq_smem_bytes<T, DP>() + 2 * kRows * kLd<T, DP> * sizeof(T) + kRows;  // dq_kernel's, plus a second K, V, flags
}

// K, V, two buffers of Q and dO (BQ queries each), two tiles' lse and D.
template <class T, int DP, int BQ>
constexpr size_t dkdv_pipelined_smem_bytes() {
  return (2 * kRows + 4 * BQ) * kLd<T, DP> * sizeof(T) + 4 * BQ * sizeof(float);
}

// The pipelined passes for `High` (above): f(kernel, shared-memory bytes), dK/dV then dQ.
template <class T, int DP, bool High, class F>
void with_pipelined_split_passes(F&& f) {
  constexpr int blocks = kSplitPipelinedBlocksPerSm<DP, High>, BQ = kDkdvPipelinedQueryTile<DP, High>;
  f(dkdv_pipelined_kernel<T, DP, BQ, blocks>, dkdv_pipelined_smem_bytes<T, DP, BQ>());
  f(dq_pipelined_kernel<T, DP, blocks>, dq_pipelined_smem_bytes<T, DP>());
}

// Calls f(kernel, shared-memory bytes) for the split path's two passes in order, dK/dV then dQ: the
// pipelined kernels with `pipelined` (16 bits only; with `high`, compiled for three blocks per SM
// where that differs), else dkdv_kernel and dq_kernel. attention.cu's launches and the emulated
// tests' share it, so both run the same kernels.
template <class T, int DP, class F>
void with_split_passes(bool pipelined, bool high, F&& f) {
  if constexpr (sizeof(T) == 2) {
    if (pipelined) {
      if constexpr (kSplitPipelinedHasHighOccupancy<DP>)
        if (high) return with_pipelined_split_passes<T, DP, true>(f);
      return with_pipelined_split_passes<T, DP, false>(f);
    }
  }
  f(dkdv_kernel<T, DP, kDkdvQueryTile<DP>>, dkdv_smem_bytes<T, DP>());
  f(dq_kernel<T, DP>, dq_smem_bytes<T, DP>());
}

}  // namespace tandem::kernels::attention_detail
