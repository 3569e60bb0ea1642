// A CPU stand-in for the parts of the CUDA execution model that the attention
// kernels (kernels/cuda/attention_*.cuh) and the row kernels (layer norm, the
// column sums, bias + GELU, dropout, the embedding gradient's window walk:
// kernels/cuda/*_kernels.cuh) use, so that
// exact device code runs and is tested on a machine without a GPU.
//
// launch() runs the blocks of a grid one after another. Inside a block every
// thread is a fiber (ucontext) on the calling thread; fibers switch only at
// __syncthreads and at warp-collective operations (shuffles, mma, ldmatrix),
// where each waits until all participants have arrived, so lanes meet exactly
// where they meet on hardware; which warp runs ahead is the launch's Schedule.
// A barrier that can never complete (threads diverging around __syncthreads,
// part of a warp skipping a collective) fails the launch with an error
// instead of hanging. Shared memory is a fresh heap buffer per block,
// filled with 0xff bytes (NaN as any float type) so reads of never-written
// shared memory show up in results; under AddressSanitizer, reads past it fault.
//
// What it supplies, in the global namespace: the CUDA keywords as no-ops,
// threadIdx/blockIdx/blockDim/gridDim (blocks and grids of one or two dimensions), dim3,
// float2/make_float2, uint4/make_uint4, __syncthreads, __shfl_sync and
// __shfl_xor_sync (float and unsigned), __ballot_sync and __popc, __fmul_rn and __fmaf_rn, the __half/__nv_bfloat16
// conversions, and mma16816<T> (mma.sync.m16n8k16.row.col, f32 accumulate),
// which places operands by the fragment layouts of the PTX ISA ("Matrix
// Fragments for mma.m16n8k16 with floating point type"). What it cannot show: timing, races
// between threads that hardware would interleave differently (fibers only
// switch at barriers; the WarpByWarp schedules below skew warps as far as
// barriers allow, but threads of one warp still move together), and the
// tensor core's internal rounding.
//
// The asynchronous copy and matrix load of the pipelined forward
// (kernels/cuda/attention_forward_pipelined.cuh), named as attention.cu names
// their inline PTX:
//   - cp_async_16(dst, src, src_bytes): cp.async.cg.shared.global, 16 bytes,
//     the last 16 - src_bytes of them zero-filled. The copy is deferred: at
//     issue the 16 destination bytes are filled with 0xff (NaN as any float
//     type; on hardware they are undefined while in flight), and the data
//     lands only when cp_async_wait_group says its group is complete. So a
//     read before the wait, or a copy issued over a buffer other warps still
//     read, shows up as NaN in the results;
//   - cp_async_commit_group() and cp_async_wait_group<N>(): the thread's
//     uncommitted copies become a group; waiting completes every group but
//     the N most recent (per thread, as in PTX; other threads' copies are
//     visible after a __syncthreads that follows their wait);
//   - ldmatrix_x1/x2/x4 and the _trans forms (ldmatrix.sync.aligned.m8n8
//     .shared.b16), warp collectives: lane 8i + r supplies the address of row
//     r of matrix i (16 bytes), and lane 4g + w receives in register i
//     elements (g, 2w) and (g, 2w + 1) of matrix i, or with .trans elements
//     (2w, g) and (2w + 1, g), the lower-indexed one in the low 16 bits.
// Both check their addresses (inside the block's shared memory, 16-byte
// aligned; cp.async's source 16-byte aligned): a bad one fails the launch
// with an error naming the instruction, as does any exception a kernel throws.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "core/check.h"
#include "core/half.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define ATTENTION_SHARED_MEMORY(name) unsigned char* name = ::warp_emulator::shared_memory()

