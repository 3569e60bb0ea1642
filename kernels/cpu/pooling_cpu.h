// CPU reference for sequence pooling of x [batch, seq, dim] into [batch, dim].
// Sums accumulate in acc_t; one rounding per output.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// Masked mean: count[b] = number of s with mask[b, s] != 0 (stored in acc_t,
// f64 for f64 data, f32 otherwise); y[b, :] = sum of the masked x[b, s, :] / count[b],
// or 0 where count[b] == 0 (all padding: zeros, not NaN).
void masked_mean_pool_forward_cpu(const void* x, const uint8_t* mask, void* y, void* count, DType t, int64_t batch,
                                  int64_t seq, int64_t dim);
// dx[b, s, :] = mask[b, s] ? dy[b, :] / count[b] : 0 (every element written).
void masked_mean_pool_backward_cpu(const void* dy, const uint8_t* mask, const void* count, void* dx, DType t,
                                   int64_t batch, int64_t seq, int64_t dim);

// Weighted sum: y[b, :] = sum over s of w[b, s] * x[b, s, :], w in acc_t (constants); positions
// with w == 0 are not read. Backward: dx[b, s, :] = w[b, s] * dy[b, :] (every element written).
void weighted_sum_pool_forward_cpu(const void* x, const void* w, void* y, DType t, int64_t batch, int64_t seq,
                                   int64_t dim);
void weighted_sum_pool_backward_cpu(const void* dy, const void* w, void* dx, DType t, int64_t batch, int64_t seq,
                                    int64_t dim);

// First-token (CLS) pooling: y[b, :] = x[b, 0, :]; backward puts dy[b, :] at s = 0 and zeros elsewhere.
void first_token_pool_forward_cpu(const void* x, void* y, DType t, int64_t batch, int64_t seq, int64_t dim);
void first_token_pool_backward_cpu(const void* dy, void* dx, DType t, int64_t batch, int64_t seq, int64_t dim);

}  // namespace tandem::kernels
