// The two switches of the CUDA attention op, each an environment variable read
// once (core/env_switch.h): unset or empty is the verified default, anything
// other than the two names is an Error naming the variable and the value.
// New kernels sit behind a switch that defaults to the verified path (issue
// #15) until a GPU has run them.
//
//   TANDEM_ATTENTION_FORWARD=tiled|pipelined|pipelined_wide  the forward kernel for f16/bf16:
//     Tiled (forward_kernel, the default), Pipelined
//     (kernels/cuda/attention_forward_pipelined.cuh: cp.async double buffering
//     and ldmatrix; 16 query rows per warp, four blocks per SM at head dims up
//     to 64) or PipelinedWide (the same kernel with 32 query rows per warp at
//     head dims up to 64, two blocks per SM; 16 at 128). f32 always runs Tiled.
//   TANDEM_ATTENTION_BACKWARD=split|fused  the backward path (kernels/cuda/attention_cuda.h):
//     Split (the default) or Fused (kernels/cuda/attention_backward_fused.cuh).
#pragma once

#include <optional>

namespace tandem::kernels {

enum class AttentionForwardKernel { Tiled, Pipelined, PipelinedWide };

// TANDEM_ATTENTION_FORWARD's kernel, unless a test has overridden it.
AttentionForwardKernel attention_forward_kernel();
// The kernel an environment string names (null or empty: Tiled); throws Error naming the variable.
AttentionForwardKernel parse_attention_forward(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel);

enum class AttentionBackwardPath { Split, Fused };

// TANDEM_ATTENTION_BACKWARD's path, unless a test has overridden it.
AttentionBackwardPath attention_backward_path();
// The path an environment string names (null or empty: Split); throws Error naming the variable.
AttentionBackwardPath parse_attention_backward_path(const char* value);
// Tests force a path; nullopt returns to the environment's value.
void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path);
// "split" or "fused".
const char* attention_backward_path_name(AttentionBackwardPath path);

}  // namespace tandem::kernels
