// CUDA embedding kernels; same contracts as kernels/cpu/embedding_cpu.h,
// queued on `stream`, except that ids are checked on the device: an id outside
// [0, vocab) is reported through kernels/cuda/index_error_cuda.h, its forward
// row gets the position embedding only and backward ignores it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

void embedding_forward_cuda(const void* ids, DType id_type, const void* tok, const void* pos, void* out, int64_t batch,
                            int64_t seq, int64_t dim, int64_t vocab, DType t, void* stream);
void embedding_backward_cuda(const void* dout, const void* ids, DType id_type, void* dtok, void* dpos, int64_t batch,
                             int64_t seq, int64_t dim, int64_t vocab, int64_t positions, DType t, int device,
                             void* stream);

}  // namespace tandem::kernels
