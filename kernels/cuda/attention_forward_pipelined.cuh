// The pipelined attention forward for 16-bit inputs (f16, bf16): forward_kernel's
// algorithm (kernels/cuda/attention.cu describes it: 64 queries per block, 16
// per warp, 64-key tiles, online softmax, P V from the score registers), with
// two changes in how the tiles reach the tensor cores, and optionally a third
// in how much each warp does.
//
// 1. K/V tiles are double-buffered and loaded with cp.async (16 bytes per
//    instruction, global to shared without a register round trip): while the
//    warps compute tile j from one buffer, tile j + 1 streams into the other.
//    One __syncthreads per tile: before it each thread waits for its own
//    copies of tile j (cp.async.wait_group 0), after it everyone's have
//    landed, and every warp is done with tile j - 1, whose buffer the copies
//    of tile j + 1, issued right after, overwrite. Tile j + 1's key-padding
//    flags are loaded there too, into a register, and stored to shared
//    memory only after tile j is computed, so their latency hides as well.
//    Rows past S and head-dim columns past Dh are zero-filled by cp.async's
//    src-size operand (0 bytes read). Where 16-byte copies are impossible (Dh
//    not a multiple of 8, or a base address not 16-byte aligned) the same
//    buffers are filled by start_tile's plain loads: same results, no overlap.
// 2. Operand fragments come from shared memory by ldmatrix: per 16-column
//    step one ldmatrix.x4 gives a warp's A fragment of Q (4 registers) and
//    one gives the B fragments of two 8-key blocks of K; for P V, one
//    ldmatrix.x4.trans gives the B fragments of two 8-column blocks of V (V is
//    stored key-major and the mma wants it column-major: ldmatrix transposes
//    for free). forward_kernel reads Q and K the same way (mma_abt) and V
//    one fragment per ldmatrix.x2.trans (mma_pb).
//
// 3. MT row tiles of 16 queries per warp (kWideRowTiles): MT = 1 is
//    TANDEM_ATTENTION_FORWARD=pipelined; pipelined_wide runs MT = 2 at DP <= 64
//    (128 queries per block of four warps, as FlashAttention-2 at head dim 64,
//    whose key tiles are 128 where these stay 64): each
//    K and V fragment from shared memory feeds two products, and the two tiles'
//    work is independent, so a warp has more to issue while one waits. Each
//    tile's rows see exactly the MT = 1 operations.
//
// Memory traffic: forward_kernel's bytes (Q and O once, K and V once per
// query tile), but a warp no longer waits for its global loads before
// computing, and V's shared-memory loads take one instruction per 4 registers
// instead of forward_kernel's one per 2.
// Shared memory: Q (MT tiles), two K and two V tiles of 64 x (DP + 8) elements,
// and two tiles' key flags: 5/3 of forward_kernel's at MT = 1 (resource table
// in attention.cu). With MT = 2, K and V are read from global memory half as
// often (once per 128 queries).
// Numerics: forward_kernel's, operation for operation (the same products in
// the same order, the same online_softmax_tile and store_forward_rows), so the
// two agree bit for bit under the warp emulator.
//
// Besides attention_kernels.cuh's requirements, the includer supplies
// cp_async_16(dst, src, src_bytes), cp_async_commit_group() and
// cp_async_wait_group<N>(): inline PTX in attention.cu, CPU versions in
// tests/testing/warp_emulator.h. Its ldmatrix products (mma_abt_ldmatrix,
// mma_pv_ldmatrix) are attention_kernels.cuh's.
#pragma once

#include "kernels/cuda/attention_kernels.cuh"

