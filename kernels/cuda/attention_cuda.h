// CUDA attention: fused flash-style forward and backward (kernels/cuda/attention.cu).
// Same layouts and results as kernels/cpu/attention_cpu.h, with lse always f32;
// f32, f16 and bf16; head_dim <= kAttentionMaxHeadDimCuda (kernels/attention.h),
// any sequence length. Queued on `stream` (a cudaStream_t).
//
// Two backward paths, both deterministic (bit-identical run to run):
//   split  rowdot, dK/dV, then a separate dQ pass: seven S x S x Dh products;
//   fused  rowdot, dK/dV with each key tile's share of dQ into f32 scratch, then a
//          fixed-order sum of the shares: five products (kernels/cuda/attention_backward_fused.cuh);
//   split_pipelined  split with both passes' streamed tiles double-buffered by cp.async
//          (kernels/cuda/attention_backward_pipelined.cuh; 16 bits; the same bits as split).
// TANDEM_ATTENTION_BACKWARD=auto|split|fused|split_pipelined picks one (kernels/cuda/attention_switches.h); auto,
// the default, is fused in f32 and with dropout, split_pipelined otherwise (resolve_attention_backward).
//
// Saved keep bits (attention() does this under TANDEM_ATTENTION_DROPOUT_KEEP=saved): a forward given
// keep_out (attention_keep_bytes(s) bytes) writes each dropout Philox block's 8 keep bits there, and a
// backward given the same bytes as keep_in reads them instead of computing any Philox block: the same
// decisions, so the same bits as recomputing. Without dropout both are ignored.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention_params.h"
#include "kernels/cuda/attention_switches.h"

namespace tandem::kernels {

// `kernel` picks the forward kernel for f16/bf16 (attention() passes attention_forward_kernel());
// f32 runs Tiled whatever it says. Both give the same results. `device` holds the tensors (scratch
// for trimmed key tiles comes from its pool). Forward and backward alike skip the key tiles past each
// batch row's last real key where attention_key_tiles() is Trimmed and there is a mask (the same bits).
void attention_forward_cuda(const void* qkv, const uint8_t* mask, void* out, float* lse, const AttentionShape& s,
                            const AttentionDropout& d, DType t, int device, void* stream,
                            AttentionForwardKernel kernel = AttentionForwardKernel::Tiled,
                            uint8_t* keep_out = nullptr);

// Thread blocks of the forward kernel `kernel` picks (as above) that fit one multiprocessor of
// the current device at once (its registers and shared memory; cudaOccupancyMaxActiveBlocksPerMultiprocessor):
// the occupancy a bench reports beside the kernel's speed. Throws Error for head_dim > 128.
int attention_forward_blocks_per_sm(int64_t head_dim, DType t,
                                    AttentionForwardKernel kernel = AttentionForwardKernel::Tiled);

// The same for the backward path's main kernel: dkdv_kernel (split), dkdv_pipelined_kernel
// (split_pipelined) or fused_backward_kernel (fused; auto as without dropout).
int attention_backward_blocks_per_sm(int64_t head_dim, DType t, AttentionBackwardPath path);

// `out` is the forward's output (the backward needs rowsum(dout * out)). Runs attention_backward_path().
void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream);
// The same on a given path (auto: resolve_attention_backward with t and d). Fused falls back to split when one (b, h)'s dQ partials alone would exceed
// the scratch limit (attention_backward_fused.cuh: S * ceil(S/64) * Dh > 16 Mi).
void attention_backward_cuda(const void* qkv, const uint8_t* mask, const void* out, const float* lse,
                             const void* dout, void* dqkv, const AttentionShape& s, const AttentionDropout& d,
                             DType t, int device, void* stream, AttentionBackwardPath path,
                             const uint8_t* keep_in = nullptr);

}  // namespace tandem::kernels
