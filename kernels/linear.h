// linear(x, w, b) = x w^T + b, PyTorch's nn.functional.linear.
//
// x is [..., in] (leading dimensions are flattened into rows), w is [out, in],
// b is [out] or undefined. All three share one dtype and device; mixed
// precision casts the f32 master parameters first (see cast()), and their
// gradients go back through those casts, or, given the masters
// (LinearParameter, TANDEM_LINEAR_GRADIENTS=master: kernels/linear_gradients.h),
// straight to them. Products are accumulated in f32 (f64 for f64), also for
// f16/bf16 inputs.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

// A weight or bias a linear uses, and where its gradient goes.
//   LinearParameter(p): p's values, p's gradient (of p's dtype).
//   LinearParameter(values, master): values holds `master`'s values in x's dtype and has no autograd
//     history (a cast made under NoGradGuard, or a cast_many slice); the gradient goes to `master`
//     instead, in master's dtype, from the backward's own f32 sum (dw's GEMM, db's column sum)
//     rounded once to master's dtype: no cast backward, no gradient of x's dtype. master has values'
//     shape and device; its dtype f32 or f64 (and on a GPU, f32).
struct LinearParameter {
  LinearParameter(const Tensor& p = Tensor()) : values(p) {}  // NOLINT(google-explicit-constructor): a plain one
  LinearParameter(const Tensor& values, const Tensor& master) : values(values), master(master) {}
  Tensor values;
  Tensor master;  // undefined: values' own gradient
  bool defined() const { return values.defined(); }
  // The tensor whose gradient the linear forms.
  const Tensor& gradient_to() const { return master.defined() ? master : values; }
};

Tensor linear(const Tensor& x, const LinearParameter& w, const LinearParameter& b = LinearParameter());

// y = x w^T without b, whose gradient it forms all the same: db = the column sums of dy, as
// linear(x, w, b) would. For a bias that the next op adds as it reads y and is handed detached
// (TANDEM_BIAS_GRADIENT=gemm, kernels/bias_gradient.h): d loss / d b is the sum over rows of
// d loss / d (y + b), which is dy. On a GPU db comes from dw's GEMM (cuBLASLt's BGRADB epilogue)
// unless TANDEM_CUBLASLT_EPILOGUES=0 or cuBLASLt has no algorithm, then from linear's column-sum pass.
// b must be defined, [out], of x's dtype and device.
Tensor linear_deferred_bias(const Tensor& x, const LinearParameter& w, const LinearParameter& b);

}  // namespace tandem::kernels
