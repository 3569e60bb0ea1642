// Multi-head self-attention with a key-padding mask, as in PyTorch's
// nn.MultiheadAttention after its input projection and before its output
// projection:
//
//   out[b, i, h*Dh:(h+1)*Dh] = sum_j dropout(softmax_j(q_i . k_j / sqrt(Dh) + mask_j)) v_j
//
// qkv is [B, S, 3*H*Dh], the output of one linear layer, packed on the last
// axis as (3, H, Dh): all of q, then all of k, then all of v (PyTorch's
// in_proj order), each head's Dh values contiguous. The result is
// [B, S, H*Dh] (heads concatenated, ready for the output projection), in the
// dtype of qkv; the softmax statistics are f32 (f64 for f64).
//
// key_padding_mask is [B, S] u8, 1 = real token, 0 = padding (the opposite of
// PyTorch's bool mask, where True means "ignore"); undefined means no padding.
// Padded keys get -inf before the softmax, so they receive probability exactly
// 0: their k and v never influence any output and get zero gradient. Query rows
// at padded positions still produce outputs (attending to the real keys, as
// PyTorch does); those outputs depend on the padded q, but they never feed any
// output at a real position. Gradients at real positions are therefore
// independent of padded q/k/v as long as the upstream gradient at padded rows
// is zero (a masked pooling or loss does that). A row whose keys are all padded
// (an all-padding sequence) outputs zeros and passes zero gradient, not NaN,
// as PyTorch 2.x does.
//
// Dropout with probability dropout_p in [0, 1) drops attention probabilities
// after the softmax, deciding each (b, h, i, j) from the Philox stream (seed,
// offset) with p rounded to a multiple of 2^-16, and scales kept ones by the
// inverse of that rounded keep rate; see kernels/attention_params.h. The
// decisions are the same on CPU and GPU and are recomputed in backward.
// dropout_p = 0 is the exact identity.
//
// Differentiable with respect to qkv. Backward keeps qkv, the mask, the
// softmax normalisers and (on CUDA) the output: modifying the output in place
// before backward is an error (the saved-tensor version check).
//
// On CUDA: f32, f16, bf16, head_dim <= 128, any sequence length (fused
// flash-style kernels, see kernels/cuda/attention.cu and docs/attention.md);
// on CPU: every floating dtype, any size.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem::kernels {

// dropout_step: null, or the step count in the qkv's memory space (a capturable
// step): the Philox subsequence is then dropout_subsequence(offset, dropout_step)
// (kernels/dropout_mask.h), read when the kernels run.
Tensor attention(const Tensor& qkv, const Tensor& key_padding_mask, int num_heads, double dropout_p = 0.0,
                 uint64_t seed = 0, uint64_t offset = 0, const int64_t* dropout_step = nullptr);

// The largest head dimension the CUDA kernels accept.
inline constexpr int64_t kAttentionMaxHeadDimCuda = 128;

}  // namespace tandem::kernels
