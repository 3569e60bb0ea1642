// CUDA attention: fused flash-style forward and backward (kernels/cuda/attention.cu).
// Same layouts and results as kernels/cpu/attention_cpu.h, with lse always f32;
// f32, f16 and bf16; head_dim <= kAttentionMaxHeadDimCuda (kernels/attention.h),
// any sequence length. Queued on `stream` (a cudaStream_t).
//
// Two backward paths, both deterministic (bit-identical run to run):
//   split  rowdot, dK/dV, then a separate dQ pass: seven S x S x Dh products (the default);
//   fused  rowdot, dK/dV with each key tile's share of dQ into f32 scratch, then a
//          fixed-order sum of the shares: five products (kernels/cuda/attention_backward_fused.cuh).
// TANDEM_ATTENTION_BACKWARD=split|fused picks one; fused stays opt-in until a GPU has run it.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "kernels/attention_params.h"
#include "kernels/cuda/attention_forward_choice.h"

namespace tandem::kernels {

enum class AttentionBackwardPath { Split, Fused };

// TANDEM_ATTENTION_BACKWARD, read once ("split" or "fused"; unset or empty: split; anything else is an
// Error naming the variable and the value), unless a test has overridden it.
AttentionBackwardPath attention_backward_path();
// The path for an environment string (null or empty: split); throws Error naming the variable.
AttentionBackwardPath parse_attention_backward_path(const char* value);
// Tests force a path; nullopt returns to the environment's value.
void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path);
const char* attention_backward_path_name(AttentionBackwardPath path);

// `kernel` picks the forward kernel for f16/bf16 (attention() passes attention_forward_kernel());
// f32 runs Tiled whatever it says. Both give the same results.
void attention_forward_cuda(const void* qkv, const uint8_t* mask, void* out, float* lse, const AttentionShape& s,
                            const AttentionDropout& d, DType t, void* stream,
                            AttentionForwardKernel kernel = AttentionForwardKernel::Tiled);

// `out` is the forward's output (the backward needs rowsum(dout * out)). Runs attention_backward_path().
void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream);
// The same on a given path. Fused falls back to split when one (b, h)'s dQ partials alone would exceed
// the scratch limit (attention_backward_fused.cuh: S * ceil(S/64) * Dh > 16 Mi).
void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream, AttentionBackwardPath path);

}  // namespace tandem::kernels