namespace tandem::kernels::attention_detail {

// Starts the loads of the 64-key K and V tiles at k0 into k_dst and v_dst, as one cp.async group.
template <int DP, class T>
__device__ __forceinline__ void load_kv_pipelined(T* k_dst, T* v_dst, const HeadRows<T>& src, int k0, const Params& P,
                                                  bool vec) {
  start_tile<kRows, DP>(k_dst, src.k, src.stride, k0, P.seq, P.dh, vec);
  start_tile<kRows, DP>(v_dst, src.v, src.stride, k0, P.seq, P.dh, vec);
  cp_async_commit_group();
}

// The backward's query tile q0 into one of its buffers (the pipelined dK/dV pass and the pipelined
// fused backward): Q and dO rows by cp.async as one committed group, and lse (log2 units) and D by
// plain loads; rows past S get lse = +inf and D = 0, so P = 0 there.
template <int BQ, int DP, class T>
__device__ __forceinline__ void load_query_tile_pipelined(T* q_dst, T* do_dst, float* lse_dst, float* rowdot_dst,
                                                          const HeadRows<T>& src, const T* do_g, const float* lse,
                                                          const float* rowdot, const Params& P, int bh, int q0,
                                                          bool vec_qkv, bool vec_dout) {
  start_tile<BQ, DP>(q_dst, src.q, src.stride, q0, P.seq, P.dh, vec_qkv);
  start_tile<BQ, DP>(do_dst, do_g, src.out_stride, q0, P.seq, P.dh, vec_dout);
  cp_async_commit_group();
  for (int i = threadIdx.x; i < BQ; i += kThreads) {
    const bool in = q0 + i < P.seq;
    lse_dst[i] = in ? lse[int64_t{bh} * P.seq + q0 + i] * kLog2e : INFINITY;
    rowdot_dst[i] = in ? rowdot[int64_t{bh} * P.seq + q0 + i] : 0.0f;
  }
}

// Row tiles of 16 queries per warp: 1 (a block's 64 queries, as forward_kernel), or 2 for the wide
// variant (TANDEM_ATTENTION_FORWARD=pipelined_wide: 128 queries per block of four warps, as
// FlashAttention-2 at head dim 64), where each K and V fragment a warp loads from shared memory feeds
// two tensor-core products instead of one and the two tiles' softmax and products give the
// scheduler independent work. Only at DP <= 64 (at 128 the two output tiles alone would fill
// the registers); DP = 128 runs one tile.
template <int DP>
constexpr int kWideRowTiles = DP <= 64 ? 2 : 1;

// Calls f(std::integral_constant<int, MT>) with the row tiles per warp of the pipelined kernel at DP:
// kWideRowTiles<DP> for the wide variant, else 1. attention.cu's launch and the emulated tests' share it.
template <int DP, class F>
void with_row_tiles(bool wide, F&& f) {
  if (wide) f(std::integral_constant<int, kWideRowTiles<DP>>{});
  else f(std::integral_constant<int, 1>{});
}

// Blocks per SM the kernel is compiled for (the second __launch_bounds__ argument, which caps
// registers at 65536 / (128 * blocks)). The first GPU run found the one-tile kernel at 172
// registers, two blocks (8 warps) per SM, with the tensor cores mostly waiting: four blocks fit
// 128 registers with no spills at DP <= 64 (121-123 registers, nvcc 13.0) and their shared memory
// (4 x 46 KB at DP = 64) fits an SM's 227 KB; at DP = 128 four blocks spill and three do not fit
// the shared memory, so it stays at two; two row tiles keep two blocks (their accumulators need
// the registers). High (TANDEM_ATTENTION_OCCUPANCY=high): five for the one-tile kernel at DP = 32,
// 96 registers and no spills (six spill 36 bytes; at DP = 64 five spill), 5 x 25 KB of shared memory.
template <int DP, int MT>
constexpr bool kPipelinedHasHighOccupancy = MT == 1 && DP <= 32;
template <int DP, int MT, bool High = false>
constexpr int kPipelinedBlocksPerSm = High && kPipelinedHasHighOccupancy<DP, MT> ? 5 : MT == 1 && DP <= 64 ? 4 : 2;

// Whether Q K^T peels its first k-step (mma_abt_ldmatrix's kPeelFirstStep: the score accumulators
// start at zero, so their zeroing goes; 21 of 470 instructions per key tile at DP = 64). Everywhere but
// the one-tile kernel at DP = 32, which then spilled 12/20 bytes at its 128-register cap (nvcc 13.0).
template <int DP, int MT>
constexpr bool kPipelinedPeel = !(MT == 1 && DP <= 32);

template <class T, int DP, int MT, bool High = false>
__global__ void __launch_bounds__(kThreads, kPipelinedBlocksPerSm<DP, MT, High>)
    forward_pipelined_kernel(const T* __restrict__ qkv, const uint8_t* __restrict__ mask, T* __restrict__ out,
                             float* __restrict__ lse, Params P, bool vec) {
  static_assert(sizeof(T) == 2, "f16/bf16 only: tensor cores and ldmatrix.b16 (f32 runs forward_kernel)");
  constexpr int ld = kLd<T, DP>;
  constexpr int NC = kRows / 8;        // 8-column blocks of a 64-key tile
  constexpr int kTile = kRows * ld;    // elements of one 64-row Q, K or V tile
  constexpr int kBlockRows = MT * kRows;  // queries per block
  ATTENTION_SHARED_MEMORY(smem);
  T* q_s = reinterpret_cast<T*>(smem);  // MT tiles
  T* k_s = q_s + MT * kTile;            // buffers 0 and 1: k_s + buf * kTile
  T* v_s = k_s + 2 * kTile;
  uint8_t* real_s = reinterpret_cast<uint8_t*>(v_s + 2 * kTile);  // 2 x kRows key flags

  const BlockTile place = block_tile(P);
  const int bh = place.head, b = bh / P.heads, h = bh % P.heads;
  const int q0 = place.tile * kBlockRows;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const HeadRows<T> src = head_rows(qkv, P, b, h);

  const auto load_kv = [&](int k0, int buf) {
    load_kv_pipelined<DP>(k_s + buf * kTile, v_s + buf * kTile, src, k0, P, vec);
  };
  const int tiles = key_tiles_of(P, b);
  if (tiles > 0) {  // none: a row with no real key (trimmed), whose output is 0 without reading anything
    start_tile<kBlockRows, DP>(q_s, src.q, src.stride, q0, P.seq, P.dh, vec);
    load_kv(0, 0);  // Q joins the first tile's group
    if (threadIdx.x < kRows) real_s[threadIdx.x] = key_flag_of_thread(mask, b, P.seq, 0);
  }
  // Warp w owns rows 16 MT w .. 16 MT w + 16 MT - 1 of the block: row tile mt from row0 + 16 mt.
  const T* q_w = q_s + warp * 16 * MT * ld;
  const int row0 = q0 + warp * 16 * MT + g;

  float o[MT][DP / 8][4] = {};
  float m[MT][2], l[MT][2];  // running max (log2 units) and this lane's part of the denominators
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

  for (int j = 0; j < tiles; ++j) {
    const int buf = j & 1;
    cp_async_wait_group<0>();  // this thread's copies of tile j (the only group in flight) have landed
    __syncthreads();           // everyone's have, and every warp is done with tile j - 1's buffer
    const bool more = j + 1 < tiles;
    uint8_t next_flag = 0;
    if (more) {  // tile j + 1 streams in while tile j is computed; its key flag is stored after
      load_kv((j + 1) * kRows, buf ^ 1);
      next_flag = key_flag_of_thread(mask, b, P.seq, (j + 1) * kRows);
    }

    float s[MT][NC][4] = {};
    mma_abt_ldmatrix<MT, NC, DP, kPipelinedPeel<DP, MT>>(s, q_w, k_s + buf * kTile, ld);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      online_softmax_tile(s[mt], o[mt], m[mt], l[mt], real_s + buf * kRows, P, bh, row0 + 16 * mt, j * kRows, t);
    mma_pv_ldmatrix<MT, DP / 8, NC>(o, s, v_s + buf * kTile, ld);
    if (more && threadIdx.x < kRows) real_s[(buf ^ 1) * kRows + threadIdx.x] = next_flag;
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) store_forward_rows<T>(o[mt], m[mt], l[mt], out, lse, P, bh, row0 + 16 * mt, t);
}

// Q (MT tiles), two K and two V tiles, two tiles' key flags.
template <class T, int DP, int MT>
constexpr size_t forward_pipelined_smem_bytes() {
  return (MT + 4) * kRows * kLd<T, DP> * sizeof(T) + 2 * kRows;
}

// Blocks along the queries: ceil(S / (64 MT)).
inline unsigned pipelined_query_blocks(int64_t seq, int mt) {
  return static_cast<unsigned>((seq + kRows * mt - 1) / (kRows * mt));
}

// Calls f(kernel, shared-memory bytes, query blocks) with the pipelined forward at DP: the wide one
// with `wide`, compiled for more blocks per SM with `high` where that differs (kPipelinedBlocksPerSm;
// elsewhere `high` runs the default kernel). attention.cu's launch and the emulated tests' share it.
template <class T, int DP, class F>
void with_pipelined_forward(bool wide, bool high, int64_t seq, F&& f) {
  with_row_tiles<DP>(wide, [&](auto mt) {
    constexpr int MT = decltype(mt)::value;
    constexpr size_t smem = forward_pipelined_smem_bytes<T, DP, MT>();
    if constexpr (kPipelinedHasHighOccupancy<DP, MT>)
      if (high) return f(forward_pipelined_kernel<T, DP, MT, true>, smem, pipelined_query_blocks(seq, MT));
    f(forward_pipelined_kernel<T, DP, MT>, smem, pipelined_query_blocks(seq, MT));
  });
}

}  // namespace tandem::kernels::attention_detail
