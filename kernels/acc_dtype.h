// The DType of acc_t<T> (core/element.h): the type ops keep statistics, counts
// and losses in, f64 for f64 data and f32 for every other float type.
#pragma once

#include "core/dtype.h"

namespace tandem::kernels {

inline DType acc_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

}  // namespace tandem::kernels
