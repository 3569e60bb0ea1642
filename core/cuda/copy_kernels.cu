// CUDA conversion, fill and accumulation kernels for Tensor and autograd.
//
// Each is one grid-stride pass over n elements: convert reads n x sizeof(S)
// and writes n x sizeof(D) bytes, fill writes n x sizeof(T), accumulate reads
// 2n and writes n x sizeof(T); so all are bound by memory bandwidth, and what
// decides their speed is the width of each memory access. When every pointer
// is aligned for it, a thread moves V elements at once, V chosen so that the
// wider of the element types moves 16 bytes (an f32 -> bf16 conversion: one
// 16-byte load and one 8-byte store per thread step); the first n % V threads
// also take one of the last n % V elements, so a call is one launch. A call
// whose pointers are misaligned (a view at an odd offset) goes element by element.
//
// Numerics: the 16-bit conversions use the same bit-exact round-to-nearest-even
// routines as the host (core/half.h), NaN payloads included, so a tensor
// converted on the GPU equals the one converted on the CPU bit for bit;
// accumulation adds in acc_t (f32, or f64 for f64) and rounds once, as the
// host does.
#include <cstdint>
#include <type_traits>

#include "core/copy_kernels.h"
#include "core/cuda_check.h"
#include "core/element.h"

namespace tandem {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t work) {
  int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Elements per thread step so that the wider of A and B moves 16 bytes.
template <class A, class B>
constexpr int kWidth = static_cast<int>(16 / (sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B)));

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <class S, class D>
__device__ __forceinline__ D convert_one(S v) {
  if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) return from_float<D>(to_float(v));
  else return from_double<D>(to_double(v));
}

// V = 1 is the element-by-element path; V > 1 requires pointers aligned to V elements,
// and the first n % V threads of the grid also take one tail element each (V - 1 <= the grid's size).
template <class S, class D, int V>
__global__ void convert_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  const int64_t steps = n / V;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < steps;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<S, V> in = reinterpret_cast<const Pack<S, V>*>(src)[i];
    Pack<D, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = convert_one<S, D>(in.v[k]);
    reinterpret_cast<Pack<D, V>*>(dst)[i] = out;
  }
  const int64_t t = steps * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (V > 1 && t < n) dst[t] = convert_one<S, D>(src[t]);  // the n % V tail, by the first threads
}

template <class T, int V>
__global__ void fill_kernel(T* __restrict__ dst, T value, int64_t n) {
  const int64_t steps = n / V;
  Pack<T, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.v[k] = value;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < steps;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    reinterpret_cast<Pack<T, V>*>(dst)[i] = out;
  const int64_t t = steps * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (V > 1 && t < n) dst[t] = value;
}

template <class T, int V>
__global__ void accumulate_kernel(T* __restrict__ dst, const T* __restrict__ src, int64_t n) {
  const int64_t steps = n / V;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < steps;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Pack<T, V> d = reinterpret_cast<const Pack<T, V>*>(dst)[i];
    const Pack<T, V> s = reinterpret_cast<const Pack<T, V>*>(src)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) d.v[k] = store<T>(load(d.v[k]) + load(s.v[k]));
    reinterpret_cast<Pack<T, V>*>(dst)[i] = d;
  }
  const int64_t t = steps * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (V > 1 && t < n) dst[t] = store<T>(load(dst[t]) + load(src[t]));
}

// The widest V the pointers' alignment allows: W elements (16 bytes of the wider type), or 1.
template <int W>
void launch_width(bool vectorizable, auto&& launch) {
  if (W > 1 && vectorizable) launch.template operator()<W>();
  else launch.template operator()<1>();
}

}  // namespace

void convert_cuda(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (src_type == dst_type) {
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(src_type),
                                      cudaMemcpyDeviceToDevice, s));
    return;
  }
  TANDEM_DISPATCH_ALL(src_type, "convert", [&] {
    using S = scalar_t;
    TANDEM_DISPATCH_ALL(dst_type, "convert", [&] {
      using D = scalar_t;
      constexpr int W = kWidth<S, D>;
      const bool vec = aligned(src, sizeof(S) * W) && aligned(dst, sizeof(D) * W);
      launch_width<W>(vec, [&]<int V>() {
        convert_kernel<S, D, V><<<blocks_for(n / V + 1), kThreads, 0, s>>>(static_cast<const S*>(src),
                                                                          static_cast<D*>(dst), n);
        TANDEM_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

void fill_cuda(void* dst, DType type, int64_t n, double value, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  TANDEM_DISPATCH_ALL(type, "fill", [&] {
    using T = scalar_t;
    constexpr int W = kWidth<T, T>;
    const T v = from_double<T>(value);
    launch_width<W>(aligned(dst, sizeof(T) * W), [&]<int V>() {
      fill_kernel<T, V><<<blocks_for(n / V + 1), kThreads, 0, s>>>(static_cast<T*>(dst), v, n);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void accumulate_cuda(void* dst, const void* src, DType type, int64_t n, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  TANDEM_DISPATCH_FLOAT(type, "accumulate", [&] {
    using T = scalar_t;
    constexpr int W = kWidth<T, T>;
    const bool vec = aligned(dst, sizeof(T) * W) && aligned(src, sizeof(T) * W);
    launch_width<W>(vec, [&]<int V>() {
      accumulate_kernel<T, V><<<blocks_for(n / V + 1), kThreads, 0, s>>>(static_cast<T*>(dst),
                                                                         static_cast<const T*>(src), n);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tandem
