// CUDA linear: cuBLAS GEMMs with f32 compute (no TF32, so f32 results track the
// CPU reference), plus hand-written bias kernels. Same contracts as
// kernels/cpu/linear_cpu.h, queued on `stream`.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void linear_forward_cuda(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in,
                         int64_t out, DType t, int device, void* stream);
// dw is of dw_dtype and db of db_dtype: t, or f32 for a master parameter (kernels::LinearParameter),
// which dw's GEMM and db's column sum then write from their f32 sums. db_in_gemm: db is summed in
// dw's GEMM (cuBLASLt's BGRADB) unless TANDEM_CUBLASLT_EPILOGUES=0, as with that switch at 1
// (kernels/linear.h's linear_deferred_bias); either way linear's column-sum pass where cuBLASLt has
// no algorithm.
void linear_backward_cuda(const void* dy, const void* x, const void* w, void* dx, void* dw, void* db, int64_t rows,
                          int64_t in, int64_t out, DType t, DType dw_dtype, DType db_dtype, int device, void* stream,
                          bool db_in_gemm = false);

}  // namespace tandem::kernels
