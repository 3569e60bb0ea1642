// The epilogue of a post-norm transformer sublayer as one op:
//
//   bias_dropout_add_layer_norm(x, bias, residual, p, training, seed, subsequence, step, weight, ln_bias, eps)
//     = layer_norm(bias_dropout_add(x, bias, residual, p, training, seed, subsequence, step),
//                  weight, ln_bias, eps)
//
// (kernels/bias_dropout_add.h, kernels/layer_norm.h): the two ops' values, keep
// mask and bits, forward and backward, and their contracts (x, bias, residual
// of one floating dtype; weight and ln_bias of that dtype or f32). The sum s =
// dropout(x + bias) + residual is kept for backward, as layer_norm keeps its
// input. On a GPU it runs one kernel each way (TANDEM_ADD_LAYER_NORM=fused, the
// default; =separate: the two ops' kernels; kernels/cuda/row_kernel_switches.h), which
// computes s as the layer norm loads its rows and the branch's gradient as it
// stores the residual's.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem::kernels {

Tensor bias_dropout_add_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual, double p, bool training,
                                   uint64_t seed, uint64_t subsequence, const int64_t* step, const Tensor& weight,
                                   const Tensor& ln_bias, double eps = 1e-5);

}  // namespace tandem::kernels
