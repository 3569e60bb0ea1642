// Layer normalisation over the last dimension, torch.nn.functional.layer_norm
// with weight and bias.
//
// x [..., D] of any float dtype; weight and bias [D] of x's dtype, or f32 for
// 16-bit x (f32 master parameters need no cast, and their gradients come back
// in f32). Mean and variance (biased, over D) are always computed in f32 (f64
// for f64 x) with two passes over the row, so a large mean does not cancel the
// variance; the output is rounded once to x's dtype. Forward saves the per-row
// mean and rstd = 1/sqrt(var + eps) for backward, which gives dx, dweight and
// dbias; dweight and dbias are column sums accumulated in f32 in a fixed order
// (deterministic on the GPU: per-block partial sums, then one ordered pass).
// On CUDA, D is limited to 4096.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace tandem::kernels
