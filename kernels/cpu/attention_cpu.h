// CPU attention (kernels/attention.h): per (batch row, head), the S x S scores
// are formed, the softmax is taken row by row with the max subtracted, dropout
// is applied from the shared Philox rule, and the probabilities multiply V.
// f32 runs the selected ISA's kernels (kernels/cpu/isa/) on strided views of
// qkv (no gathered copies), one (batch, head) pair per task of the thread pool.
// f64 and 16-bit inputs take the reference path on Eigen matrices (16-bit
// widened to f32); all statistics are f32 (f64 for f64); results round once.
//
// qkv [B, S, 3*H*Dh] packed (3, H, Dh); mask [B, S] (1 = real) or null;
// out [B, S, H*Dh] in the dtype t; lse [B, H, S] in acc_t (f32, f64 for f64):
// the natural-log softmax normaliser of each query row, +inf for a row whose
// keys are all padded.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention_params.h"

namespace tandem::kernels {

void attention_forward_cpu(const void* qkv, const uint8_t* mask, void* out, void* lse, const AttentionShape& s,
                           const AttentionDropout& d, DType t);

// dqkv [B, S, 3*H*Dh] from dout [B, S, H*Dh]. Recomputes the probabilities as
// exp(score - lse) and the dropout decisions; uses D_i = sum_j P_ij dP_ij.
void attention_backward_cpu(const void* qkv, const uint8_t* mask, const void* lse, const void* dout, void* dqkv,
                            const AttentionShape& s, const AttentionDropout& d, DType t);

}  // namespace tandem::kernels
