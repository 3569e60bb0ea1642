// linear's GEMMs with cuBLASLt's fused epilogues, the way PyTorch fuses
// addmm's bias (at::cuda::blas::gemm_and_bias):
//   forward   y^T = w . x^T + b      CUBLASLT_EPILOGUE_BIAS   (no separate bias pass over y)
//   backward  dw^T = x^T . dy, db = sum_r dy[r, :]
//                                    CUBLASLT_EPILOGUE_BGRADB (db from the GEMM's own read of dy)
// Both compute in f32 with no TF32, like the cublasGemmEx path in linear.cu, and split-K partial
// sums are never added in the output type (f16 lost 5-15 ulps that way).
//
// The switch, TANDEM_CUBLASLT_EPILOGUES: `forward` (the default) puts the bias in
// the forward GEMM's epilogue and keeps the hand-written bias-gradient pass; `1`
// uses both epilogues; `0` neither (the GemmEx + hand-written bias kernels). The
// default is what the H200 measured (docs/results/gpu.md, both runs): the bias
// epilogue made the bf16 forward GEMM 1.42x faster at 16384x3072x768 (f32
// 1.06x), while BGRADB left the bf16 backward level (600 against 611 TFLOP/s)
// and made the f32 one 1.22x slower. Both passed their parity tests there. Each
// call returns false when cuBLASLt has no algorithm for the problem (its
// heuristic returns none), and linear then uses the other path, so no setting
// makes a shape fail.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace tandem::kernels {

enum class CublasLtEpilogues { Forward, Off, All };

// TANDEM_CUBLASLT_EPILOGUES, read once ("forward", "0" or "1"; anything else is an Error naming the
// variable), unless a test has overridden it.
CublasLtEpilogues cublaslt_epilogues();
// The switch's value for an environment string (null or empty: Forward); throws Error naming the variable.
CublasLtEpilogues parse_cublaslt_epilogues(const char* value);
// Tests force the switch; nullopt returns to the environment's value.
void set_cublaslt_epilogues_for_testing(std::optional<CublasLtEpilogues> epilogues);
// "forward", "0" or "1".
const char* cublaslt_epilogues_name(CublasLtEpilogues epilogues);

// y[rows, out] = x[rows, in] . w[out, in]^T + b[out] (row-major), on `stream`. False: not run.
bool gemm_bias_lt(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in, int64_t out,
                  DType t, int device, cudaStream_t stream);
// dw[out, in] = dy[rows, out]^T . x[rows, in] and db[out] = the column sums of dy, on `stream`; dw of
// dw_dtype and db of db_dtype (each t, or f32 for a master parameter). False: not run.
bool gemm_weight_bias_grad_lt(const void* dy, const void* x, void* dw, void* db, int64_t rows, int64_t in,
                              int64_t out, DType t, DType dw_dtype, DType db_dtype, int device, cudaStream_t stream);

}  // namespace tandem::kernels
