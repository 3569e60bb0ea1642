// CUDA fused softmax + cross-entropy and accuracy; same contracts as
// kernels/cpu/cross_entropy_cpu.h, queued on `stream`, except that labels are
// checked on the device: a label outside [0, classes) is reported through
// kernels/cuda/index_error_cuda.h and its row gets loss 0 and dlogits 0.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void cross_entropy_forward_cuda(const void* logits, const void* labels, DType label_type, void* row_loss,
                                void* dlogits, DType t, int64_t n, int64_t classes, double label_smoothing,
                                void* stream);
// The class-weighted loss of cross_entropy_weighted_forward_cpu, in two steps so that
// W = sum_i w[y_i] stays on the device: row_weight[i] = w[y_i] (f32 [n]; labels are
// checked here), then, with total_weight = the sum of row_weight (a device f32
// scalar), the row losses and dlogits. class_weights: device f32 [classes].
void class_weight_of_rows_cuda(const void* labels, DType label_type, const void* class_weights, void* row_weight,
                               int64_t n, int64_t classes, void* stream);
void cross_entropy_weighted_forward_cuda(const void* logits, const void* labels, DType label_type,
                                         const void* class_weights, const void* total_weight, void* row_loss,
                                         void* dlogits, DType t, int64_t n, int64_t classes, double label_smoothing,
                                         void* stream);
// g is a device f32 scalar.
void scale_by_scalar_cuda(const void* src, const void* g, void* dst, DType t, int64_t n, void* stream);
// count: a device i64 scalar, overwritten.
void accuracy_count_cuda(const void* logits, const void* labels, DType label_type, void* count, DType t, int64_t n,
                         int64_t classes, void* stream);

}  // namespace tandem::kernels
