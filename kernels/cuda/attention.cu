// Fused multi-head self-attention on the GPU, flash-attention style
// (Dao et al. 2022, FlashAttention-2's work split), forward and backward.
//
// Layout: qkv [B, S, 3*H*Dh] packed (3, H, Dh); out [B, S, H*Dh];
// lse [B, H, S] f32 (natural log; +inf for a row with no real key).
// One block = 4 warps = 64 rows of a tile; each warp owns 16 rows, which is
// the M of the tensor-core instruction mma.sync.m16n8k16 (f32 accumulate).
// Head dims are zero-padded in shared memory to DP in {32, 64, 128}.
//
// Grids: B*H x ceil(S/64) blocks (x the head); the forward's, with TANDEM_ATTENTION_BLOCK_ORDER=tiles_first,
// ceil(S/64) x B*H (x the tile: a head's tiles side by side, sharing its K and V in L2; the same bits),
// laid out by block_grid and read back by block_tile (attention_kernels.cuh).
//
// Forward (forward_kernel, grid B*H x ceil(S/64)): a block loads
// its 64 query rows once, then streams 64-key tiles of K and V through shared
// memory. Per tile, each warp computes S = Q K^T (16 x 64) into registers,
// applies scale, key mask and the online softmax (running max m and
// denominator l per row, rescaling the output accumulator by exp(m_old -
// m_new)), drops probabilities (Philox, recomputed: one block per lane per
// 16 x 16 square holds that lane's 8 decisions), and accumulates O += P V
// with P reused straight from the S registers as the A operand. At the end
// O /= l, and lse = m + log l is saved for backward.
// Nothing S x S ever reaches global memory. In 16 bits, every kernel here reads its
// tensor-core operands from shared memory by ldmatrix (mma_abt: .x4 for the A
// fragment and two 8-row B blocks; mma_pb: .x2.trans per B fragment of a k-major
// tile), one instruction where 32-bit and 16-bit shared loads took two to four;
// the fragments and so the results are the same bits (the emulated tests).