namespace warp_emulator {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// The order in which a block's fibers run. A kernel without races gives the same results under each.
//   RoundRobin: every thread in turn runs to its next barrier, so the warps advance together;
//   WarpByWarp: warp 0 runs until every one of its threads waits at __syncthreads (or has ended),
//     then warp 1, and so on (the warp whose arrival opens a barrier runs on past it);
//     WarpByWarpReversed: the same from the last warp down.
// The last two put warps as far apart as the block's barriers allow: a shared-memory write that a
// missing __syncthreads leaves racing with another warp's reads shows up in the results.
enum class Schedule { RoundRobin, WarpByWarp, WarpByWarpReversed };

// Runs kernel() once per thread of every block of a grid_x x grid_y grid, blocks of `threads`
// (a multiple of 32) threads with `shared_bytes` of dynamic shared memory. Throws on deadlock.
void launch(unsigned grid_x, unsigned grid_y, int threads, size_t shared_bytes, const std::function<void()>& kernel,
            Schedule schedule = Schedule::RoundRobin);
// The same with two-dimensional blocks of block.x * block.y threads (block.z must be 1; the product a
// multiple of 32): thread (x, y) is linear thread x + y * block.x, and a warp is 32 consecutive linear
// threads, as on hardware. blockDim holds the block's shape inside the kernel.
void launch(unsigned grid_x, unsigned grid_y, Dim3 block, size_t shared_bytes, const std::function<void()>& kernel,
            Schedule schedule = Schedule::RoundRobin);

// Inside launch(): the block's dynamic shared memory; this warp's barrier; exchange slots of this warp.
unsigned char* shared_memory();
void block_barrier();
void warp_barrier();
float* warp_float_slots();     // 32 floats
uint32_t* warp_word_slots();   // 32 x 6 words: an mma's A (4) and B (2) registers per lane

// The per-thread asynchronous copies and the warp's matrix load behind the built-ins below.
void cp_async(void* shared_dst, const void* global_src, int src_bytes);
void cp_async_commit_group();
void cp_async_wait_group(int pending);
void ldmatrix(int matrices, bool trans, uint32_t* regs, const void* row);

}  // namespace warp_emulator

inline thread_local warp_emulator::Dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace warp_emulator {
// This thread's lane: its linear index in the block (x first) modulo 32.
inline unsigned lane_id() { return (threadIdx.x + threadIdx.y * blockDim.x) & 31u; }
}  // namespace warp_emulator

// The host side's dim3 (for helpers shared with the launchers) and the float2 vector type.
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }

inline void __syncthreads() { warp_emulator::block_barrier(); }

inline float __shfl_sync(unsigned /*mask: kernels always pass all lanes*/, float v, int src_lane) {
  float* slots = warp_emulator::warp_float_slots();
  const unsigned lane = warp_emulator::lane_id();
  slots[lane] = v;
  warp_emulator::warp_barrier();
  const float r = slots[src_lane & 31];
  warp_emulator::warp_barrier();  // everyone has read before the slots are reused
  return r;
}

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  return __shfl_sync(mask, v, static_cast<int>(warp_emulator::lane_id()) ^ lane_mask);
}

inline unsigned __shfl_sync(unsigned /*mask: kernels always pass all lanes*/, unsigned v, int src_lane) {
  uint32_t* slots = warp_emulator::warp_word_slots();
  const unsigned lane = warp_emulator::lane_id();
  slots[lane] = v;
  warp_emulator::warp_barrier();
  const unsigned r = slots[src_lane & 31];
  warp_emulator::warp_barrier();
  return r;
}

inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask) {
  return __shfl_sync(mask, v, static_cast<int>(warp_emulator::lane_id()) ^ lane_mask);
}

// Bit l of the result: lane l's predicate was non-zero (kernels always pass all lanes).
inline unsigned __ballot_sync(unsigned /*mask*/, int predicate) {
  uint32_t* slots = warp_emulator::warp_word_slots();
  const unsigned lane = warp_emulator::lane_id();
  slots[lane] = predicate != 0;
  warp_emulator::warp_barrier();
  unsigned r = 0;
  for (unsigned l = 0; l < 32; ++l) r |= (slots[l] != 0 ? 1u : 0u) << l;
  warp_emulator::warp_barrier();
  return r;
}

inline int __popc(unsigned v) { return std::popcount(v); }

