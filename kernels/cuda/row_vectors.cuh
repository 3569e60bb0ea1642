// Building blocks of the memory-bound kernels over row-major [rows, dim] data.
//
// A thread owns one "vector" of V consecutive columns of a row and moves it as
// one 16-byte load/store (V = 16 / sizeof(T)) when every row starts on a
// 16-byte boundary (dim % V == 0 and aligned base pointers), or as single
// elements (V = 1) otherwise. Values are converted to f32 registers with the
// hardware round-to-nearest-even conversions, which give the same bits as
// core/half.h on the CPU. Blocks are (Tx, Ty): Tx threads across the vectors
// of a row, Ty rows (or row groups) at once.
//
// Device code built on this header can also run on the CPU under
// tests/testing/warp_emulator.h, which a test includes first: it supplies the
// CUDA built-ins and types that the headers below supply to nvcc.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/half.h"

namespace tandem::kernels {

// A kernel's static shared array of `count` values (one per kernel): __shared__ under nvcc; under the
// emulator, the block's shared memory, which the emulated launch sizes to at least count * sizeof(type).
#if defined(__CUDACC__)
#define ROW_KERNEL_SHARED(type, name, count) __shared__ type name[count]
#else
#define ROW_KERNEL_SHARED(type, name, count) type* name = reinterpret_cast<type*>(::warp_emulator::shared_memory())
#endif

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class T>
constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

template <class T>
__device__ __forceinline__ float to_f32(T v) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(__ushort_as_half(v.bits));
  else if constexpr (std::is_same_v<T, BFloat16>) return __bfloat162float(__ushort_as_bfloat16(v.bits));
  else return static_cast<float>(v);
}

template <class T>
__device__ __forceinline__ T from_f32(float f) {
  if constexpr (std::is_same_v<T, Half>) return Half{__half_as_ushort(__float2half_rn(f))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
  else return static_cast<T>(f);
}

// V elements at p (aligned to sizeof(T) * V) into f32 registers, and back.
template <int V, class T>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, float (&out)[V]) {
  Vec<T, V> r = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_f32(r.v[k]);
}

template <int V, class T>
__device__ __forceinline__ void store_vec(T* __restrict__ p, const float (&in)[V]) {
  Vec<T, V> r;
#pragma unroll
  for (int k = 0; k < V; ++k) r.v[k] = from_f32<T>(in[k]);
  *reinterpret_cast<Vec<T, V>*>(p) = r;
}

template <int V>
__device__ __forceinline__ void fill(float (&a)[V], float v) {
#pragma unroll
  for (int k = 0; k < V; ++k) a[k] = v;
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// True when [rows, dim] data of element size `elem` at every non-null pointer can use 16-byte vectors.
inline bool rows_vectorizable(int64_t dim, size_t elem, std::initializer_list<const void*> ptrs) {
  if ((dim * static_cast<int64_t>(elem)) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned_to(p, 16)) return false;
  return true;
}

// Calls f.operator()<V>() with V = kVec16<T> when `vec` (rows_vectorizable), else V = 1.
template <class T, class F>
void with_width(bool vec, F&& f) {
  if (vec) f.template operator()<kVec16<T>>();
  else f.template operator()<1>();
}

inline int round_up_32(int64_t n) { return static_cast<int>((n + 31) / 32 * 32); }

// Block shape for "one thread per vector column, rows strided": Tx threads across
// the vectors (a multiple of 32, at most 128), Ty = 256 / Tx rows at once; a
// single row gets 256 threads across.
inline dim3 column_block(int64_t nvec, int64_t rows) {
  if (nvec < 1) nvec = 1;
  if (rows <= 1) return dim3(static_cast<unsigned>(nvec >= 256 ? 256 : round_up_32(nvec)), 1);
  int tx = nvec >= 128 ? 128 : round_up_32(nvec);
  return dim3(static_cast<unsigned>(tx), static_cast<unsigned>(256 / tx));
}

inline unsigned blocks_for(int64_t n, int64_t per_block, int64_t cap) {
  int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace tandem::kernels
