// How Tensor-level ops reach their CUDA kernels: the current stream of the
// tensor's device, and a guard that turns a CUDA call into a clear error in a
// build without CUDA.
#pragma once

#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace tandem::kernels {

inline void* stream_of(const Tensor& t) { return cuda::current_stream(t.device().index).handle(); }

}  // namespace tandem::kernels

#if TANDEM_WITH_CUDA
#define TANDEM_CUDA_ONLY(...) __VA_ARGS__
#else
#define TANDEM_CUDA_ONLY(...) TANDEM_FAIL("this op on a CUDA tensor: Tandem was built without CUDA")
#endif