//
// Pipelined forward (forward_pipelined_kernel, attention_forward_pipelined.cuh;
// f16/bf16, the default (TANDEM_ATTENTION_FORWARD=pipelined), or pipelined_wide for
// 32 query rows per warp and 128 per block at head dims up to 64): the same algorithm
// and results, with K/V tiles double-buffered by cp.async (tile j + 1 streams in while
// tile j is computed; one __syncthreads per tile) and V's fragments read by
// ldmatrix.x4.trans, two 8-column blocks per instruction.
//   Traffic per (b, h): Q, O once (2 * S * Dh elements) plus K, V once per
//   query tile: 2 * S * Dh * ceil(S/64) elements; for S <= 512 that is at most
//   8x K/V re-reads, served mostly from L2. FLOPs: 4 * S^2 * Dh.
//
// Backward, three launches, deterministic (no atomics anywhere):
//   1. rowdot_kernel: D_i = sum_d dO_id O_id (f32), one warp per row. This is
//      sum_j P_ij dP_ij, the softmax-backward correction, computed from the
//      output instead of an S x S pass.
//   2. dkdv_kernel (grid B*H x ceil(S/64)): a block owns 64 keys, keeps K, V
//      in shared memory and dK, dV in registers, and streams query tiles of
//      Q, dO (with lse, D). It recomputes S^T = K Q^T and P^T = exp(S^T*scale -
//      lse), dP^T = V dO^T, dS^T = P^T (dP^T * drop - D), then dV += (P^T*drop)
//      dO and dK += dS^T Q, reusing the register tiles as A operands.
//   3. dq_kernel (grid B*H x ceil(S/64)): a block owns 64 queries and streams
//      K, V tiles, recomputing P and dS the same way, dQ += dS K.
//   Splitting dQ from dK/dV (instead of FlashAttention-2's atomicAdd on dQ)
//   costs two extra S x S x Dh products (7 instead of 5) but makes every
//   gradient a fixed-order sum, bit-reproducible run to run.
//   TANDEM_ATTENTION_BACKWARD=split_pipelined runs dkdv_pipelined_kernel and
//   dq_pipelined_kernel for passes 2 and 3 (attention_backward_pipelined.cuh: the
//   streamed tiles double-buffered by cp.async; the same bits). TANDEM_ATTENTION_BACKWARD=fused runs the five-product alternative instead,
//   as deterministic: the dK/dV block also writes its key tile's share of dQ
//   to f32 scratch, and a second kernel sums the shares in key-tile order
//   (kernels/cuda/attention_backward_fused.cuh: design, traffic, resources).
//   Traffic per (b, h): Q, K, V, dO each read about 1 + ceil(S/64) times, O
//   once, dQKV written once; FLOPs 14 * S^2 * Dh (10 * S^2 * Dh counted the
//   usual way, which the benchmark reports).
//
// Dropout (kernels/attention_params.h) reads and writes no memory by default:
// every pass recomputes its decisions, one Philox4x32-10 block per 8 (forward,
// dK/dV and dQ alike, S^2 / 8 blocks per (b, h) each; dK/dV, holding the
// transposed tile, adds one shuffle per block), where one block per 4
// consecutive keys of a row cost S^2 / 2, S^2 and S^2 / 2 blocks; under
// TANDEM_ATTENTION_DROPOUT_RNG=philox7x16 one Philox4x32-7 block per 16
// (S^2 / 16 per pass, lanes L and L ^ 4 swapping halves). With saved
// keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved, opt-in) the forward also
// stores each block's byte (S^2 / 8 bytes per (b, h)) and both backward passes
// read it (one 32-byte sector per warp and 16 x 16 square) instead of spending
// 2 x S^2 / 8 blocks: at the configs' 128 x 256 tokens and 8 heads, 8.4 MB per
// layer kept from forward to backward.
//
// Numerics: f16/bf16 operands go through tensor cores (m16n8k16, f32
// accumulate); the probabilities and dS are rounded to the input type to be
// fed back as operands (as FlashAttention does); max, sums, exponentials,
// lse and every accumulator are f32. The f32 path does the same tile
// algorithm with scalar FMAs (no TF32), so it tracks the CPU reference to
// f32 rounding. Exponentials are base 2 with log2(e)/sqrt(Dh) folded into the
// score scale, by the special-function unit alone (exp2_ftz: ex2.approx.ftz, one
// instruction where exp2f took four; results below 2^-126 flush to 0). A row
// with no real key gets l = 0: output 0, lse = +inf, and
// P = exp2(s - inf) = 0 in backward, so no NaN appears. Dropout compares
// 16-bit uniforms with round(p * 2^16) and scales kept probabilities by the
// inverse of that quantised keep rate, exactly as the CPU reference does.
//
// Trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed, opt-in; kernels/cuda/attention_switches.h):
// with a key-padding mask, key_end_kernel first finds one past each batch row's last real key
// (one warp per row, B * S bytes read), and every kernel then visits only the 64-key tiles before
// it: the forward's and dQ pass's key loops stop there, and a dK/dV or fused block whose tile lies
// past it writes dK = dV = 0 and leaves (attention_kernels.cuh: key_tiles_of says why the results
// are the same bits). Tandem's batches pad every row to max_seq_len, so for a row of L real tokens
// the S x S work becomes about S x L.
//
// Limits: head_dim <= 128 (checked, clear error beyond); any S (the tests go to 512);
// B*H <= 2^31-1, ceil(S/64) <= 65535.
//
// Resources (nvcc 13.0, -O3 -arch=sm_90 -Xptxas -v; __launch_bounds__(128, 2)
// caps registers at 255). Registers per thread, spill stores/loads in bytes
// (none unless noted), dynamic shared memory per 128-thread block:
//
//   kernel      DP   f32 regs   f16/bf16 regs         f32 smem   f16/bf16 smem
//   forward     32   225        154                   27,712     15,424
//   forward     64   245        155                   52,288     27,712
//   forward    128   252        176                  101,440     52,288
//   pipelined   32   -          111 (4 blocks/SM)          -      25,728
//   pipelined   64   -          128 (4 blocks/SM)          -      46,208
//   pipelined  128   -          174                        -      87,168
//   pipelined   32   -          96, 4/4 spilled (5 blocks/SM, TANDEM_ATTENTION_OCCUPANCY=high) -  25,728
//   wide        32   -          207 (2 blocks/SM)          -      30,848
//   wide        64   -          222 (2 blocks/SM)          -      55,424
//   dkdv        32   255        197                   37,376     20,992
//   dkdv        64   251        228                   70,144     37,376
//   dkdv       128   255        244                  101,632     52,480
//   dkdv_pipe   32   -          205                        -      31,744
//   dkdv_pipe   64   -          229                        -      56,320
//   dkdv_pipe  128   -          242                        -      70,144
//   dq_pipe     32   -          193                        -      30,848
//   dq_pipe     64   -          179                        -      55,424
//   dq_pipe    128   -          211                        -     104,576
//   dkdv_pipe   32   -          168 (3 blocks/SM, 32-query tiles; high)       -      20,992
//   dq_pipe     32   -          168 (3 blocks/SM; high)    -      30,848
//   dq          32   215        175                   36,928     20,544
//   dq          64   233        179                   69,696     36,928
//   dq         128   210        209                  135,232     69,696
//   rowdot       -   32         26-31                      0          0
//   key_end      -   30 (no type: reads the u8 mask)          0          0
//
// No spills but the five-block forward's 4 bytes. (2026-11-28, saved keep bits, a second branch in the keep-bit helpers: registers moved by
// -8 to +4 against the table before, most by 0-4; the f32 fused backward's spills at DP = 128 changed:
// attention_backward_fused.cuh.) (2026-11-27: every tile now arrives by cp.async from one
// base address and a fixed step per thread, attention_kernels.cuh's load_tile_async, where the 16-byte loads went through
// registers by a generic index walk; the key-tile count comes from key_tiles_of; exponentials are
// exp2_ftz; the split passes have a copy of their element loop without dropout: mostly 10-40
// registers fewer per kernel, and dkdv's spills are gone: 8 bytes in 16 bits at DP = 64 and 128,
// 24 in f32 at DP = 128, since ldmatrix. The table was measured again after the late-evening
// changes of that day: a whole-tile copy path, the dK/dV pass's exponential taken before the
// key-flag select, and the first k-step of the score products peeled (kPeelFirstStep; the
// pipelined forward at DP = 32 excepted): up to 14 registers more (36 in dq_pipe at DP = 32), no spills.)
// (2026-12-02: the DP = 32 pipelined rows read again, 112, 205 and 193, with the rows of the kernels
// TANDEM_ATTENTION_OCCUPANCY=high runs: docs/results/attention_occupancy_ptxas.md. Later that day the
// forward kernels read their place in the grid from block_tile (TANDEM_ATTENTION_BLOCK_ORDER): the forward
// rows above are from then, -5 to +5 registers, and the five-block pipelined forward spills 4 bytes each
// way at its 96-register cap; the backward kernels' counts did not change.)
// So two blocks (8 warps) per SM at most, one for f32 at DP = 128, except the pipelined
// forward, compiled for four at DP <= 64 (kPipelinedBlocksPerSm: 172-178 registers before,
// two blocks); its 87 KB at DP = 128 still allow two. The wide pipelined forward (two row
// tiles per warp, TANDEM_ATTENTION_FORWARD=pipelined_wide) runs the one-tile kernel at DP =
// 128. The device
// code lives in attention_kernels.cuh and attention_forward_pipelined.cuh
// (shared with the CPU warp emulator that tests it); this file adds the
// tensor-core, cp.async and ldmatrix instructions and the launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/allocator.h"
#include "core/cuda_check.h"
#include "core/half.h"
#include "kernels/cuda/attention_cuda.h"

