// Where the gradient of a bias that a row op adds is formed:
// TANDEM_BIAS_GRADIENT=row|gemm, read once (core/env_switch.h; anything else is
// an Error naming the variable and the value). On every device: it decides how
// the transformer layer composes its ops (nn/transformer.cc, nn/layers.cc).
//
// The encoder layer leaves the biases of out_proj, linear1 and linear2 out of
// their GEMMs and hands them to the row op that reads the GEMM's output next
// (bias_dropout_add_layer_norm, bias_gelu_dropout, bias_dropout_add), which
// adds them for free as it loads the row.
//
//   row (the default, the path the H200 verified): that row op's backward also
//     forms the bias gradient, folding its input gradient into column sums as it
//     stores it (kernels/cuda/column_sum.cuh).
//   gemm: the linear before it forms the bias gradient instead
//     (kernels::linear_deferred_bias), and the row op gets the bias detached.
//     d loss / d b = sum over rows of d loss / d (y + b), and that is the
//     GEMM output's gradient dy, which dw's GEMM reads anyway: on a GPU cuBLASLt
//     sums it in that GEMM (the BGRADB epilogue; unless
//     TANDEM_CUBLASLT_EPILOGUES=0, which turns every epilogue off and leaves
//     linear's own column-sum pass), and the row op's backward, having no
//     column sums to form, walks the rows as its forward does (for
//     bias_gelu_dropout: kernels/cuda/bias_gelu_kernels.cuh). Why: on the H200
//     (third run, bf16, 32768 x 1024) the column sum took bias + GELU's backward
//     from 54.2 us (GELU alone) to 90.8, four such backwards a step at
//     ag_news_optimized's shape, while BGRADB left the bf16 weight-gradient GEMM
//     level (600 against 611 TFLOP/s at 16384 x 3072 x 768).
//     Numerics: the sum is of dy as stored in the compute dtype (what PyTorch's
//     nn.Linear bias gradient sums), where row sums the f32 value before it is
//     rounded to that dtype: in 16 bits the two agree to a rounding of each term;
//     in f32 to the summation order.
#pragma once

#include <optional>

namespace tandem::kernels {

enum class BiasGradient { Row, Gemm };

// TANDEM_BIAS_GRADIENT's choice, unless a test has overridden it.
BiasGradient bias_gradient();
// The choice an environment string names (null or empty: Row); throws Error naming the variable.
BiasGradient parse_bias_gradient(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_bias_gradient_for_testing(std::optional<BiasGradient> where);
// "row" or "gemm".
const char* bias_gradient_name(BiasGradient where);

}  // namespace tandem::kernels
