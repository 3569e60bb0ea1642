// GELU, and the fused bias + GELU that follows the first linear layer of the
// transformer's feed-forward block.
//
// gelu(x, approx) matches torch.nn.functional.gelu(x, approximate='none' |
// 'tanh') (formulas in kernels/gelu_formula.h). bias_gelu(x [..., D], b [D])
// = gelu(x + b) in one pass, for linear(h, W) without its bias: the sum x + b
// stays in f32 (it is not rounded to x's dtype before the GELU, unlike the
// unfused ops), and the backward produces dx and db in one pass, db being a
// deterministic f32 column sum. x and b share dtype and device; arithmetic is
// f32 (f64 for f64), one rounding per output.
#pragma once

#include "core/tensor.h"
#include "kernels/gelu_formula.h"

namespace tandem::kernels {

Tensor gelu(const Tensor& x, GeluApproximation approx = GeluApproximation::None);
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApproximation approx = GeluApproximation::None);

}  // namespace tandem::kernels
