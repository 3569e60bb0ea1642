// CUDA layer norm; same contracts as kernels/cpu/layer_norm_cpu.h (f32, f16,
// bf16 data; parameters of the data's dtype or f32; f32 statistics), queued on
// `stream`. dim <= 4096.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void layer_norm_forward_cuda(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                             int64_t rows, int64_t dim, double eps, DType t, DType wt, void* stream);
void layer_norm_backward_cuda(const void* dy, const void* x, const void* weight, const void* mean, const void* rstd,
                              void* dx, void* dweight, void* dbias, int64_t rows, int64_t dim, DType t, DType wt,
                              int device, void* stream);

// TANDEM_ADD_LAYER_NORM=fused: layer_norm(sum) with sum = dropout(x + branch_bias) + residual computed
// and stored on the way (x, branch_bias, residual, sum of dtype t), and its backward: dsum (never
// null: the residual's gradient and the layer norm's input gradient), dweight and dbias as
// layer_norm_backward_cuda's, and the branch's: dbranch = dsum as stored times the keep factors (null
// when p = 0: it is dsum) and dbranch_bias, its column sums. The bits of bias_dropout_add_forward_cuda
// then layer_norm_forward_cuda, and of their backwards in reverse (dbranch_bias: with
// TANDEM_COLUMN_SUM=thread, to a rounding with =block). TANDEM_LAYER_NORM=lanes has no fused backward.
void bias_dropout_add_layer_norm_forward_cuda(const void* x, const void* branch_bias, const void* residual, void* sum,
                                              float p, uint64_t seed, uint64_t subsequence, const int64_t* step,
                                              const void* weight, const void* bias, void* y, void* mean, void* rstd,
                                              int64_t rows, int64_t dim, double eps, DType t, DType wt, void* stream);
void bias_dropout_add_layer_norm_backward_cuda(const void* dy, const void* sum, const void* weight, const void* mean,
                                               const void* rstd, void* dsum, void* dweight, void* dbias, void* dbranch,
                                               void* dbranch_bias, float p, uint64_t seed, uint64_t subsequence,
                                               const int64_t* step, int64_t rows, int64_t dim, DType t, DType wt,
                                               int device, void* stream);

}  // namespace tandem::kernels
