// Host side of the GPU out-of-range index record (kernels/cuda/index_error_cuda.h).
#include <atomic>
#include <mutex>

#include "core/cuda_check.h"
#include "kernels/cuda/index_error_cuda.h"

namespace tandem::kernels {

namespace {

const char* op_name(int32_t op) {
  switch (static_cast<IndexErrorOp>(op)) {
    case IndexErrorOp::EmbeddingIds: return "embedding: token id";
    case IndexErrorOp::CrossEntropyLabels: return "cross_entropy: label";
    case IndexErrorOp::AccuracyLabels: return "accuracy_count: label";
    default: return "an index";
  }
}

std::atomic<IndexErrorRecord*> g_record{nullptr};
std::once_flag g_once;

}  // namespace

IndexErrorRecord* index_error_record() {
  std::call_once(g_once, [] {
    void* p = nullptr;
    TANDEM_CUDA_CHECK(cudaHostAlloc(&p, sizeof(IndexErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
    *static_cast<IndexErrorRecord*>(p) = IndexErrorRecord{0, 0, 0, 0, 0};
    void* device_view = nullptr;
    TANDEM_CUDA_CHECK(cudaHostGetDevicePointer(&device_view, p, 0));
    // Under unified virtual addressing (every 64-bit platform CUDA supports) both views are one address.
    TANDEM_CHECK(device_view == p, "index error record: mapped host memory has a different device address");
    g_record.store(static_cast<IndexErrorRecord*>(p), std::memory_order_release);
  });
  return g_record.load(std::memory_order_acquire);
}

void raise_pending_index_error_cuda() {
  volatile IndexErrorRecord* rec = g_record.load(std::memory_order_acquire);
  if (!rec) return;  // no kernel has been given the record yet
  if (rec->state != 2) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  const int32_t op = rec->op;
  const int64_t position = rec->position, value = rec->value, limit = rec->limit;
  rec->state = 0;
  TANDEM_FAIL("{} {} at flat position {} is outside [0, {}) (reported by a CUDA kernel)", op_name(op), value, position,
              limit);
}

}  // namespace tandem::kernels
