// Attention through cuDNN's fused scaled-dot-product attention (the cuDNN
// frontend's graph API, sdpa and sdpa_backward): a second, independent
// implementation of kernels/attention.h's contract on the GPU, used as a
// cross-check of Tandem's own kernels in the GPU tests and in
// bench/attention_bench (`--backend cudnn`). Built when cuDNN and the cuDNN
// frontend headers are found (TANDEM_WITH_CUDNN_ATTENTION; docs/kernels.md).
//
// Same layouts as attention_forward_cuda / attention_backward_cuda: qkv
// [B, S, 3*H*Dh] packed (3, H, Dh), out [B, S, H*Dh], dqkv like qkv; cuDNN
// reads and writes them in place through strides (no transposes). The softmax
// statistics go to `stats`, f32 [B, H, S] (cuDNN's own; only the backward here
// reads them).
//
// What it accepts, narrower than Tandem's kernels: f16 and bf16 (cuDNN's fused
// attention has no f32), head_dim a multiple of 8 up to 128, no attention
// dropout (cuDNN draws its own random numbers, so results could not be
// compared), and a key-padding mask that is a prefix of real tokens in every
// sequence (cuDNN's padding mask is a length per sequence; the lengths are
// read from the mask on the host, which synchronises). Query rows at padded
// positions attend to the real keys, as in Tandem. Anything else is an Error
// naming what is unsupported. Not run on a GPU yet.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention_params.h"

namespace tandem::kernels {

void attention_forward_cudnn(const void* qkv, const uint8_t* mask, void* out, float* stats, const AttentionShape& s,
                             DType t, int device, void* stream);

void attention_backward_cudnn(const void* qkv, const uint8_t* mask, const void* out, const float* stats,
                              const void* dout, void* dqkv, const AttentionShape& s, DType t, int device,
                              void* stream);

}  // namespace tandem::kernels