// Rounded as written: the product through a volatile, so a host compiler allowed to contract
// (-ffp-contract=fast with FMA) cannot fuse it into a following add, as on the device.
inline float __fmul_rn(float a, float b) {
  volatile float p = a * b;
  return p;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __half __float2half_rn(float f) { return {tandem::float_to_f16_bits(f)}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }
inline float __half2float(__half h) { return tandem::f16_bits_to_float(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {tandem::float_to_bf16_bits(f)}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return {bits}; }
inline float __bfloat162float(__nv_bfloat16 h) { return tandem::bf16_bits_to_float(h.bits); }

// D = A B + C for one warp: A 16x16, B 16x8 (16-bit T), C/D 16x8 f32, in the PTX fragment layouts:
// lane = 4g + t; A regs {row g | g+8} x {cols 2t,2t+1 | 2t+8,2t+9} as a[0]=(g,lo) a[1]=(g+8,lo)
// a[2]=(g,hi) a[3]=(g+8,hi); B regs b[0] = rows 2t,2t+1 of column g, b[1] = rows 2t+8,2t+9;
// C c[0..1] = row g, columns 2t, 2t+1; c[2..3] = row g+8. Lower-indexed element in the low 16 bits.
template <class T>
void mma16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, tandem::Half> || std::is_same_v<T, tandem::BFloat16>);
  auto value = [](uint32_t reg, int half) {
    const auto bits = static_cast<uint16_t>(reg >> (16 * half));
    if constexpr (std::is_same_v<T, tandem::Half>) return tandem::f16_bits_to_float(bits);
    else return tandem::bf16_bits_to_float(bits);
  };
  uint32_t* slots = warp_emulator::warp_word_slots();
  const int lane = static_cast<int>(warp_emulator::lane_id());
  for (int r = 0; r < 4; ++r) slots[6 * lane + r] = a[r];
  for (int r = 0; r < 2; ++r) slots[6 * lane + 4 + r] = b[r];
  warp_emulator::warp_barrier();
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    double sum = 0;
    for (int k = 0; k < 16; ++k) {
      const int a_lane = 4 * (row & 7) + ((k & 7) >> 1), a_reg = (row >> 3) + 2 * (k >> 3);
      const int b_lane = 4 * col + ((k & 7) >> 1), b_reg = k >> 3;
      sum += double(value(slots[6 * a_lane + a_reg], k & 1)) * double(value(slots[6 * b_lane + 4 + b_reg], k & 1));
    }
    c[e] = static_cast<float>(double(c[e]) + sum);
  }
  warp_emulator::warp_barrier();
}

inline void cp_async_16(void* dst, const void* src, int src_bytes) { warp_emulator::cp_async(dst, src, src_bytes); }
inline void cp_async_commit_group() { warp_emulator::cp_async_commit_group(); }
template <int N>
void cp_async_wait_group() {
  static_assert(N >= 0);
  warp_emulator::cp_async_wait_group(N);
}

// The fused backward's ordered dQ accumulation (TANDEM_ATTENTION_BACKWARD=fused_ordered,
// kernels/cuda/attention_backward_fused.cuh), named as attention.cu names its inline PTX:
// turn_wait_acquire(flag, turn) returns once *flag == turn (ld.acquire.gpu in a spin);
// turn_release(flag, value) sets it (st.release.gpu); load_l2 / store_l2 are ld/st.global.cg.
// Here blocks run one after another, so a turn not yet reached when a block waits for it
// never comes: the wait fails the launch, naming both values, instead of spinning.
inline void turn_wait_acquire(const int* flag, int turn) {
  if (*flag != turn)
    TANDEM_FAIL("turn_wait_acquire: waiting for turn {}, the flag holds {} and no earlier block is left to pass it",
                turn, *flag);
}
inline void turn_release(int* flag, int value) { *flag = value; }
// ex2.approx.ftz.f32 (attention.cu's exp2_ftz): a subnormal result flushes to +0. The hardware's
// approximation differs from std::exp2 in the last bits; what the emulated tests compare is kernel
// with kernel (the same function) and with the CPU reference to a tolerance.
inline float exp2_ftz(float x) {
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}
inline float load_l2(const float* p) { return *p; }
inline void store_l2(float* p, float v) { *p = v; }

inline void ldmatrix_x1(uint32_t (&r)[1], const void* row) { warp_emulator::ldmatrix(1, false, r, row); }
inline void ldmatrix_x2(uint32_t (&r)[2], const void* row) { warp_emulator::ldmatrix(2, false, r, row); }
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) { warp_emulator::ldmatrix(4, false, r, row); }
inline void ldmatrix_x1_trans(uint32_t (&r)[1], const void* row) { warp_emulator::ldmatrix(1, true, r, row); }
inline void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) { warp_emulator::ldmatrix(2, true, r, row); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) { warp_emulator::ldmatrix(4, true, r, row); }
