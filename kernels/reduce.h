// Differentiable full reductions to a 0-dimensional tensor of the input's
// dtype and device. Accumulation is f32 on the GPU (f64 for f64 tensors and on
// the CPU reference), and the GPU result is deterministic: the same input gives
// the same bits on every run.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);  // sum / numel; NaN for an empty tensor, as in PyTorch

}  // namespace tandem::kernels
