// CUDA sequence pooling; same contracts as kernels/cpu/pooling_cpu.h (count
// and weights in f32), queued on `stream`.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// `device` holds the scratch of TANDEM_MASKED_MEAN=lane_groups (kernels/cuda/row_kernel_switches.h).
void masked_mean_pool_forward_cuda(const void* x, const uint8_t* mask, void* y, void* count, DType t, int64_t batch,
                                   int64_t seq, int64_t dim, int device, void* stream);
void masked_mean_pool_backward_cuda(const void* dy, const uint8_t* mask, const void* count, void* dx, DType t,
                                    int64_t batch, int64_t seq, int64_t dim, void* stream);
void weighted_sum_pool_forward_cuda(const void* x, const void* w, void* y, DType t, int64_t batch, int64_t seq,
                                    int64_t dim, void* stream);
void weighted_sum_pool_backward_cuda(const void* dy, const void* w, void* dx, DType t, int64_t batch, int64_t seq,
                                     int64_t dim, void* stream);
void first_token_pool_forward_cuda(const void* x, void* y, DType t, int64_t batch, int64_t seq, int64_t dim,
                                   void* stream);
void first_token_pool_backward_cuda(const void* dy, void* dx, DType t, int64_t batch, int64_t seq, int64_t dim,
                                    void* stream);

}  // namespace tandem::kernels
