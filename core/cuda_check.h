// Checked CUDA and cuBLAS calls: a failure throws tandem::Error with file:line,
// the API's error name and the expression that failed. Only for translation
// units built with TANDEM_WITH_CUDA.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/check.h"

namespace tandem {
const char* cublas_status_name(cublasStatus_t s);
}

#define TANDEM_CUDA_CHECK(expr)                                                              \
  do {                                                                                       \
    cudaError_t tandem_err_ = (expr);                                                        \
    if (tandem_err_ != cudaSuccess)                                                          \
      ::tandem::throw_error(__FILE__, __LINE__,                                              \
                            TANDEM_FORMAT("CUDA error {} ({}) in {}", cudaGetErrorName(tandem_err_), \
                                          cudaGetErrorString(tandem_err_), #expr));          \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately.
#define TANDEM_CUDA_CHECK_LAUNCH() TANDEM_CUDA_CHECK(cudaGetLastError())

#define TANDEM_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                       \
    cublasStatus_t tandem_st_ = (expr);                                                      \
    if (tandem_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::tandem::throw_error(__FILE__, __LINE__,                                              \
                            TANDEM_FORMAT("cuBLAS error {} in {}",                           \
                                          ::tandem::cublas_status_name(tandem_st_), #expr)); \
  } while (0)
