// Where a 16-bit forward's linear parameter gradients become f32:
// TANDEM_LINEAR_GRADIENTS=cast|master, read once (core/env_switch.h; anything
// else is an Error naming the variable and the value). On every device: it
// decides how the linears hand the gradients they form back to their f32
// master parameters (nn/parameter_casts.h: linear_parameter).
//
//   cast (the default, the path the H200 verified, PyTorch's autocast): a
//     linear multiplies by casts of its master weight and bias, so its backward
//     forms dw and db in the compute dtype (f32 sums, rounded to bf16 or f16),
//     and each cast's backward converts one to f32: a temporary and one more op
//     (one kernel launch) per parameter. At ag_news_optimized that is 17 weights
//     and the 5 biases the linears' backward sums (the attention in-projections'
//     and the head's; the 12 the encoder's row ops add and sum are
//     TANDEM_BIAS_GRADIENT's: with `gemm`, all 17): the third H200 run's eager op
//     table had 35 CastBackward ops, these and the embedding output's, at 0.164 ms.
//   master: the linear multiplies by copies with no history, and its backward
//     writes the f32 gradients of the master parameters themselves
//     (kernels::LinearParameter): dw from the GEMM's f32 sum, db from the
//     column sum's (or BGRADB's); no cast backward, no 16-bit temporary. What
//     Megatron-LM's gradient-accumulation fusion does to the weight-gradient
//     GEMM's output type.
//     Numerics: each gradient is its f32 sum rounded once, to f32, where cast
//     rounds it to the compute dtype first: rounding `master`'s gradient to that
//     dtype gives cast's bits on the CPU (the same sums), to the GEMM's
//     summation order on a GPU. So these gradients are more accurate than
//     PyTorch's autocast's (bf16 before the cast back), and fp16 loss scaling no
//     longer sees one of them overflow f16's range (it still sees the
//     activations' gradients). Every other value (logits, activation gradients,
//     the row ops' bias gradients) is the same bits. Against f64 gradients
//     (bench/gradient_precision_bench.cc, docs/results/linear_gradients_cpu.md)
//     the median error of bf16 weight gradients drops 3-6 %: the forward's own
//     roundings are most of a 16-bit step's gradient error.
#pragma once

#include <optional>

namespace tandem::kernels {

enum class LinearGradients { Cast, Master };

// TANDEM_LINEAR_GRADIENTS's choice, unless a test has overridden it.
LinearGradients linear_gradients();
// The choice an environment string names (null or empty: Cast); throws Error naming the variable.
LinearGradients parse_linear_gradients(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_linear_gradients_for_testing(std::optional<LinearGradients> where);
// "cast" or "master".
const char* linear_gradients_name(LinearGradients where);

}  // namespace tandem::kernels
