// linear(x, w, b) = x w^T + b, PyTorch's nn.functional.linear.
//
// x is [..., in] (leading dimensions are flattened into rows), w is [out, in],
// b is [out] or undefined. All three share one dtype and device; mixed
// precision casts the f32 master weights first (see cast()), and the weight's
// gradient goes back through that cast, or, given the master weight
// (LinearWeight, TANDEM_WEIGHT_GRADIENT=master: kernels/weight_gradient.h),
// straight to it. Products are accumulated in f32 (f64 for f64), also for
// f16/bf16 inputs.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

// The weight a linear multiplies by, and where its gradient goes.
//   LinearWeight(w): w's values, w's gradient (of w's dtype).
//   LinearWeight(values, master): values holds `master`'s values in x's dtype and has no autograd
//     history (a cast made under NoGradGuard, or a cast_many slice); the gradient goes to `master`
//     instead, in master's dtype, from dw's GEMM (f32 accumulation rounded once to master's dtype):
//     no cast backward, no dw of x's dtype. master is [out, in] on values' device; its dtype f32 or
//     f64 (and on a GPU, f32).
struct LinearWeight {
  LinearWeight(const Tensor& w) : values(w) {}  // NOLINT(google-explicit-constructor): a plain weight
  LinearWeight(const Tensor& values, const Tensor& master) : values(values), master(master) {}
  Tensor values;
  Tensor master;  // undefined: values' own gradient
  // The tensor whose gradient the linear forms.
  const Tensor& gradient_to() const { return master.defined() ? master : values; }
};

Tensor linear(const Tensor& x, const LinearWeight& w, const Tensor& b = Tensor());

// y = x w^T without b, whose gradient it forms all the same: db = the column sums of dy, as
// linear(x, w, b) would. For a bias that the next op adds as it reads y and is handed detached
// (TANDEM_BIAS_GRADIENT=gemm, kernels/bias_gradient.h): d loss / d b is the sum over rows of
// d loss / d (y + b), which is dy. On a GPU db comes from dw's GEMM (cuBLASLt's BGRADB epilogue)
// unless TANDEM_CUBLASLT_EPILOGUES=0 or cuBLASLt has no algorithm, then from linear's column-sum pass.
// b must be defined, [out], of x's dtype and device.
Tensor linear_deferred_bias(const Tensor& x, const LinearWeight& w, const Tensor& b);

}  // namespace tandem::kernels
