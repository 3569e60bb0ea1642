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
//
// bias_gelu_dropout(x, b, approx, p, training, seed, subsequence, step) =
// dropout(bias_gelu(x, b, approx), p, training, seed, subsequence, step)
// (kernels/bias_dropout_add.h): the feed-forward block's activation and its
// dropout as one op, with the two ops' values, bits and keep mask. On a GPU
// it runs one kernel each way (TANDEM_GELU_DROPOUT=fused, the default; =separate:
// their two kernels; kernels/cuda/row_kernel_switches.h), which saves a read and a write of the
// activation each way. p = 0 or training = false is bias_gelu.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/gelu_formula.h"

namespace tandem::kernels {

Tensor gelu(const Tensor& x, GeluApproximation approx = GeluApproximation::None);
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApproximation approx = GeluApproximation::None);
Tensor bias_gelu_dropout(const Tensor& x, const Tensor& bias, GeluApproximation approx, double p, bool training,
                         uint64_t seed, uint64_t subsequence, const int64_t* step = nullptr);

}  // namespace tandem::kernels
