// Element-wise reductions on host buffers, the arithmetic of the ring backend.
//
// host_reduce sets dst = a (op) b elementwise (Sum and Avg add, Max keeps
// the larger, NaN wins); `a` may be `dst` itself. 16-bit floats are loaded to
// f32, combined, and rounded to nearest even once per call. host_divide
// finishes an Avg (integers truncate toward zero). Both stream through memory
// once: 2 reads + 1 write per element for host_reduce, which is what bounds
// the ring's reduce step.
#pragma once

#include <cstdint>

#include "comm/process_group.h"
#include "core/dtype.h"

namespace tandem::comm {

void host_reduce(void* dst, const void* a, const void* b, DType dtype, int64_t n, ReduceOp op);
void host_divide(void* dst, DType dtype, int64_t n, int divisor);

}  // namespace tandem::comm
