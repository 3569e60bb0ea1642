// CPU reference for the full reductions: a single f64 accumulator over the n
// elements (exact enough to serve as the reference for f32 and 16-bit GPU sums).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// out[0] = scale * sum(x), stored in dtype t.
void sum_cpu(const void* x, void* out, DType t, int64_t n, double scale);
// dx[i] = scale * dy[0] for all i (the backward of sum/mean).
void broadcast_scalar_cpu(const void* dy, void* dx, DType t, int64_t n, double scale);

}  // namespace tandem::kernels
