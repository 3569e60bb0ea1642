// Philox fills on the GPU: one thread per element, each computing its own
// Philox block (10 rounds of two 32x32 multiplies), then one store. Compute
// is ~40 integer ops per element, so the kernel is bound by the store stream.
// The element formulas are the host's (core/random_element.h), so uniform
// values match the CPU bit for bit.
#include "core/cuda_check.h"
#include "core/element.h"
#include "core/random.h"
#include "core/random_element.h"

namespace tandem {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void uniform_kernel(T* dst, int64_t n, uint64_t seed, uint64_t subsequence, float low, float high) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(uniform_element(seed, subsequence, static_cast<uint64_t>(i), low, high));
}

template <class T>
__global__ void normal_kernel(T* dst, int64_t n, uint64_t seed, uint64_t subsequence, float mean, float stddev) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(normal_element(seed, subsequence, static_cast<uint64_t>(i), mean, stddev));
}

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

}  // namespace

void fill_uniform_cuda(void* dst, DType t, int64_t n, uint64_t seed, uint64_t subsequence, float low, float high,
                       void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "fill_uniform", [&] {
    uniform_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<scalar_t*>(dst), n, seed, subsequence, low, high);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

void fill_normal_cuda(void* dst, DType t, int64_t n, uint64_t seed, uint64_t subsequence, float mean, float stddev,
                      void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "fill_normal", [&] {
    normal_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<scalar_t*>(dst), n, seed, subsequence, mean, stddev);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tandem
