// Where a 16-bit forward's weight gradients become f32:
// TANDEM_WEIGHT_GRADIENT=cast|master, read once (core/env_switch.h; anything
// else is an Error naming the variable and the value). On every device: it
// decides how the linears hand their weights' gradients back to the f32 master
// weights (nn/parameter_casts.h: compute_weight).
//
//   cast (the default, the path the H200 verified, PyTorch's autocast): the
//     linear multiplies by a cast of the master weight, so its backward forms
//     dw in the compute dtype (f32 accumulation in the GEMM, rounded to bf16 or
//     f16), and the cast's backward converts it to f32: a [out, in] temporary
//     and one more op (one kernel launch) per weight, 17 a step at
//     ag_news_optimized (the third H200 run's eager op table: 35 CastBackward
//     ops, weights and biases, 0.164 ms).
//   master: the linear multiplies by a copy of the master weight with no
//     history, and its backward's dw GEMM writes the f32 gradient of the master
//     weight itself (kernels::LinearWeight): no cast backward, no 16-bit
//     temporary. What Megatron-LM's gradient-accumulation fusion does to
//     the weight-gradient GEMM's output type.
//     Numerics: dw is the GEMM's f32 sum rounded once, to f32, where cast rounds
//     it to the compute dtype first: rounding `master`'s gradient to that dtype
//     gives cast's bits on the CPU (one Eigen sum in either), to the GEMM's
//     summation order on a GPU. So the weight gradients are more accurate than
//     PyTorch's autocast (whose dw is bf16), and fp16 loss scaling no longer sees
//     a weight gradient overflow f16's range (it still sees the activations'
//     gradients). Every other value (logits, activation and bias gradients) is
//     the same bits. The biases keep their casts.
#pragma once

#include <optional>

namespace tandem::kernels {

enum class WeightGradient { Cast, Master };

// TANDEM_WEIGHT_GRADIENT's choice, unless a test has overridden it.
WeightGradient weight_gradient();
// The choice an environment string names (null or empty: Cast); throws Error naming the variable.
WeightGradient parse_weight_gradient(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_weight_gradient_for_testing(std::optional<WeightGradient> where);
// "cast" or "master".
const char* weight_gradient_name(WeightGradient where);

}  // namespace tandem::kernels
