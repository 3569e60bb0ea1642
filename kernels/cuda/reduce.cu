// Full sum (and mean) on the GPU, and its backward (broadcast of a device scalar).
//
// Sum: two passes with a fixed shape, so the order of additions (and the bits
// of the result) depends only on n. Pass 1: kBlocks blocks of 256 threads each
// sum a grid-strided slice in f32, reduce within the block (warp shuffles, then
// shared memory) and write one partial. Pass 2: one block sums the partials in
// the same fixed order, scales, rounds to the output type. Traffic: one read of
// the input plus 2*kBlocks floats: bound by memory bandwidth.
// Broadcast: dx[i] = scale * dy[0]; the scalar is read on the device, so the
// backward of a loss never synchronises with the host.
#include "core/allocator.h"
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/reduce_cuda.h"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 1024;

__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;  // valid in thread 0
}

template <class T>
__global__ void partial_sum_kernel(const T* __restrict__ x, int64_t n, float* __restrict__ partials) {
  float s = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    s += load(x[i]);
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

template <class T>
__global__ void final_sum_kernel(const float* __restrict__ partials, int count, float scale, T* __restrict__ out) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) out[0] = store<T>(s * scale);
}

template <class T>
__global__ void broadcast_kernel(const T* __restrict__ dy, T* __restrict__ dx, int64_t n, float scale) {
  const T v = store<T>(scale * load(dy[0]));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dx[i] = v;
}

}  // namespace

void sum_cuda(const void* x, void* out, DType t, int64_t n, double scale, int device, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(kBlocks, (n + kThreads - 1) / kThreads)));
  void* partials = cuda_memory::allocate(device, sizeof(float) * blocks, stream);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "sum_cuda", [&] {
    partial_sum_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const scalar_t*>(x), n, static_cast<float*>(partials));
    TANDEM_CUDA_CHECK_LAUNCH();
    final_sum_kernel<<<1, kThreads, 0, s>>>(static_cast<const float*>(partials), blocks, static_cast<float>(scale),
                                             static_cast<scalar_t*>(out));
    TANDEM_CUDA_CHECK_LAUNCH();
  });
  cuda_memory::deallocate(device, partials, sizeof(float) * blocks, stream);
}

void broadcast_scalar_cuda(const void* dy, void* dx, DType t, int64_t n, double scale, void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "broadcast_scalar_cuda", [&] {
    int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 8192));
    broadcast_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const scalar_t*>(dy), static_cast<scalar_t*>(dx), n, static_cast<float>(scale));
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tandem::kernels
