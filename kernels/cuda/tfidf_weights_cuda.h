// CUDA TF-IDF weights; the contract of kernels/cpu/tfidf_weights_cpu.h in f32,
// except that an id outside [0, vocab) gets weight 0. Queued on `stream`.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void tfidf_weights_cuda(const void* ids, DType ids_dtype, const uint8_t* mask, const float* idf, int64_t vocab,
                        float* w, int64_t batch, int64_t seq, bool sublinear_tf, void* stream);

}  // namespace tandem::kernels