namespace tandem::kernels::attention_detail {

// c += a . b for one m16n8k16 step: a = 16x16 (rows g, g+8; columns 2t.. and 2t+8..),
// b = 16x8 (rows 2t.., 2t+8..; column g), each register two 16-bit values.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, Half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// 2^x by the special-function unit alone (ex2.approx.ftz.f32, as FlashAttention's --use_fast_math
// builds get): exp2f without fast math wraps the same instruction in a range fix-up for results
// below 2^-126 (a compare and two predicated multiplies), 3 of every 4 instructions per exponential,
// of which each pass computes one per element of the S x S matrix. Results below 2^-126 flush to 0:
// such a probability is under 1e-38 of the row's largest (which is 1), rounds to 0 in f16 anyway and
// changes no f32 sum it joins. Other results are MUFU.EX2's, as before.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The pipelined forward's memory instructions (attention_forward_pipelined.cuh).
// 16 bytes global -> shared, asynchronously; the bytes past src_bytes are zero-filled, none read.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const auto s = static_cast<unsigned long long>(__cvta_generic_to_global(src));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(s), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are in flight ("memory": no shared
// access moves above it).
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Four 8x8 matrices of 16-bit elements; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The fused backward's ordered dQ accumulation (attention_backward_fused.cuh, fused_ordered).
// Spins until *flag == turn, reading with acquire semantics at GPU scope. The turn comes from the
// block one key tile before, which started earlier (CUTLASS's serial split-K reduction relies on
// the same dispatch order), so the wait is at most that block's one query tile; 2^24 polls (seconds,
// with a short nap between them) can only be a broken assumption, and trap (the launch fails with
// an error) rather than hang the process.
__device__ __forceinline__ void turn_wait_acquire(const int* flag, int turn) {
  for (int spins = 0;; ++spins) {
    int v;
    asm volatile("ld.global.acquire.gpu.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    if (v == turn) return;
    if (spins == (1 << 24)) __trap();
    __nanosleep(64);
  }
}
__device__ __forceinline__ void turn_release(int* flag, int value) {
  asm volatile("st.global.release.gpu.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}
// The accumulator through L2 only (.cg): another SM's block wrote it last, and this SM's L1 may
// hold an older copy of the line.
__device__ __forceinline__ float load_l2(const float* p) { return __ldcg(p); }
__device__ __forceinline__ void store_l2(float* p, float v) { __stcg(p, v); }

}  // namespace tandem::kernels::attention_detail

#define ATTENTION_SHARED_MEMORY(name) extern __shared__ __align__(16) unsigned char name[]
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_backward_fused.cuh"
#include "kernels/cuda/attention_forward_pipelined.cuh"
#include "kernels/cuda/attention_backward_pipelined.cuh"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

namespace {

using namespace attention_detail;

// Lets `kernel` launch with `bytes` of dynamic shared memory (above 48 KB that needs the
// attribute). The attribute belongs to the function on a device and each kernel here always asks
// for the same size, so it is set once per (kernel, device), not per launch: a driver call on
// every launch cost host time in launch-bound steps and was recorded again into every captured
// graph. (A cudaDeviceReset would drop it; Tandem never resets a device.)
template <class Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;  // one per Kernel type: keyed by function
  int device = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&device));
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key)) return;
  TANDEM_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done.insert(key);
}

