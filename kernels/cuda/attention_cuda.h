// CUDA attention: fused flash-style forward and backward (kernels/cuda/attention.cu).
// Same layouts and results as kernels/cpu/attention_cpu.h, with lse always f32;
// f32, f16 and bf16; head_dim <= kAttentionMaxHeadDimCuda (kernels/attention.h),
// any sequence length. Queued on `stream` (a cudaStream_t).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention_params.h"
#include "kernels/cuda/attention_forward_choice.h"

namespace tandem::kernels {

// `kernel` picks the forward kernel for f16/bf16 (attention() passes attention_forward_kernel());
// f32 runs Tiled whatever it says. Both give the same results.
void attention_forward_cuda(const void* qkv, const uint8_t* mask, void* out, float* lse, const AttentionShape& s,
                            const AttentionDropout& d, DType t, void* stream,
                            AttentionForwardKernel kernel = AttentionForwardKernel::Tiled);

// `out` is the forward's output (the backward needs rowsum(dout * out)).
void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream);

}  // namespace tandem::kernels
