// One cuBLAS handle per (thread, device), created on first use and bound to the
// caller's stream on every call, so GEMMs follow the current stream like every
// other kernel. Handles are per thread because cuBLAS handles are not safe to
// share across threads that set different streams.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/dtype.h"

namespace tandem::kernels {

cublasHandle_t cublas_handle(int device, cudaStream_t stream);

// The cuBLAS data type of f32, f16 and bf16 tensors; any other dtype is an Error naming `op`.
cudaDataType_t cublas_data_type(DType t, const char* op);

}  // namespace tandem::kernels