dim3 dims(Grid g) { return dim3(g.x, g.y); }

// Trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed, with a mask): each batch row's key_end
// (key_end_kernel, B ints of scratch for the op call) and params.key_end pointing at it, so the
// kernels after it skip the key tiles past each row's last real key. Otherwise nothing: no mask means
// every key is real, and All visits every tile.
class KeyEnds {
 public:
  KeyEnds(const uint8_t* mask, const AttentionShape& s, int device, cudaStream_t st, Params& params)
      : scratch_(device, mask != nullptr && attention_key_tiles() == AttentionKeyTiles::Trimmed
                             ? sizeof(int) * static_cast<size_t>(s.batch)
                             : 0,
                 st) {
    if (scratch_.as<int>() == nullptr) return;
    key_end_kernel<<<static_cast<unsigned>((s.batch + kWarps - 1) / kWarps), kThreads, 0, st>>>(
        mask, static_cast<int>(s.batch), params.seq, scratch_.as<int>());
    TANDEM_CUDA_CHECK_LAUNCH();
    params.key_end = scratch_.as<int>();
  }

 private:
  Scratch scratch_;
};

// Calls f(kernel, shared-memory bytes, query blocks) with the forward kernel `which` picks for T
// and DP, after setting the attributes it launches with (so a launch and an occupancy query see
// the same); the grid is B*H x query blocks.
template <class T, int DP, class F>
void with_forward_kernel(AttentionForwardKernel which, int64_t seq, F&& f) {
  if constexpr (sizeof(T) == 2) {
    // The pipelined kernel's blocks per SM (kPipelinedBlocksPerSm: four at DP <= 64 for one row
    // tile) need up to 185 KB of the SM's 228 KB as shared memory: the driver sizes the carveout
    // so that shared memory does not limit occupancy (CUDA programming guide, compute capability
    // 9.0), so no preference is set.
    // TANDEM_ATTENTION_OCCUPANCY=high: where it differs (head dims up to 32), the kernel compiled for
    // five blocks per SM instead of four.
    if (which != AttentionForwardKernel::Tiled)
      return with_pipelined_forward<T, DP>(which == AttentionForwardKernel::PipelinedWide,
                                           attention_occupancy() == AttentionOccupancy::High, seq,
                                           [&](auto kernel, size_t smem, unsigned blocks) {
                                             allow_shared_memory(kernel, smem);
                                             f(kernel, smem, blocks);
                                           });
  }
  auto kernel = forward_kernel<T, DP>;
  allow_shared_memory(kernel, forward_smem_bytes<T, DP>());
  f(kernel, forward_smem_bytes<T, DP>(), static_cast<unsigned>((seq + kRows - 1) / kRows));
}

}  // namespace

