// CUDA conversion, fill and accumulation kernels for Tensor and autograd.
//
// Each is one grid-stride pass: read n elements (and write n), so they are
// bound by memory bandwidth; the 16-bit conversions use the same bit-exact
// round-to-nearest-even routines as the host (core/half.h), so a tensor
// converted on the GPU equals the one converted on the CPU bit for bit.
#include "core/copy_kernels.h"
#include "core/cuda_check.h"
#include "core/element.h"

namespace tandem {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <class S, class D>
__global__ void convert_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) dst[i] = from_float<D>(to_float(src[i]));
    else dst[i] = from_double<D>(to_double(src[i]));
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ dst, T value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class T>
__global__ void accumulate_kernel(T* __restrict__ dst, const T* __restrict__ src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = store<T>(load(dst[i]) + load(src[i]));
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
      convert_kernel<S, D><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const S*>(src), static_cast<D*>(dst), n);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void fill_cuda(void* dst, DType type, int64_t n, double value, void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_ALL(type, "fill", [&] {
    fill_kernel<scalar_t><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<scalar_t*>(dst), from_double<scalar_t>(value), n);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

void accumulate_cuda(void* dst, const void* src, DType type, int64_t n, void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT(type, "accumulate", [&] {
    accumulate_kernel<scalar_t><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<scalar_t*>(dst), static_cast<const scalar_t*>(src), n);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tandem
