// Checked NCCL calls: a failure throws tandem::Error with file:line, NCCL's
// error name, its last detailed message and the expression that failed.
// ncclInProgress is not a failure (non-blocking communicators return it while
// an operation is being set up). Only for translation units built with CUDA.
#pragma once

#include <nccl.h>

#include "core/check.h"

#define TANDEM_NCCL_CHECK(expr)                                                                       \
  do {                                                                                                \
    ncclResult_t tandem_nccl_ = (expr);                                                               \
    if (tandem_nccl_ != ncclSuccess && tandem_nccl_ != ncclInProgress)                                \
      ::tandem::throw_error(__FILE__, __LINE__,                                                       \
                            TANDEM_FORMAT("NCCL error {} ({}) in {}", ::ncclGetErrorString(tandem_nccl_), \
                                          ::ncclGetLastError(nullptr), #expr));                       \
  } while (0)
