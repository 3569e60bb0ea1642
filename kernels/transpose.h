// transpose(x [R, C]) = x^T [C, R], as a new contiguous tensor (Tandem's
// tensors are always contiguous, so a transpose is a copy; torch's x.t() is a
// view and .contiguous() makes the same copy). Any dtype, CPU or CUDA;
// differentiable (the gradient is transposed back). Pure data movement: no
// arithmetic, so results are bit-exact on every device.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor transpose(const Tensor& x);

}  // namespace tandem::kernels
