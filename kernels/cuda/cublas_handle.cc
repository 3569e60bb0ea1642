#include "kernels/cuda/cublas_handle.h"

#include "core/check.h"
#include "core/cuda_check.h"
#include "kernels/cuda/per_thread_handles.h"

namespace tandem::kernels {

namespace {
thread_local PerThreadHandles<cublasHandle_t, cublasDestroy> tls_handles;
}  // namespace

cublasHandle_t cublas_handle(int device, cudaStream_t stream) {
  cublasHandle_t& h = tls_handles.slot(device, "cuBLAS");
  if (!h) {
    TANDEM_CUBLAS_CHECK(cublasCreate(&h));
    // Deterministic, f32-exact by default: TF32 stays off unless a caller opts in per call.
    TANDEM_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  }
  TANDEM_CUBLAS_CHECK(cublasSetStream(h, stream));
  return h;
}

cudaDataType_t cublas_data_type(DType t, const char* op) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: TANDEM_FAIL("{}: dtype {} is not supported (f32, f16, bf16)", op, dtype_name(t));
  }
}

}  // namespace tandem::kernels
