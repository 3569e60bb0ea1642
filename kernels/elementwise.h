// Differentiable elementwise ops on tensors of equal shape and dtype (no
// broadcasting). 16-bit inputs are computed in f32 and rounded once.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor add(const Tensor& a, const Tensor& b);      // a + b
Tensor mul(const Tensor& a, const Tensor& b);      // a * b
Tensor scale(const Tensor& x, double alpha);       // alpha * x
Tensor relu(const Tensor& x);                      // max(x, 0); gradient 0 at x <= 0
Tensor cast(const Tensor& x, DType dtype);         // x converted; the gradient is converted back

}  // namespace tandem::kernels
