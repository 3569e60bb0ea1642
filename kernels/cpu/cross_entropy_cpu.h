// CPU reference for the fused softmax + cross-entropy and for accuracy.
//
// logits [n, classes] of float dtype t, labels [n] i32/i64, every label in
// [0, classes) (the caller checks with first_out_of_range_cpu). Softmax
// statistics and losses are computed in acc_t (f32 for 16-bit logits).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// With lse = log sum_c exp(z_c) and smoothing eps (PyTorch's definition: the
// target is (1 - eps) * onehot(y) + eps / classes):
//   row_loss[i] = lse - (1 - eps) z_y - (eps / classes) sum_c z_c      (acc_t)
//   dlogits[i, c] = (softmax(z)_c - (1 - eps) [c == y] - eps / classes) / n   (dtype t; may be null)
// i.e. the gradient of the mean loss.
// dlogits (may be null) are in the accumulation dtype (f32; f64 for f64
// logits), not rounded to t: backward scales them by the loss's gradient
// (scale_by_scalar: src in the accumulation dtype, dst in t) and rounds once.
void cross_entropy_forward_cpu(const void* logits, const void* labels, DType label_type, void* row_loss, void* dlogits,
                               DType t, int64_t n, int64_t classes, double label_smoothing);

// The class-weighted loss (PyTorch's `weight=`): with w = class_weights (acc_t [classes]),
// W = sum_i w[y_i], S = sum_c w_c and log p = z - lse,
//   row_loss[i] = ((1 - eps) w_y (lse - z_y) + (eps / classes) sum_c w_c (lse - z_c)) / W      (acc_t)
//   dlogits[i, c] = ((1 - eps) w_y (p_c - [c == y]) + (eps / classes) (S p_c - w_c)) / W        (dtype t; may be null)
// so that the loss is the sum of row_loss: the weighted mean PyTorch's mean reduction takes.
void cross_entropy_weighted_forward_cpu(const void* logits, const void* labels, DType label_type,
                                        const void* class_weights, void* row_loss, void* dlogits, DType t, int64_t n,
                                        int64_t classes, double label_smoothing);

// dst[i] = src[i] * g[0]: the saved gradient of the mean loss times the incoming gradient
// (g has the loss's dtype: f64 for f64 logits, f32 otherwise).
void scale_by_scalar_cpu(const void* src, const void* g, void* dst, DType t, int64_t n);

// Number of rows whose argmax equals the label. The argmax is the first maximal
// entry, a NaN counting as larger than any number (torch.argmax's convention).
int64_t accuracy_count_cpu(const void* logits, const void* labels, DType label_type, DType t, int64_t n,
                           int64_t classes);

}  // namespace tandem::kernels
