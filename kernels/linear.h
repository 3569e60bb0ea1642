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

// y = x w^T without b, whose gradient it forms all the same: db = the column sums of dy, as
// linear(x, w, b) would. For a bias that the next op adds as it reads y and is handed detached
// (TANDEM_BIAS_GRADIENT=gemm, kernels/bias_gradient.h): d loss / d b is the sum over rows of
// d loss / d (y + b), which is dy. On a GPU db comes from dw's GEMM (cuBLASLt's BGRADB epilogue)
// unless TANDEM_CUBLASLT_EPILOGUES=0 or cuBLASLt has no algorithm, then from linear's column-sum pass.
// b must be defined, [out], of x's dtype and device.
Tensor linear_deferred_bias(const Tensor& x, const Tensor& w, const Tensor& b);

}  // namespace tandem::kernels
