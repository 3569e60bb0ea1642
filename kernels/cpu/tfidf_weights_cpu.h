// CPU reference for kernels/tfidf_weights.h: one pass per row computes the
// unnormalised weights and their sum of squares in idf's dtype, a second
// divides by the norm. The caller has checked the ids' range.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void tfidf_weights_cpu(const void* ids, DType ids_dtype, const uint8_t* mask, const void* idf, void* w, DType t,
                       int64_t batch, int64_t seq, bool sublinear_tf);

}  // namespace tandem::kernels
