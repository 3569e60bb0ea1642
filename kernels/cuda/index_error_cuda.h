// The host-mapped record where GPU kernels report an out-of-range index
// (see kernels/index_errors.h for the policy). One record per process, in
// pinned, mapped, portable host memory, so kernels on every device can write
// it and the host can read it without a copy or a synchronisation.
#pragma once

#include <cstdint>

namespace tandem::kernels {

enum class IndexErrorOp : int32_t { None = 0, EmbeddingIds = 1, CrossEntropyLabels = 2, AccuracyLabels = 3 };

struct IndexErrorRecord {
  int32_t state;     // 0: empty, 1: a kernel is writing it, 2: complete
  int32_t op;        // IndexErrorOp
  int64_t position;  // flat position in the index tensor
  int64_t value;     // the offending index
  int64_t limit;     // valid indices are [0, limit)
};

// The record as kernels address it (allocated on first use; needs a CUDA device).
IndexErrorRecord* index_error_record();
// Throws Error for a complete record and clears it.
void raise_pending_index_error_cuda();

#if defined(__CUDACC__)
// First reporter wins; later ones see state != 0 and return.
__device__ inline void report_index_error(IndexErrorRecord* rec, IndexErrorOp op, int64_t position, int64_t value,
                                          int64_t limit) {
  if (atomicCAS(&rec->state, 0, 1) != 0) return;
  rec->op = static_cast<int32_t>(op);
  rec->position = position;
  rec->value = value;
  rec->limit = limit;
  __threadfence_system();
  atomicExch(&rec->state, 2);
}
#endif

}  // namespace tandem::kernels