void attention_forward_cuda(const void* qkv, const uint8_t* mask, void* out, float* lse, const AttentionShape& s,
                            const AttentionDropout& d, DType t, int device, void* stream,
                            AttentionForwardKernel which, uint8_t* keep_out) {
  if (s.batch * s.seq * s.heads == 0) return;
  Params params = make_params(s, d);
  if (d.active()) params.keep_out = keep_out;
  params.tiles_first = tiles_first_applies(s, attention_block_order());
  auto st = static_cast<cudaStream_t>(stream);
  const KeyEnds key_ends(mask, s, device, st, params);
  // Trimmed, the forward writes no keep byte of a skipped tile, but the ordered fused backward runs key
  // tile 0 of a row with no real key (attention_backward_fused.cuh) and reads its bytes: zeroed here, so
  // that it reads defined bytes (its probabilities there are 0, so any byte gives the same results).
  if (params.keep_out != nullptr && params.key_end != nullptr)
    TANDEM_CUDA_CHECK(cudaMemsetAsync(params.keep_out, 0, static_cast<size_t>(attention_keep_bytes(s)), st));
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "attention_forward_cuda", [&] {
    using T = scalar_t;
    with_padded_dim(s.head_dim, [&](auto dp) {
      with_forward_kernel<T, decltype(dp)::value>(which, s.seq, [&](auto kernel, size_t smem, unsigned blocks) {
        kernel<<<dims(block_grid(params, s.batch * s.heads, blocks)), kThreads, smem, st>>>(
            static_cast<const T*>(qkv), mask, static_cast<T*>(out), lse, params, vector_loads<T>(qkv, s.head_dim));
        TANDEM_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

namespace {

// Blocks of `kernel` (kThreads threads, `smem` bytes of dynamic shared memory, its attributes set) that fit
// one multiprocessor of the current device.
template <class Kernel>
int blocks_per_sm(Kernel kernel, size_t smem) {
  int blocks = 0;
  TANDEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
  return blocks;
}

void check_occupancy_head_dim(const char* what, int64_t head_dim) {
  TANDEM_CHECK(head_dim >= 1 && head_dim <= kAttentionMaxHeadDimCuda, "{}: head_dim must be 1..{}, got {}", what,
               kAttentionMaxHeadDimCuda, head_dim);
}

}  // namespace

int attention_forward_blocks_per_sm(int64_t head_dim, DType t, AttentionForwardKernel which) {
  check_occupancy_head_dim("attention_forward_blocks_per_sm", head_dim);
  int blocks = 0;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "attention_forward_blocks_per_sm", [&] {
    with_padded_dim(head_dim, [&](auto dp) {
      with_forward_kernel<scalar_t, decltype(dp)::value>(
          which, 1, [&](auto kernel, size_t smem, unsigned) { blocks = blocks_per_sm(kernel, smem); });
    });
  });
  return blocks;
}

int attention_backward_blocks_per_sm(int64_t head_dim, DType t, AttentionBackwardPath path) {
  check_occupancy_head_dim("attention_backward_blocks_per_sm", head_dim);
  int blocks = 0;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "attention_backward_blocks_per_sm", [&] {
    using T = scalar_t;
    with_padded_dim(head_dim, [&](auto dp) {
      constexpr int DP = decltype(dp)::value;
      const auto occupancy = [&](auto kernel, size_t smem) {
        allow_shared_memory(kernel, smem);
        blocks = blocks_per_sm(kernel, smem);
      };
      const AttentionBackwardPath runs = resolve_attention_backward(path, t == DType::F32, false);
      if (runs == AttentionBackwardPath::Fused) {
        occupancy(fused_backward_kernel<T, DP, kFusedQueryTile<T, DP>>, fused_backward_smem_bytes<T, DP>());
      } else if (runs == AttentionBackwardPath::FusedOrdered || runs == AttentionBackwardPath::FusedOrderedPipelined) {
        with_ordered_fused_kernel<T, DP>(runs == AttentionBackwardPath::FusedOrderedPipelined, occupancy);
      } else if (runs == AttentionBackwardPath::SplitPipelined) {
        bool dkdv = true;  // the first of the two passes
        with_split_passes<T, DP>(true, attention_occupancy() == AttentionOccupancy::High, [&](auto kernel, size_t smem) {
          if (std::exchange(dkdv, false)) occupancy(kernel, smem);
        });
      } else {
        occupancy(dkdv_kernel<T, DP, kDkdvQueryTile<DP>>, dkdv_smem_bytes<T, DP>());
      }
    });
  });
  return blocks;
}

namespace {

// With `pipelined` (16 bits only), the passes are dkdv_pipelined_kernel and dq_pipelined_kernel.
void backward_split(const void* qkv, const uint8_t* mask, const void* out, const float* lse, const void* dout,
                    void* dqkv, const AttentionShape& s, const AttentionDropout& d, DType t, int device,
                    cudaStream_t st, bool pipelined, const uint8_t* keep_in) {
  Params params = make_params(s, d);
  if (d.active()) params.keep_in = keep_in;
  const KeyEnds key_ends(mask, s, device, st, params);
  const int64_t rows = s.batch * s.seq * s.heads;
  const size_t rowdot_bytes = sizeof(float) * static_cast<size_t>(rows);
  auto* rowdot = static_cast<float*>(cuda_memory::allocate(device, rowdot_bytes, st));
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "attention_backward_cuda", [&] {
    using T = scalar_t;
    const bool vec_qkv = vector_loads<T>(qkv, s.head_dim), vec_dout = vector_loads<T>(dout, s.head_dim);
    rowdot_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, st>>>(
        static_cast<const T*>(dout), static_cast<const T*>(out), rowdot, rows, params.seq, params.heads, params.dh);
    TANDEM_CUDA_CHECK_LAUNCH();
    with_padded_dim(s.head_dim, [&](auto dp) {
      constexpr int DP = decltype(dp)::value;
      // Each pass's kernel with its shared memory, on the grid of every attention kernel.
      const auto launch = [&](auto kernel, size_t smem) {
        allow_shared_memory(kernel, smem);
        kernel<<<dims(grid_for(s)), kThreads, smem, st>>>(static_cast<const T*>(qkv), mask, lse, rowdot,
                                                          static_cast<const T*>(dout), static_cast<T*>(dqkv), params,
                                                          vec_qkv, vec_dout);
        TANDEM_CUDA_CHECK_LAUNCH();
      };
      with_split_passes<T, DP>(pipelined, attention_occupancy() == AttentionOccupancy::High, launch);
    });
  });
  cuda_memory::deallocate(device, rowdot, rowdot_bytes, st);
}

// rowdot, then per launch of plan.heads_per_launch heads the fused kernel and the dQ reduction, all
// launches reusing one scratch buffer (stream order keeps a launch's partials until its reduction has read them).
// With `ordered`, per launch: the heads' turn flags zeroed, then the ordered kernel (grid key tiles x heads),
// which writes dQ itself; with `pipelined` too (16 bits only), its double-buffered form.
void backward_fused(const void* qkv, const uint8_t* mask, const void* out, const float* lse, const void* dout,
                    void* dqkv, const AttentionShape& s, const AttentionDropout& d, DType t, int device,
                    cudaStream_t st, const FusedBackwardPlan& plan, bool ordered, bool pipelined,
                    const uint8_t* keep_in) {
  Params params = make_params(s, d);
  if (d.active()) params.keep_in = keep_in;
  const KeyEnds key_ends(mask, s, device, st, params);
  const int64_t rows = s.batch * s.seq * s.heads, heads = s.batch * s.heads;
  const Scratch rowdot(device, sizeof(float) * static_cast<size_t>(rows), st);
  const Scratch partial(device, plan.scratch_bytes, st);
  const auto key_tiles = static_cast<unsigned>(row_tiles(s));
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "attention_backward_cuda (fused)", [&] {
    using T = scalar_t;
    const bool vec_qkv = vector_loads<T>(qkv, s.head_dim), vec_dout = vector_loads<T>(dout, s.head_dim);
    rowdot_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, st>>>(
        static_cast<const T*>(dout), static_cast<const T*>(out), rowdot.as<float>(), rows, params.seq, params.heads,
        params.dh);
    TANDEM_CUDA_CHECK_LAUNCH();
    with_padded_dim(s.head_dim, [&](auto dp) {
      constexpr int DP = decltype(dp)::value;
      if (ordered) {
        float* accumulators = partial.as<float>();
        int* turns = reinterpret_cast<int*>(accumulators + plan.heads_per_launch * s.seq * s.head_dim);
        const auto launch = [&](auto kernel, size_t bytes) {
          allow_shared_memory(kernel, bytes);
          for (int64_t bh0 = 0; bh0 < heads; bh0 += plan.heads_per_launch) {
            const int64_t n = std::min(plan.heads_per_launch, heads - bh0);
            TANDEM_CUDA_CHECK(cudaMemsetAsync(turns, 0, sizeof(int) * n * fused_turns_per_head(s.seq), st));
            kernel<<<dim3(key_tiles, static_cast<unsigned>(n)), kThreads, bytes, st>>>(
                static_cast<const T*>(qkv), mask, lse, rowdot.as<float>(), static_cast<const T*>(dout),
                static_cast<T*>(dqkv), accumulators, turns, static_cast<int>(bh0), params, vec_qkv, vec_dout);
            TANDEM_CUDA_CHECK_LAUNCH();
          }
        };
        with_ordered_fused_kernel<T, DP>(pipelined, launch);
        return;
      }
      auto fused = fused_backward_kernel<T, DP, kFusedQueryTile<T, DP>>;
      constexpr size_t smem = fused_backward_smem_bytes<T, DP>();
      allow_shared_memory(fused, smem);
      for (int64_t bh0 = 0; bh0 < heads; bh0 += plan.heads_per_launch) {
        const int64_t n = std::min(plan.heads_per_launch, heads - bh0);
        fused<<<dim3(static_cast<unsigned>(n), key_tiles), kThreads, smem, st>>>(
            static_cast<const T*>(qkv), mask, lse, rowdot.as<float>(), static_cast<const T*>(dout),
            static_cast<T*>(dqkv), partial.as<float>(), nullptr, static_cast<int>(bh0), params, vec_qkv, vec_dout);
        TANDEM_CUDA_CHECK_LAUNCH();
        const int count = static_cast<int>(n * s.seq * s.head_dim);  // at most the scratch in floats
        dq_reduce_kernel<T><<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, st>>>(
            partial.as<float>(), static_cast<T*>(dqkv), static_cast<int>(bh0), count, params);
        TANDEM_CUDA_CHECK_LAUNCH();
      }
    });
  });
}

// TANDEM_ATTENTION_FUSED_CHUNKS=waves: the blocks of `path`'s fused kernel that fit the device at once
// (SMs x blocks per SM), which plan_fused_backward sizes its chunks by; 0 (the even chunks) otherwise.
// Queried once per (device, dtype, head dim, path): a driver call on every backward would cost host time
// in launch-bound steps.
int64_t fused_resident_blocks(int64_t head_dim, DType t, AttentionBackwardPath path, int device) {
  if (attention_fused_chunks() != AttentionFusedChunks::Waves) return 0;
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int64_t, int>, int64_t> known;
  const std::tuple<int, int, int64_t, int> key{device, static_cast<int>(t), head_dim, static_cast<int>(path)};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int sms = 0;
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t resident = int64_t{sms} * attention_backward_blocks_per_sm(head_dim, t, path);
  known.emplace(key, resident);
  return resident;
}

}  // namespace

void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream) {
  attention_backward_cuda(qkv, mask, out, lse, dout, dqkv, s, d, t, device, stream, attention_backward_path());
}

void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream, AttentionBackwardPath path,
                             const uint8_t* keep_in) {
  if (s.batch * s.seq * s.heads == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  path = resolve_attention_backward(path, t == DType::F32, d.active());
  if (path == AttentionBackwardPath::Fused || path == AttentionBackwardPath::FusedOrdered ||
      path == AttentionBackwardPath::FusedOrderedPipelined) {
    const bool pipelined = path == AttentionBackwardPath::FusedOrderedPipelined;
    const bool ordered = pipelined || path == AttentionBackwardPath::FusedOrdered;
    const FusedBackwardPlan plan =
        plan_fused_backward(s, kFusedScratchLimit, ordered, fused_resident_blocks(s.head_dim, t, path, device));
    if (plan.heads_per_launch > 0)
      return backward_fused(qkv, mask, out, lse, dout, dqkv, s, d, t, device, st, plan, ordered, pipelined, keep_in);
  }
  backward_split(qkv, mask, out, lse, dout, dqkv, s, d, t, device, st, path == AttentionBackwardPath::SplitPipelined,
                 keep_in);
}

}  // namespace tandem::kernels
