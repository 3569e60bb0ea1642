// Which CUDA attention forward kernel runs for f16/bf16 inputs: Tiled
// (forward_kernel, the verified one, the default) or Pipelined
// (kernels/cuda/attention_forward_pipelined.cuh: cp.async double buffering
// and ldmatrix, not yet run on a GPU; issue #15: new kernels sit behind a
// switch that defaults to the verified path). f32 always runs Tiled.
//
// The switch: TANDEM_ATTENTION_FORWARD=tiled|pipelined, read once; unset or
// empty is tiled, anything else is an Error naming the variable and the value.
#pragma once

#include <optional>

namespace tandem::kernels {

enum class AttentionForwardKernel { Tiled, Pipelined };

// TANDEM_ATTENTION_FORWARD's kernel, unless a test has overridden it.
AttentionForwardKernel attention_forward_kernel();
// The kernel an environment string names (null or empty: Tiled); throws Error naming the variable.
AttentionForwardKernel parse_attention_forward(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel);

}  // namespace tandem::kernels
