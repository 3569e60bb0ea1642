// linear(x, w, b) = x w^T + b, PyTorch's nn.functional.linear.
//
// x is [..., in] (leading dimensions are flattened into rows), w is [out, in],
// b is [out] or undefined. All three share one dtype and device; mixed
// precision casts the f32 master weights first (see cast()). Products are
// accumulated in f32 (f64 for f64), also for f16/bf16 inputs.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

}  // namespace tandem::kernels
