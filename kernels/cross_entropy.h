// The classification loss and accuracy.
//
// cross_entropy(logits [N, C], labels [N] i32/i64, label_smoothing) is
// torch.nn.functional.cross_entropy with mean reduction and PyTorch's label
// smoothing (target (1 - eps) * onehot + eps / C). One fused pass per row
// computes the log-sum-exp (max-subtracted), the row loss and, when logits
// need a gradient, dlogits = (softmax - target) / N, kept in f32 (f64 for
// f64), which backward only scales by the incoming gradient (read on the
// device: no host sync) and then rounds to the logits' dtype once, so a loss
// scale is applied before fp16 rounding, not after. All of it is f32 math for
// any logits dtype (f64 for f64); the loss is a 0-dim f32
// tensor (f64 for f64 logits) on the logits' device, the mean of the row
// losses summed in a fixed order. A label outside [0, C) is an Error naming it
// and its row: immediately on the CPU, through kernels/index_errors.h on the GPU.
//
// class_weights (optional, [C], f32 — f64 for f64 logits — on the logits'
// device) is PyTorch's `weight=`: each row's loss (smoothing terms included)
// is weighted by the class weights and the mean divides by sum_i w[y_i]
// instead of N, exactly as torch.nn.functional.cross_entropy(weight=w). The
// sum stays on the device (no host sync). Weights must be finite and >= 0
// (checked for CPU tensors; a batch whose labels all weigh 0 gives NaN, as in
// PyTorch).
//
// accuracy_count(logits, labels) is the number of rows whose argmax (first
// maximal class; NaN counts as maximal, as torch.argmax) equals the label, as
// a 0-dim i64 tensor on the logits' device; it is not differentiable.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0,
                     const Tensor& class_weights = Tensor());
Tensor accuracy_count(const Tensor& logits, const Tensor& labels);

}  // namespace tandem::kernels
