// Index tensors (token ids, class labels) on the CPU: i32 or i64 elements
// read as int64, and the range check every op that indexes with them runs
// before touching memory.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

inline int64_t index_at(const void* indices, DType t, int64_t i) {
  return t == DType::I32 ? static_cast<const int32_t*>(indices)[i] : static_cast<const int64_t*>(indices)[i];
}

// The flat position of the first index outside [0, limit), or -1 if all are inside.
// t must be i32 or i64.
int64_t first_out_of_range_cpu(const void* indices, DType t, int64_t n, int64_t limit);

}  // namespace tandem::kernels
