// Filling tensors from the Philox stream (seed, subsequence).
//
// Element i of the result depends only on (seed, subsequence, i), never on the
// device, the thread layout or the order of evaluation, so the same call gives
// bit-identical uniform values on the CPU and on a GPU. Normal values use the
// Box-Muller transform on the uniform pair (2k, 2k+1); they agree between CPU and
// GPU to within the last bits of logf/cosf/sinf.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem {

// Uniform in [low, high). Floating dtypes only.
void fill_uniform(Tensor& t, uint64_t seed, uint64_t subsequence, double low = 0.0, double high = 1.0);
// Normal with the given mean and standard deviation. Floating dtypes only.
void fill_normal(Tensor& t, uint64_t seed, uint64_t subsequence, double mean = 0.0, double stddev = 1.0);

#if TANDEM_WITH_CUDA
void fill_uniform_cuda(void* dst, DType t, int64_t n, uint64_t seed, uint64_t subsequence, float low, float high,
                       void* stream);
void fill_normal_cuda(void* dst, DType t, int64_t n, uint64_t seed, uint64_t subsequence, float mean, float stddev,
                      void* stream);
#endif

}  // namespace tandem
