// AllocationLedger: which device allocations this thread made, and which
// device frees of older memory it asked for, while the ledger was open.
//
// It exists for CUDA graph capture (train/graph_step.h): during capture the
// allocator's allocations and frees become the graph's memory nodes, and a
// free node may only free a graph allocation, while an allocation the graph
// does not free keeps it from being launched again. A ledger opened around the
// capture tells both apart exactly, by address, and counts only this thread:
// data-loader workers allocating their batches meanwhile do not disturb it.
#pragma once

#include <cstddef>
#include <unordered_map>

namespace tandem::cuda_memory {

class AllocationLedger {
 public:
  AllocationLedger();  // opens this thread's ledger; one at a time per thread
  ~AllocationLedger();
  AllocationLedger(const AllocationLedger&) = delete;
  AllocationLedger& operator=(const AllocationLedger&) = delete;

  size_t live_bytes() const;  // allocated while open and not freed since
  size_t foreign_frees() const { return foreign_frees_; }  // bytes freed that were allocated before it opened

  // The allocator's hooks (core/allocator.cc).
  static void on_allocate(void* p, size_t nbytes);
  static void on_free(void* p, size_t nbytes);

 private:
  std::unordered_map<void*, size_t> live_;
  size_t foreign_frees_ = 0;
};

}  // namespace tandem::cuda_memory
